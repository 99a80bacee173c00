"""A release written from PostgreSQL a chunk at a time has the bytes of the row-at-a-time reference.

A small train split, and the same records as three splits (each table's Parquet files split by
split), from ``tests.benchmarks.fill``, with reviewed items, and rows holding what a byte-for-byte
writer gets wrong first: floats Python writes with an exponent, NaN, integers past 64 bits in
JSON, control and non-ASCII characters, microsecond timestamps in other zones, nulls. The release
folder of :func:`release_write` (``COPY`` and column-wise encoding) is compared file by file with the
reference writer's tables, record index and MOT files, and with the folder the cursor path (every
database but PostgreSQL) writes.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
from django.db.models import Count

from annotation.models import Query, Relation
from annotation.releases.services.pseudonyms import reviewer_pseudonyms_assign
from annotation.releases.services.release_io import reading
from annotation.releases.services.release_io.export import INDEX, ReleaseMeta, release_write
from annotation.releases.services.release_io.reference import (
    reference_mot_write,
    reference_tables_write,
)
from annotation.releases.services.release_io.tables import ReleaseScope
from tests.benchmarks.fill import (
    RELEASE_BASE,
    copy_rows,
    release_records,
    review_users,
    usability_review,
)
from trajectories.models import Trajectory

pytestmark = pytest.mark.django_db
N_VIDEOS, TRAJ_PER_VIDEO, QUERIES_PER_VIDEO = 3, 5, 2
SPLITS = ("train", "dev", "test")
ODD_TEXT = "pérson \"x\"\\\n\u2028\x01😀"
ODD_EVIDENCE = ('{"b": 1e-05, "a": [1.0e16, 0.5, "\\u00e9\\u2028\\u0001"], "big": 123456789012345678901234567890, '
                '"z": {"y": null, "x": -0.0, "w": 0.000123}}')


def _awkward_rows() -> None:
    """Rows beside the split's: a trajectory with exponent floats and NaN, cross-video relations with
    awkward evidence, a rejected query with control characters; timestamps with microseconds."""
    base, t = RELEASE_BASE, TRAJ_PER_VIDEO
    when = dt.datetime(2026, 3, 4, 5, 6, 7, 89, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30)))
    frames = np.array([3, 9], "<i4")
    boxes = np.array([[-1.5, 1e-7, 3e9, 0.0625], [2.0005, -0.0, 1e-30, 7.0]], "<f4")
    copy_rows(Trajectory, ["id", "run_id", "video_id", "track_id", "category", "n_obs", "first_frame", "last_frame",
                           "frames", "boxes", "scores", "appearance", "temporal_coverage", "longest_run",
                           "median_area", "abrupt_changes", "mean_score", "created_at"],
              [(base + 900_000, base, base, 999, ODD_TEXT[:30], 2, 3, 9, frames.tobytes(), boxes.tobytes(),
                np.array([1e-8, np.nan], "<f4").tobytes(), b"", 1e-5, 1, float("nan"), 0, -0.0, when)])
    rows = []
    for q in range(QUERIES_PER_VIDEO):
        for other in range(t):
            rows.append((base + 800_000 + len(rows), base + q, base + t + other, len(rows) % 2, "human",
                         "cross", False, ODD_EVIDENCE if len(rows) % 3 else "{}",
                         when.replace(microsecond=0) if len(rows) % 4 == 0 else when + dt.timedelta(microseconds=len(rows))))
    copy_rows(Relation, ["id", "query_id", "trajectory_id", "label", "source", "stratum", "pseudo", "evidence",
                         "decided_at"], rows)
    copy_rows(Query, ["id", "pool_id", "video_id", "target_id", "source_version_id", "run_id", "text",
                      "predicates", "revision", "status", "rejection_reason", "raw_output", "ratings", "created_at"],
              [(base + 700_000, base, base, base, base, base, ODD_TEXT, json.dumps([{"w": 1e-9}]), 1, "rejected",
                "⊥ in row; odd", ODD_TEXT, '{"score": 0.00001}', when)])


def build_scope(splits: tuple[str, ...]) -> ReleaseScope:
    """The records (video ``v`` in ``splits[v % len(splits)]``, the awkward rows in the first) and
    the scope of a release of ``splits``."""
    release_records(n_videos=N_VIDEOS, traj_per_video=TRAJ_PER_VIDEO, queries_per_video=QUERIES_PER_VIDEO, n_obs=4,
                    splits=splits)
    raters, adjudicators = review_users(n_raters=4, n_adjudicators=1, prefix="bytes")
    usability_review(n_videos=N_VIDEOS, pooled_per_video=TRAJ_PER_VIDEO, extra_per_video=1, raters=raters,
                     adjudicators=adjudicators, panel=3, required=2, open_fraction=0.5)
    _awkward_rows()
    scope = ReleaseScope.of(list(splits))
    reviewer_pseudonyms_assign(people=scope.people())
    return scope


@pytest.fixture(params=[("train",), SPLITS], ids=["one-split", "three-splits"])
def scope(db, request):
    return build_scope(request.param)


def relations_written(folder: Path) -> list[bytes]:
    return (folder / "data" / "relations.jsonl").read_bytes().split(b"\n")[:-1]   # U+2028 is no line end here


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


META = ReleaseMeta(name="bytes", version="1.0.0", description="awkward values", license="CC-BY-4.0",
                   splits=["train"], created_at=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))


def meta_of(scope: ReleaseScope) -> ReleaseMeta:
    return dataclasses.replace(META, splits=list(scope.splits))


def test_the_release_is_the_bytes_of_the_reference(scope, tmp_path):
    written = release_write(tmp_path / "new", meta=meta_of(scope), scope=scope)
    assert written.counts["relations"] == N_VIDEOS * QUERIES_PER_VIDEO * TRAJ_PER_VIDEO + QUERIES_PER_VIDEO * 5
    assert written.counts["votes"] > 0 and written.counts["reviewers"] > 0
    counts = reference_tables_write(tmp_path / "old", scope)
    assert reference_mot_write(tmp_path / "old", scope) == N_VIDEOS
    assert counts == written.counts
    new, old = _files(tmp_path / "new"), _files(tmp_path / "old")
    shared = {path for path in new if path.startswith(("data/", "mot/")) or path == INDEX}
    assert shared == set(old)
    assert [path for path in sorted(shared) if new[path] != old[path]] == []
    by_source = dict(scope.queryset("relations").order_by().values_list("source").annotate(n=Count("id"))
                     .order_by("source"))
    assert written.stats["corrections"]["relations_by_source"] == by_source == {"human": len(relations_written(
        tmp_path / "new"))}
    relations = (tmp_path / "new" / "data" / "relations.jsonl").read_text(encoding="utf-8")
    assert '"b":1e-05' in relations and "123456789012345678901234567890" in relations
    assert '"decided_at":"2026-03-03T23:36:07+00:00"' in relations and "T23:36:07.000090+00:00" in relations


def test_the_cursor_path_writes_the_same_folder(scope, tmp_path, monkeypatch):
    release_write(tmp_path / "copy", meta=meta_of(scope), scope=scope)
    monkeypatch.setattr(reading, "_copy_readable", lambda connection: False)
    release_write(tmp_path / "cursor", meta=meta_of(scope), scope=ReleaseScope.of(scope.splits))
    assert _files(tmp_path / "cursor") == _files(tmp_path / "copy")
