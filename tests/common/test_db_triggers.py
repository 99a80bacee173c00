"""The database's immutability rules hold against the writes that row triggers miss: ``TRUNCATE`` on
PostgreSQL and ``INSERT OR REPLACE`` on SQLite, for every protected table, through raw SQL."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from tests.common import protected_rows

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("table", protected_rows.TABLES)
def test_postgresql_refuses_to_truncate_a_protected_table(db, table):
    # (without CASCADE, a table that others reference is refused by its foreign keys already)
    assert connection.vendor == "postgresql"
    with connection.cursor() as c:  # the table has its own TRUNCATE trigger (pg_trigger.tgtype bit 5)
        c.execute("SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgtype & 32 <> 0", [table])
        assert c.fetchone()[0] == 1
    protected_rows.build()
    before = protected_rows.contents()
    with connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # check the new rows' keys now: no event pending at TRUNCATE
    with pytest.raises(IntegrityError, match="cannot be truncated"), transaction.atomic(), connection.cursor() as c:
        c.execute(f"TRUNCATE {table} CASCADE")
    assert protected_rows.contents() == before


def test_postgresql_truncates_a_table_without_protected_rows(db):
    # given: releases and snapshots that were never published or sealed
    from annotation.models import RelationSnapshot, Release

    Release.objects.create(name="draft", version="1.0.0", license="x", splits=[], path="r", manifest_sha256="0" * 64,
                           created_at=timezone.now())
    RelationSnapshot.objects.create(split="train", content_sha256="0" * 64, path="s", pool_versions={}, counts={},
                                    complete=False)
    with connection.cursor() as c:
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")
        c.execute("TRUNCATE annotation_release, annotation_relationsnapshot CASCADE")
    assert not Release.objects.exists() and not RelationSnapshot.objects.exists()


REPLACE_CHECK = r"""
import json
from django.db import IntegrityError, connection, transaction
from tests.common import protected_rows

ids = protected_rows.build()
before = protected_rows.contents()
with connection.cursor() as cursor:
    cursor.execute("PRAGMA recursive_triggers")
    result = {"recursive_triggers": cursor.fetchone()[0], "accepted": []}
attempts = [(table, protected_rows.replace_sql(table, ids[table], change))
            for table, change in protected_rows.CHANGES.items()]
# the same rows replaced through another unique key (a new id): a vote by (item, annotator), a split group by name
attempts += [(f"{table} by key", protected_rows.replace_sql(table, ids[table], {**protected_rows.CHANGES[table],
                                                                                "id": "id + 1000"}))
             for table in ("annotation_vote", "trajectories_splitgroup", "annotation_releasefile")]
for name, sql in attempts:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql)
        result["accepted"].append(name)
    except IntegrityError:
        pass
result["unchanged"] = protected_rows.contents() == before
print("RESULT", json.dumps(result))
"""


@pytest.mark.slow
def test_sqlite_refuses_to_replace_a_protected_row(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SECRET_KEY")}
    env.update(TRAJLAB_VAR_DIR=str(tmp_path / "var"), CELERY_BROKER_URL="filesystem://")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    check = subprocess.run([sys.executable, "manage.py", "shell", "-c", REPLACE_CHECK], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    result = json.loads(check.stdout.split("RESULT", 1)[1])
    assert result == {"recursive_triggers": 1, "accepted": [], "unchanged": True}
