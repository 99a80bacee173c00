"""The embedded mode (SQLite, no server): migrations apply from scratch and the database-held
rules (split lock, immutable votes and frozen pools) hold there too."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = r"""
from django.db import IntegrityError, transaction
from django.utils import timezone
from annotation.models import CandidatePool, PoolMember, Vote, WorkItem
from django.contrib.auth.models import User
from tests.trajectories.factories import proposal, run_factory
from trajectories.models import SplitGroup
from trajectories.services.proposals import trajectories_store

run = run_factory()
trajectories_store(run=run, proposals=[proposal(1, 0, 10)])
item = WorkItem.objects.get()
user = User.objects.create(username="u")
vote = Vote.objects.create(item=item, annotator=user, label="usable")
pool = CandidatePool.objects.create(video=run.video, run=run, version=1)
member = PoolMember.objects.create(pool=pool, trajectory=item.trajectory, role="single", n_obs=1,
                                   frames=b"\0" * 4, boxes=b"\0" * 16)
CandidatePool.objects.filter(pk=pool.pk).update(frozen_at=timezone.now())
SplitGroup.objects.filter(pk=run.video.split_group_id).update(locked_at=timezone.now())
refused = []
for name, change in [
    ("vote edit", lambda: Vote.objects.filter(pk=vote.pk).update(label="unusable")),
    ("vote delete", lambda: Vote.objects.filter(pk=vote.pk).delete()),
    ("pool edit", lambda: CandidatePool.objects.filter(pk=pool.pk).update(reason="x")),
    ("member edit", lambda: PoolMember.objects.filter(pk=member.pk).update(n_obs=2)),
    ("member insert", lambda: PoolMember.objects.create(pool=pool, trajectory=item.trajectory, role="fragment",
                                                        n_obs=1, frames=b"\0" * 4, boxes=b"\0" * 16)),
    ("split change", lambda: SplitGroup.objects.filter(pk=run.video.split_group_id).update(split="test")),
]:
    try:
        with transaction.atomic():
            change()
    except IntegrityError:
        refused.append(name)
print("REFUSED", ",".join(refused))
"""


def test_sqlite_migrates_and_holds_the_database_rules(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SECRET_KEY")}
    env.update(TRAJLAB_VAR_DIR=str(tmp_path / "var"), CELERY_BROKER_URL="filesystem://")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    check = subprocess.run([sys.executable, "manage.py", "shell", "-c", CHECK], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    refused = check.stdout.split("REFUSED", 1)[1].strip().split(",")
    assert refused == ["vote edit", "vote delete", "pool edit", "member edit", "member insert", "split change"]
