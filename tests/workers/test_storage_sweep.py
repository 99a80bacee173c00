"""The sweep of stored objects no record names (``workers.storage_sweep``), on local disk and in a
real S3 bucket (SeaweedFS, tests/storage_server.py): orphans of snapshots, training runs and
search indexes are found with their reason and removed on request; what a record names, and
anything written too recently to judge, stays."""
from __future__ import annotations

import datetime as dt
import os
import time

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotation.models import RelationSnapshot, Release
from common import storage
from workers.models import RunStatus, TrainingRun
from workers.storage_sweep import orphan_objects, storage_sweep

pytestmark = pytest.mark.django_db


def _snapshot(key: str) -> RelationSnapshot:
    return RelationSnapshot.objects.create(split="train", name="s", content_sha256="0" * 64, path=key,
                                           pool_versions={}, counts={}, complete=True, sealed_at=timezone.now())


def _layout(objects, tmp_path) -> dict:
    """Objects of every kind the sweep judges: named by a record, or not."""
    kept = _snapshot("snapshots/aaaa-1")
    run = TrainingRun.objects.create(snapshot=kept, model_kind="vtrajembed", config={}, steps_total=4,
                                     status=RunStatus.SUCCEEDED, out_dir="training/0",
                                     checkpoint_key="")
    run.out_dir = f"training/{run.pk}"
    run.checkpoint_key = f"training/{run.pk}/checkpoint-00000004.pt"
    run.save(update_fields=["out_dir", "checkpoint_key"])
    gone = run.pk + 1000
    source = tmp_path / "blob"
    source.write_bytes(b"x" * 10)
    Release.objects.create(name="r", version="1.0.0", splits=["train"], path="releases/r/1.0.0",
                           manifest_sha256="0" * 64, counts={}, config={}, stats={}, changes={},
                           created_at=timezone.now())
    named = ["snapshots/aaaa-1/relations.npz", "releases/r/1.0.0/data/relations/train.parquet", run.checkpoint_key, f"training/{run.pk}/result.json",
             f"search/run-{run.pk}/abc/index.faiss"]
    orphans = {"snapshots/bbbb-2/relations.npz": "no relation snapshot names its folder",
               "releases/r/1.1.0/SHA256SUMS": "no release names its folder",
               f"training/{run.pk}/checkpoint-00000002.pt": f"training run {run.pk} names another checkpoint",
               f"training/{gone}/checkpoint-00000002.pt": f"training run {gone} is gone",
               f"search/run-{gone}/abc/index.faiss": f"training run {gone} is gone"}
    for key in [*named, *orphans]:
        objects.put_file(key, source)
    objects.put_file("videos/untouched.mp4", source)       # not a prefix the sweep judges
    return {"named": named, "orphans": orphans}


def _age_local(objects, hours: float) -> None:
    then = time.time() - hours * 3600
    for path in objects.root.rglob("*"):
        if path.is_file():
            os.utime(path, (then, then))


def test_local_orphans_are_found_with_their_reason_and_removed_on_request(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    storage.reset()
    objects = storage.store()
    layout = _layout(objects, tmp_path)
    assert orphan_objects() == []                        # everything is younger than a day: not judged
    _age_local(objects, 25)
    found = {o.key: o.reason for o in orphan_objects()}
    assert found == layout["orphans"]
    listed = storage_sweep()                              # a dry run removes nothing
    assert {o["key"] for o in listed["orphans"]} == set(layout["orphans"]) and listed["removed"] == []
    assert all(objects.exists(k) for k in layout["orphans"])
    done = storage_sweep(delete=True)
    assert sorted(done["removed"]) == sorted(layout["orphans"]) and done["failed"] == []
    assert not any(objects.exists(k) for k in layout["orphans"])
    assert all(objects.exists(k) for k in [*layout["named"], "videos/untouched.mp4"])
    assert orphan_objects() == []
    with pytest.raises(ValueError, match="negative"):
        orphan_objects(older_than=dt.timedelta(hours=-1))
    storage.reset()


def test_bucket_orphans_are_removed_and_what_records_name_stays(object_storage, tmp_path):
    layout = _layout(object_storage, tmp_path)
    assert orphan_objects() == []
    now = {o.key: o.reason for o in orphan_objects(older_than=dt.timedelta(0))}
    assert now == layout["orphans"]
    done = storage_sweep(delete=True, older_than=dt.timedelta(0))
    assert sorted(done["removed"]) == sorted(layout["orphans"])
    assert sorted(object_storage.list("snapshots")) == ["snapshots/aaaa-1/relations.npz"]
    assert object_storage.list("releases") == ["releases/r/1.0.0/data/relations/train.parquet"]
    assert all(object_storage.exists(k) for k in layout["named"])
    assert orphan_objects(older_than=dt.timedelta(0)) == []


def test_the_command_lists_then_deletes(settings, tmp_path, capsys):
    settings.MEDIA_ROOT = tmp_path / "media"
    storage.reset()
    layout = _layout(storage.store(), tmp_path)
    call_command("storage_sweep", "--older-than-hours", "0")
    out = capsys.readouterr().out
    assert "5 objects no record names" in out and "run again with --delete" in out
    assert all(key in out for key in layout["orphans"])
    call_command("storage_sweep", "--older-than-hours", "0", "--delete")
    assert "removed 5" in capsys.readouterr().out
    call_command("storage_sweep", "--older-than-hours", "0", "--json")
    assert '"orphans": []' in capsys.readouterr().out
    with pytest.raises(CommandError, match="0 or more"):
        call_command("storage_sweep", "--older-than-hours", "-2")
    storage.reset()
