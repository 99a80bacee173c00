"""The database's immutability rules hold against the writes that row triggers miss: ``TRUNCATE`` on
PostgreSQL and ``INSERT OR REPLACE`` on SQLite, for every protected table, through raw SQL."""
from __future__ import annotations

import json
import os
import re
import sqlite3
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


BUILD = r"""
import json
from tests.common import protected_rows
print("IDS", json.dumps(protected_rows.build()))
"""
REPLACE_CHECK = r"""
import json
import os
from django.db import IntegrityError, connection, transaction
from tests.common import protected_rows

ids = json.loads(os.environ["PROTECTED_IDS"])
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


@pytest.fixture(scope="module")
def sqlite_rows(tmp_path_factory):
    """An embedded-mode database, migrated, holding one protected row per table:
    ``(environment, database file, {table: id})``."""
    var = tmp_path_factory.mktemp("sqlite") / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SECRET_KEY")}
    env.update(TRAJLAB_VAR_DIR=str(var), CELERY_BROKER_URL="filesystem://")
    migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    build = subprocess.run([sys.executable, "manage.py", "shell", "-c", BUILD], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    return env, var / "trajlab.sqlite3", json.loads(build.stdout.split("IDS", 1)[1])


@pytest.mark.slow
def test_sqlite_refuses_to_replace_a_protected_row(sqlite_rows):
    env, _, ids = sqlite_rows
    check = subprocess.run([sys.executable, "manage.py", "shell", "-c", REPLACE_CHECK], cwd=ROOT,
                           env={**env, "PROTECTED_IDS": json.dumps(ids)}, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-3000:]
    result = json.loads(check.stdout.split("RESULT", 1)[1])
    assert result == {"recursive_triggers": 1, "accepted": [], "unchanged": True}


def _unique_keys(db: sqlite3.Connection, table: str) -> list[tuple[str, ...]]:
    """Every key a REPLACE can meet a row of ``table`` by: its primary key and unique indexes."""
    keys = [("id",)]
    for _, index, unique, *_ in db.execute(f"PRAGMA index_list({table})"):
        if unique:
            keys.append(tuple(row[2] for row in db.execute(f"PRAGMA index_info('{index}')")))
    return list(dict.fromkeys(keys))


def _replace_through(db: sqlite3.Connection, table: str, pk: int, key: tuple[str, ...]) -> str:
    """``INSERT OR REPLACE`` of row ``pk`` that meets it through ``key`` alone: the key's columns
    kept, every other unique column (the id included) given a value no row has, one other column
    changed (``protected_rows.CHANGES``)."""
    types = {name: kind.lower() for _, name, kind, *_ in db.execute(f"PRAGMA table_info({table})")}
    others = {c for k in _unique_keys(db, table) if k != key for c in k} - set(key)

    def value(column: str) -> str:
        if column in others:  # a fresh value (NULL stays NULL: it meets nothing)
            return f'"{column}" + 1000000' if "int" in types[column] else f'"{column}" || \'-new\''
        return protected_rows.CHANGES[table].get(column, f'"{column}"')

    names = ", ".join(f'"{c}"' for c in types)
    return (f"INSERT OR REPLACE INTO {table} ({names}) SELECT {', '.join(value(c) for c in types)} "
            f"FROM {table} WHERE id = {int(pk)}")


@pytest.mark.slow
def test_sqlite_refuses_to_replace_a_protected_row_on_any_connection(sqlite_rows):
    """Issue 27, finding 7: a connection with SQLite's default settings (the ``sqlite3`` shell, a
    script: no ``recursive_triggers``, so a REPLACE fires no delete trigger) rewrote votes, pools,
    releases, snapshots, judgments, seat events and pseudonyms with ``INSERT OR REPLACE``."""
    _, path, ids = sqlite_rows
    db = sqlite3.connect(path, isolation_level=None)
    # a check constraint (a release's version) calls REGEXP, which the sqlite3 shell has built in
    db.create_function("REGEXP", 2, lambda pattern, text: text is not None and re.search(pattern, text) is not None)
    try:
        assert db.execute("PRAGMA recursive_triggers").fetchone()[0] == 0
        assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 0

        def contents() -> dict[str, list]:
            return {table: db.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() for table in ids}

        attempts = []
        for table, pk in ids.items():
            for key in _unique_keys(db, table):
                met = db.execute(f"SELECT {', '.join(key)} FROM {table} WHERE id = ?", [pk]).fetchone()
                assert None not in met, f"{table}'s row has no {key}: a REPLACE through it would meet nothing"
                attempts.append((f"{table} by {'+'.join(key)}", _replace_through(db, table, pk, key)))
        assert sorted(ids) == sorted(protected_rows.TABLES) and len(attempts) > len(ids)
        before = contents()
        accepted = []
        for name, sql in attempts:
            db.execute("BEGIN")  # each attempt alone: one that got through is undone before the next
            try:
                db.execute(sql)
                accepted.append(name)
            except sqlite3.IntegrityError:
                pass
            finally:
                db.execute("ROLLBACK")
        assert accepted == []
        assert contents() == before
    finally:
        db.close()
