"""Trajectory storage: the compact layout (one row per trajectory, packed arrays) against the
naive one (one row per box), for writing and for reading a video's candidate pool.

Full size (``TRAJLAB_BENCH_FULL=1``): 10,000 trajectories x 300 observations over 200 videos
(50 per video, 2-minute 720p videos). Quick size (default): 1,000 trajectories over 20 videos.

- compact: ``Trajectory`` rows built the way ``trajectories_store`` builds them, written with
  ``bulk_create`` in one transaction per video; read with ``video_pool_read`` and unpacked to
  numpy arrays.
- naive: a throwaway table ``bench_naive_obs`` (one row per observation, indexed on
  ``trajectory_id``) written with psycopg ``executemany`` (and, as a second line, ``COPY``), one
  transaction per video; read with ``SELECT ... ORDER BY trajectory_id, frame`` plus the
  trajectories' metadata rows (the same ``Trajectory`` rows without their arrays), and grouped
  into arrays. The naive SQL runs on a plain psycopg cursor (server-side binding, which
  pipelines ``executemany``) over Django's connection: about 3x faster than Django's own
  client-binding cursor, so the naive layout gets its best obvious path.

Every read is checked against what was written. Figures go to ``var/bench/storage.json``; run
with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
import pytest
from django.db import connection, transaction

from models.backends.tracking.base import TrackProposal
from models.media.trajectory_ops import quality_signals, validate_observations
from tests.trajectories.factories import config_factory, run_factory, video_factory
from trajectories.models import ProposalRun, Trajectory
from trajectories.selectors import video_pool_read
from trajectories.services.proposals import trajectories_store

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db(transaction=True)]

FULL = os.environ.get("TRAJLAB_BENCH_FULL") == "1"
REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "var" / "bench"

N_VIDEOS = 200 if FULL else 20
PER_VIDEO = 50
N_OBS = 300
WIDTH, HEIGHT, FRAME_COUNT, FPS = 1280, 720, 3000, 25.0
POOL_READS = 9            # one-video reads per layout (each a different video); median reported
WHOLE_READS = 3           # whole-set reads per layout
SERVICE_VIDEOS = 2        # extra videos written through trajectories_store itself
SEED = 7
NAIVE_TABLE = "bench_naive_obs"
FETCH_CHUNK = 100_000


# -- data ----------------------------------------------------------------------------------------
@dataclass
class Track:
    frames: np.ndarray   # int32 [N]
    boxes: np.ndarray    # float32 [N, 4]
    scores: np.ndarray   # float32 [N]


def video_tracks(rng: np.random.Generator, n: int = PER_VIDEO) -> list[Track]:
    """Plausible person tracks: mostly consecutive frames with short gaps, boxes drifting with
    a random walk inside a 720p frame, detector scores in [0.3, 1]."""
    steps = 1 + (rng.random((n, N_OBS - 1)) < 0.1) * rng.integers(1, 4, (n, N_OBS - 1))
    offsets = np.concatenate([np.zeros((n, 1), np.int64), np.cumsum(steps, axis=1)], axis=1)
    starts = rng.integers(0, FRAME_COUNT - offsets[:, -1])
    frames = (starts[:, None] + offsets).astype(np.int32)
    w = rng.uniform(30, 200, (n, 1)) * rng.uniform(0.95, 1.05, (n, N_OBS))
    h = w * rng.uniform(1.8, 2.6, (n, 1))
    cx = rng.uniform(0, WIDTH, (n, 1)) + np.cumsum(rng.normal(0, 2.5, (n, N_OBS)), axis=1)
    cy = rng.uniform(0, HEIGHT, (n, 1)) + np.cumsum(rng.normal(0, 1.0, (n, N_OBS)), axis=1)
    x1 = np.clip(cx - w / 2, 0, WIDTH - w)
    y1 = np.clip(cy - h / 2, 0, HEIGHT - h)
    boxes = np.stack([x1, y1, x1 + w, y1 + h], axis=2).astype(np.float32)
    scores = rng.uniform(0.3, 1.0, (n, N_OBS)).astype(np.float32)
    return [Track(frames[i], boxes[i], scores[i]) for i in range(n)]


def trajectory_row(run: ProposalRun, track_id: int, track: Track, q) -> Trajectory:
    """A row built field for field as ``trajectories_store`` builds it."""
    return Trajectory(
        run=run, video_id=run.video_id, track_id=track_id, category="person", n_obs=q.n_obs,
        first_frame=q.first_frame, last_frame=q.last_frame,
        frames=track.frames.astype("<i4").tobytes(), boxes=track.boxes.astype("<f4").tobytes(),
        scores=track.scores.astype("<f4").tobytes(), appearance=b"",
        temporal_coverage=q.temporal_coverage, longest_run=q.longest_run, median_area=q.median_area,
        abrupt_changes=q.abrupt_changes, mean_score=q.mean_score,
    )


# -- reads ---------------------------------------------------------------------------------------
def compact_unpack(trajectories) -> dict[int, tuple]:
    return {t.pk: (t.frames_array(), t.boxes_array(), t.scores_array()) for t in trajectories}


def compact_pool(video_id: int) -> dict[int, tuple]:
    return compact_unpack(video_pool_read(video_id=video_id))


def compact_all() -> dict[int, tuple]:
    qs = Trajectory.objects.filter(run__status=ProposalRun.Status.SUCCEEDED)
    return compact_unpack(qs.order_by("video_id", "run_id", "track_id"))


def naive_group(cursor, ids: list[int] | None) -> dict[int, tuple]:
    sql = f"SELECT trajectory_id, frame, x1, y1, x2, y2, score FROM {NAIVE_TABLE}"
    if ids is not None:
        sql += " WHERE trajectory_id = ANY(%s)"
    cursor.execute(sql + " ORDER BY trajectory_id, frame", [ids] if ids is not None else None)
    chunks = []
    while rows := cursor.fetchmany(FETCH_CHUNK):
        chunks.append(np.array(rows, dtype=np.float64))
    data = np.concatenate(chunks) if chunks else np.zeros((0, 7))
    tids = data[:, 0].astype(np.int64)
    cuts = np.flatnonzero(np.diff(tids)) + 1
    out = {}
    for part in np.split(data, cuts):
        if len(part):
            out[int(part[0, 0])] = (part[:, 1].astype(np.int32), part[:, 2:6].astype(np.float32),
                                    part[:, 6].astype(np.float32))
    return out


def naive_metadata(video_id: int | None):
    qs = Trajectory.objects.filter(run__status=ProposalRun.Status.SUCCEEDED)
    if video_id is not None:
        qs = qs.filter(video_id=video_id)
    return list(qs.defer("frames", "boxes", "scores", "appearance").order_by("video_id", "run_id", "track_id"))


def raw_cursor() -> psycopg.Cursor:
    """A server-binding psycopg cursor on Django's connection (same transaction)."""
    connection.ensure_connection()
    return psycopg.Cursor(connection.connection)


def naive_pool(video_id: int) -> dict[int, tuple]:
    meta = naive_metadata(video_id)
    with raw_cursor() as cursor:
        obs = naive_group(cursor, [t.pk for t in meta])
    return {t.pk: obs[t.pk] for t in meta}


def naive_all() -> dict[int, tuple]:
    meta = naive_metadata(None)
    with raw_cursor() as cursor:
        obs = naive_group(cursor, None)
    return {t.pk: obs[t.pk] for t in meta}


def assert_same(got: dict[int, tuple], expected: dict[int, Track], ids: list[int], label: str) -> None:
    assert sorted(got) == sorted(ids), f"{label}: wrong trajectories"
    for pk in ids:
        frames, boxes, scores = got[pk]
        want = expected[pk]
        assert frames.dtype == np.int32 and boxes.dtype == np.float32 and scores.dtype == np.float32
        assert np.array_equal(frames, want.frames), f"{label}: frames of {pk}"
        assert np.array_equal(boxes, want.boxes), f"{label}: boxes of {pk}"
        assert np.array_equal(scores, want.scores), f"{label}: scores of {pk}"


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def ms(values: list[float]) -> dict:
    a = np.asarray(values) * 1000
    return {"n": len(a), "median_ms": round(float(np.median(a)), 2), "min_ms": round(float(a.min()), 2),
            "max_ms": round(float(a.max()), 2)}


def relation_mb(name: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size(%s)", [name])
        return round(cursor.fetchone()[0] / 1e6, 1)


# -- the benchmark -------------------------------------------------------------------------------
def test_trajectory_storage_layouts():
    assert connection.vendor == "postgresql", "the storage benchmark measures PostgreSQL"
    rng = np.random.default_rng(SEED)
    config = config_factory()

    # Given: N_VIDEOS videos with a succeeded run each, and their tracks (validated as the
    # service does; quality signals computed up front, they are not storage work).
    videos = []
    for _ in range(N_VIDEOS):
        video = video_factory(width=WIDTH, height=HEIGHT, frame_count=FRAME_COUNT, fps=FPS)
        run = run_factory(video=video, config=config, status=ProposalRun.Status.SUCCEEDED)
        tracks = video_tracks(rng)
        for k, t in enumerate(tracks):
            validate_observations(t.frames, t.boxes, scores=t.scores, width=WIDTH, height=HEIGHT,
                                  frame_count=FRAME_COUNT, label=f"track {k}")
        videos.append((run, tracks, [quality_signals(t.frames, t.boxes, t.scores) for t in tracks]))
    n_traj = N_VIDEOS * PER_VIDEO
    n_obs = n_traj * N_OBS

    # When: the compact layout is written, one transaction per video.
    expected: dict[int, Track] = {}
    ids_by_video: dict[int, list[int]] = {}
    t0 = time.perf_counter()
    for run, tracks, quals in videos:
        rows = [trajectory_row(run, k + 1, t, q) for k, (t, q) in enumerate(zip(tracks, quals))]
        with transaction.atomic():
            created = Trajectory.objects.bulk_create(rows, batch_size=500)
        ids_by_video[run.video_id] = [r.pk for r in created]
        expected.update({r.pk: t for r, t in zip(created, tracks)})
    compact_write_s = time.perf_counter() - t0
    assert Trajectory.objects.count() == n_traj

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {NAIVE_TABLE}")
        cursor.execute(f"CREATE TABLE {NAIVE_TABLE} (trajectory_id bigint NOT NULL, frame integer NOT NULL, "
                       "x1 real NOT NULL, y1 real NOT NULL, x2 real NOT NULL, y2 real NOT NULL, "
                       "score real NOT NULL)")
        cursor.execute(f"CREATE INDEX {NAIVE_TABLE}_trajectory ON {NAIVE_TABLE} (trajectory_id)")
    try:
        def naive_rows(video_id: int) -> list[tuple]:
            ids = ids_by_video[video_id]
            tracks = [expected[pk] for pk in ids]
            frames = np.concatenate([t.frames for t in tracks])
            boxes = np.concatenate([t.boxes for t in tracks])
            scores = np.concatenate([t.scores for t in tracks])
            tid = np.repeat(np.asarray(ids, np.int64), [len(t.frames) for t in tracks])
            return list(zip(tid.tolist(), frames.tolist(), *boxes.T.tolist(), scores.tolist()))

        insert = f"INSERT INTO {NAIVE_TABLE} VALUES (%s, %s, %s, %s, %s, %s, %s)"

        # The naive layout with COPY (the fastest bulk path PostgreSQL has).
        t0 = time.perf_counter()
        for run, _, _ in videos:
            rows = naive_rows(run.video_id)
            with (transaction.atomic(), raw_cursor() as cursor,
                  cursor.copy(f"COPY {NAIVE_TABLE} FROM STDIN") as copy):
                for row in rows:
                    copy.write_row(row)
        naive_copy_s = time.perf_counter() - t0
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {NAIVE_TABLE}")
            assert cursor.fetchone()[0] == n_obs
            cursor.execute(f"TRUNCATE {NAIVE_TABLE}")

        # The naive layout with executemany (psycopg pipelines it); this is the table read below.
        t0 = time.perf_counter()
        for run, _, _ in videos:
            rows = naive_rows(run.video_id)
            with transaction.atomic(), raw_cursor() as cursor:
                cursor.executemany(insert, rows)
        naive_write_s = time.perf_counter() - t0
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {NAIVE_TABLE}")
            assert cursor.fetchone()[0] == n_obs
            cursor.execute(f"ANALYZE {NAIVE_TABLE}")
            cursor.execute(f"ANALYZE {Trajectory._meta.db_table}")
        sizes_mb = {"compact": relation_mb(Trajectory._meta.db_table), "naive": relation_mb(NAIVE_TABLE)}

        # Then: one video's pool, read from both layouts (interleaved, a different video each
        # time), and the whole set; every read equals what was written.
        pool_compact, pool_naive = [], []
        for r in range(POOL_READS):
            video_id = videos[(r * 7) % N_VIDEOS][0].video_id
            got, dt = timed(compact_pool, video_id)
            pool_compact.append(dt)
            assert_same(got, expected, ids_by_video[video_id], "compact pool")
            got, dt = timed(naive_pool, video_id)
            pool_naive.append(dt)
            assert_same(got, expected, ids_by_video[video_id], "naive pool")
        whole_compact, whole_naive = [], []
        for _ in range(WHOLE_READS):
            got, dt = timed(compact_all)
            whole_compact.append(dt)
            assert_same(got, expected, list(expected), "compact whole set")
            got, dt = timed(naive_all)
            whole_naive.append(dt)
            assert_same(got, expected, list(expected), "naive whole set")
            del got
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {NAIVE_TABLE}")

    # The service path, for scale: validation, quality signals, duplicate proposals and the
    # write, on a few more videos; it stores exactly the rows built above.
    service_s = 0.0
    for _ in range(SERVICE_VIDEOS):
        run = run_factory(video=video_factory(width=WIDTH, height=HEIGHT, frame_count=FRAME_COUNT, fps=FPS),
                          config=config)
        tracks = video_tracks(rng)
        proposals = [TrackProposal(k + 1, "person", t.frames, t.boxes, t.scores) for k, t in enumerate(tracks)]
        t0 = time.perf_counter()
        trajectories_store(run=run, proposals=proposals)
        service_s += time.perf_counter() - t0
        stored = list(Trajectory.objects.filter(run=run).order_by("track_id"))
        built = [trajectory_row(run, k + 1, t, quality_signals(t.frames, t.boxes, t.scores))
                 for k, t in enumerate(tracks)]
        fields = ["track_id", "n_obs", "first_frame", "last_frame", "temporal_coverage", "longest_run",
                  "median_area", "abrupt_changes", "mean_score"]
        for s, b in zip(stored, built, strict=True):
            assert [getattr(s, f) for f in fields] == pytest.approx([getattr(b, f) for f in fields])
            assert (bytes(s.frames), bytes(s.boxes), bytes(s.scores)) == (b.frames, b.boxes, b.scores)
    service_obs = SERVICE_VIDEOS * PER_VIDEO * N_OBS

    results = {
        "size": "full" if FULL else "quick",
        "videos": N_VIDEOS, "trajectories_per_video": PER_VIDEO, "observations_per_trajectory": N_OBS,
        "trajectories": n_traj, "observations": n_obs,
        "write": {
            "compact_bulk_create": {"seconds": round(compact_write_s, 3), "rows": n_traj,
                                    "rows_per_s": round(n_traj / compact_write_s),
                                    "observations_per_s": round(n_obs / compact_write_s)},
            "naive_executemany": {"seconds": round(naive_write_s, 3), "rows": n_obs,
                                  "rows_per_s": round(n_obs / naive_write_s),
                                  "observations_per_s": round(n_obs / naive_write_s)},
            "naive_copy": {"seconds": round(naive_copy_s, 3), "rows": n_obs,
                           "rows_per_s": round(n_obs / naive_copy_s),
                           "observations_per_s": round(n_obs / naive_copy_s)},
            "trajectories_store_service": {"seconds": round(service_s, 3), "rows": SERVICE_VIDEOS * PER_VIDEO,
                                           "rows_per_s": round(SERVICE_VIDEOS * PER_VIDEO / service_s),
                                           "observations_per_s": round(service_obs / service_s)},
        },
        "read": {
            "one_video_pool": {"trajectories": PER_VIDEO, "observations": PER_VIDEO * N_OBS,
                               "compact": ms(pool_compact), "naive": ms(pool_naive)},
            "whole_set": {"trajectories": n_traj, "observations": n_obs,
                          "compact": ms(whole_compact), "naive": ms(whole_naive)},
        },
        "table_size_mb": sizes_mb,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "postgresql": connection.pg_version},
    }
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "storage.json").write_text(json.dumps(results, indent=2) + "\n")

    w, r = results["write"], results["read"]
    print(f"\ntrajectory storage, {n_traj:,} trajectories x {N_OBS} observations over {N_VIDEOS} videos "
          f"({results['size']})")
    print(f"{'write':<48}{'seconds':>9}{'rows/s':>12}{'obs/s':>12}")
    for label, key in [("compact: bulk_create, 1 row per trajectory", "compact_bulk_create"),
                       ("naive: executemany, 1 row per box", "naive_executemany"),
                       ("naive: COPY, 1 row per box", "naive_copy"),
                       ("trajectories_store (validate+quality+dups)", "trajectories_store_service")]:
        print(f"{label:<48}{w[key]['seconds']:>9.2f}{w[key]['rows_per_s']:>12,}{w[key]['observations_per_s']:>12,}")
    print(f"{'read (median of reads)':<48}{'compact ms':>12}{'naive ms':>12}{'ratio':>8}")
    for label, key in [(f"one video's pool ({PER_VIDEO} trajectories)", "one_video_pool"),
                       (f"whole set ({n_traj:,} trajectories)", "whole_set")]:
        c, n = r[key]["compact"]["median_ms"], r[key]["naive"]["median_ms"]
        print(f"{label:<48}{c:>12.1f}{n:>12.1f}{n / c:>7.1f}x")
    print(f"table size: compact {sizes_mb['compact']} MB, naive {sizes_mb['naive']} MB")
