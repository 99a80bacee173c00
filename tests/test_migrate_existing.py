"""An existing database migrates forward without losing or changing a row.

``fixtures/demo_db_before_rooms.sqlite3.xz`` is an embedded-mode database that the code before the
room reorganisation filled: ``demo --no-real-video`` (six rendered videos, proposal runs and their
jobs), ``simulate_annotators``, ``build_benchmark`` (descriptions, queries, relations, cross-video
pairs, three sealed snapshots), ``train`` (a training run, its steps and an evaluation) and
``export_release`` (a published release and its files). The test migrates a copy with today's code in
a separate process and compares, table by table, every row of every column that existed before:
counts, snapshot content hashes, release manifest and file checksums, job links. A table that moved
to another app must appear under its new name with the same rows.
"""
from __future__ import annotations

import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "demo_db_before_rooms.sqlite3.xz"
#: Models that moved to another app: (app, model) before -> after. Their tables and content types
#: follow them; nothing else may change.
MOVED_MODELS = {("workers", "job"): ("common", "job")}
MOVED_TABLES = {f"{a}_{m}": f"{b}_{n}" for (a, m), (b, n) in MOVED_MODELS.items()}
#: Tables that gain rows when a model is added (its content type and permissions): the old rows
#: stay as they were, the new ones follow them.
GROWS = {"django_content_type", "auth_permission"}
#: Columns a data migration rewrites on purpose: proposal configurations store their settings
#: resolved, the defaults they were created under pinned (trajectories 0010; checked below).
REWRITTEN = {"trajectories_proposalconfig": {"anchor_policy", "detector_settings", "tracker_settings"}}

pytestmark = pytest.mark.slow


def _tables(db: sqlite3.Connection) -> dict[str, list[str]]:
    names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                      "AND name NOT LIKE 'sqlite_%' AND name != 'django_migrations'")]
    return {name: [r[1] for r in db.execute(f'PRAGMA table_info("{name}")')] for name in names}


def _rows(db: sqlite3.Connection, table: str, columns: list[str]) -> list[tuple]:
    cols = ", ".join(f'"{c}"' for c in columns)
    return db.execute(f'SELECT {cols} FROM "{table}" ORDER BY rowid').fetchall()


def _manage(db_path: Path, var_dir: Path, *args: str, code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(DATABASE_URL=f"sqlite:///{db_path}", TRAJLAB_VAR_DIR=str(var_dir),
               DJANGO_SECRET_KEY="migration-test", DJANGO_SETTINGS_MODULE="config.settings")
    argv = [sys.executable, "-c", code] if code else [sys.executable, "manage.py", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_a_demo_database_migrates_forward_unchanged(tmp_path):
    db_path = tmp_path / "trajlab.sqlite3"
    with lzma.open(FIXTURE) as src, open(db_path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    with sqlite3.connect(db_path) as db:
        before = {t: (cols, _rows(db, t, cols)) for t, cols in _tables(db).items()}
    assert sum(len(rows) for _, rows in before.values()) > 2000, "the fixture is a filled demo database"

    # when: today's code migrates it
    done = _manage(db_path, tmp_path / "var", "migrate", "--noinput")
    assert done.returncode == 0, done.stdout + done.stderr

    # then: every old row is there, in its (possibly new) table, with the same values; a moved
    # model's content type row keeps its id (so permissions and admin history follow) under its new app
    columns, rows = before["django_content_type"]
    before["django_content_type"] = (columns, [
        (pk, *MOVED_MODELS.get((app, model), (app, model))) for pk, app, model in rows])
    with sqlite3.connect(db_path) as db:
        after_tables = _tables(db)
        for table, (columns, rows) in before.items():
            now = MOVED_TABLES.get(table, table)
            assert now in after_tables, f"table {table} is gone"
            missing = [c for c in columns if c not in after_tables[now]]
            assert not missing, f"{now} lost columns {missing}"
            kept = [c for c in columns if c not in REWRITTEN.get(table, ())]
            if kept != columns:
                rows = [tuple(r[columns.index(c)] for c in kept) for r in rows]
            current = _rows(db, now, kept)
            if table in GROWS:                   # a new model adds its rows after the old ones
                current = current[:len(rows)]
            assert current == rows, f"rows of {table} changed"

    # the demo's tracker configuration (hog-bytetrack, given no settings, created before the CPU
    # trackers' defaults changed) runs as then: the detector on every frame, whole frames, plain IoU
    with sqlite3.connect(db_path) as db:
        (tracker, detectors), = db.execute("SELECT tracker_settings, detector_settings FROM trajectories_proposalconfig")
        tracker, detectors = json.loads(tracker), json.loads(detectors)
        assert (tracker["anchor_stride"], tracker["between_anchors"], tracker["match_buffer"]) == (1, "none", 0.0)
        assert detectors["person"]["regions"] == "frame"

    # the demo's training run was evaluated on a complete test snapshot: no stamp on its figures
    with sqlite3.connect(db_path) as db:
        assert db.execute("SELECT eval_stamps FROM workers_trainingrun").fetchall() == [("[]",)]
        assert db.execute("SELECT stamps FROM workers_evaluationrun").fetchall() == [("[]",)]

    # and the migrated database is what today's models describe: no pending migration, every model
    # reads its rows, and each sealed snapshot still loads against its stored hash
    pending = _manage(db_path, tmp_path / "var", "makemigrations", "--check", "--dry-run")
    assert pending.returncode == 0, pending.stdout + pending.stderr
    probe = _manage(db_path, tmp_path / "var", code=(
        "import django, json; django.setup()\n"
        "from django.apps import apps\n"
        "counts = {m._meta.db_table: m.objects.count() for m in apps.get_models()"
        " if not m._meta.proxy and m._meta.managed}\n"
        "for m in apps.get_models():\n"
        "    if m._meta.managed and not m._meta.proxy:\n"
        "        list(m.objects.all()[:20])\n"
        "print(json.dumps(counts))\n"))
    assert probe.returncode == 0, probe.stderr
    counts = json.loads(probe.stdout.strip().splitlines()[-1])
    for table, (_, rows) in before.items():
        now = MOVED_TABLES.get(table, table)
        if now in counts and table in GROWS:
            assert counts[now] >= len(rows), f"{now}: the ORM counts {counts[now]}, the table had {len(rows)}"
        elif now in counts:
            assert counts[now] == len(rows), f"{now}: the ORM counts {counts[now]}, the table had {len(rows)}"
