"""Release export at scale: the streaming exporter (``release_create``) against the obvious way (read
the relations table whole, then write it), in the same run, with throughput and peak memory.

Full size (``TRAJLAB_BENCH_FULL=1``): 1,000 train videos of 100 pooled trajectories each (100,000
trajectories, 20 observations each), 10 accepted queries per video (10,000), each with its full
within-video row (1,000,000 relations). Quick size (default): 100 videos (10,000 trajectories,
100,000 relations). The records are written straight into PostgreSQL with ``COPY`` (the test
database), with everything a release reads: sources, split groups, videos, proposal runs,
trajectories, frozen pools and members, descriptions and versions, queries and relations.

Peak memory is the process's resident high-water mark (``VmHWM``), reset through
``/proc/self/clear_refs`` before each phase, so it covers that phase alone; the figures are the
peak and the peak above the resident size at the phase's start. The export must add less than
1 GiB at full size (run alone, its whole process peaks near 430 MiB). Figures go to
``var/bench/release.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import datetime as dt
import io
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.test import override_settings

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
N_VIDEOS = 1_000 if FULL else 100
TRAJ_PER_VIDEO = 100
QUERIES_PER_VIDEO = 10
N_OBS = 20
BASE = 10_000_000                                 # ids far above anything the sequences hand out
MAX_PEAK_BYTES = 1 << 30
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _copy(model, columns: list[str], rows) -> int:
    """``COPY`` rows (tuples in ``columns`` order) into ``model``'s table; returns the count."""
    table = model._meta.db_table
    n = 0
    with connection.cursor() as cursor, cursor.cursor.copy(
            f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
            n += 1
    return n


def build_records() -> dict:
    """The synthetic train split of the module docstring, as database rows."""
    from annotation.models import (
        CandidatePool,
        Description,
        DescriptionRun,
        DescriptionVersion,
        GenerationRun,
        PoolMember,
        Query,
        Relation,
    )
    from trajectories.models import (
        ProposalConfig,
        ProposalRun,
        Source,
        SplitGroup,
        Trajectory,
        Video,
    )

    rng = np.random.default_rng(7)
    V, T, Q = N_VIDEOS, TRAJ_PER_VIDEO, QUERIES_PER_VIDEO
    _copy(Source, ["id", "name", "description", "created_at"], [(BASE, "bench-source", "", NOW)])
    _copy(SplitGroup, ["id", "name", "split", "locked_at", "created_at"],
          ((BASE + v, f"bench-group-{v}", "train", NOW, NOW) for v in range(V)))
    _copy(Video, ["id", "source_id", "split_group_id", "name", "kind", "path", "content_sha256", "size_bytes", "fps",
                  "frame_count", "width", "height", "duration_s", "codec", "seekable", "metadata", "created_at"],
          ((BASE + v, BASE, BASE + v, f"bench-{v}", "file", f"bench/{v}.mp4", f"{v:064x}", 1000, 25.0, 500, 1920,
            1080, 20.0, "h264", True, "{}", NOW) for v in range(V)))
    _copy(ProposalConfig, ["id", "name", "version", "backend", "checkpoint_path", "checkpoint_sha256",
                           "model_config_path", "categories", "anchor_policy", "detector_settings", "tracker_settings",
                           "software", "config_hash", "created_at"],
          [(BASE, "bench", 1, "hog-bytetrack", "", "", "", '["person"]', "{}", "{}", "{}", "{}", "b" * 64, NOW)])
    _copy(ProposalRun, ["id", "video_id", "config_id", "status", "trajectory_count", "duplicate_count", "error",
                        "stats", "cancel_requested", "retries", "kind", "created_at", "finished_at"],
          ((BASE + v, BASE + v, BASE, "succeeded", T, 0, "", "{}", False, 0, "tracked", NOW, NOW) for v in range(V)))

    def tracks():
        for v in range(V):
            for t in range(T):
                start = int(rng.integers(0, 400))
                frames = np.arange(start, start + N_OBS, dtype="<i4")
                xy = rng.uniform(0, 1700, 2)
                boxes = np.concatenate([xy + np.cumsum(rng.normal(0, 2, (N_OBS, 2)), 0),
                                        xy + 80 + np.cumsum(rng.normal(0, 2, (N_OBS, 2)), 0)], 1)[:, [0, 1, 2, 3]]
                yield v, t, frames, boxes.astype("<f4")

    members = []

    def trajectory_rows():
        for v, t, frames, boxes in tracks():
            pk = BASE + v * T + t
            members.append((pk, v, frames.tobytes(), boxes.tobytes()))
            yield (pk, BASE + v, BASE + v, t + 1, "person", N_OBS, int(frames[0]), int(frames[-1]), frames.tobytes(),
                   boxes.tobytes(), np.full(N_OBS, 0.9, "<f4").tobytes(), b"", 1.0, N_OBS, 6400.0, 0, 0.9, NOW)

    _copy(Trajectory, ["id", "run_id", "video_id", "track_id", "category", "n_obs", "first_frame", "last_frame",
                       "frames", "boxes", "scores", "appearance", "temporal_coverage", "longest_run", "median_area",
                       "abrupt_changes", "mean_score", "created_at"], trajectory_rows())
    _copy(CandidatePool, ["id", "video_id", "version", "run_id", "reason", "n_members", "lineage", "content_sha256",
                          "created_at"],
          ((BASE + v, BASE + v, 1, BASE + v, "", T, "[]", "c" * 64, NOW) for v in range(V)))
    _copy(PoolMember, ["id", "pool_id", "trajectory_id", "role", "n_obs", "n_removed", "frames", "boxes"],
          ((pk, BASE + v, pk, "single", N_OBS, 0, f, b) for pk, v, f, b in members))
    members.clear()
    CandidatePool.objects.filter(id__gte=BASE).update(frozen_at=NOW)
    _copy(DescriptionRun, ["id", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "status", "error",
                    "cancel_requested", "retries", "created_at"],
          [(BASE, '{"name": "heuristic"}', "heuristic-v1", "d" * 64, "{}", "{}", "succeeded", "", False, 0, NOW)])
    _copy(GenerationRun, ["id", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "status", "error",
                    "cancel_requested", "retries", "created_at"],
          [(BASE, '{"name": "template"}', "template-v1", "e" * 64, "{}", "{}", "succeeded", "", False, 0, NOW)])
    content = json.dumps({"appearance": "a person in red", "motion": "walks right", "facts": [
        {"id": "f1", "kind": "attribute", "name": "upper_colour", "value": "red", "start_frame": 0, "end_frame": 20,
         "evidence_frames": [3], "scope": "whole", "known": True}]})
    targets = [(v, BASE + v * T + q) for v in range(V) for q in range(Q)]
    _copy(Description, ["id", "run_id", "pool_id", "trajectory_id", "status", "failure", "raw_outputs", "attempts",
                        "inputs", "approved_version_id", "created_at"],
          ((tid, BASE, BASE + v, tid, "approved", "", "[]", 1, "{}", tid, NOW) for v, tid in targets))
    _copy(DescriptionVersion, ["id", "description_id", "number", "origin", "content", "content_sha256", "created_at"],
          ((tid, tid, 1, "model", content, "f" * 64, NOW) for _, tid in targets))
    predicates = json.dumps([{"name": "upper_colour", "value": "red", "fact_ids": ["f1"]}])
    _copy(Query, ["id", "pool_id", "video_id", "target_id", "source_version_id", "run_id", "text", "predicates",
                  "revision", "status", "rejection_reason", "raw_output", "ratings", "created_at"],
          ((tid, BASE + v, BASE + v, tid, tid, BASE, f"the person in red number {tid}", predicates, 1, "accepted",
            "", "", "{}", NOW) for v, tid in targets))

    def relation_rows():
        pk = BASE
        for v, tid in targets:
            for t in range(T):
                candidate = BASE + v * T + t
                yield (pk, tid, candidate, int(candidate == tid), "human", "within", False,
                       '{"reviews": [1]}' if candidate == tid else '{"reviews": [0]}', NOW)
                pk += 1

    n_relations = _copy(Relation, ["id", "query_id", "trajectory_id", "label", "source", "stratum", "pseudo",
                                   "evidence", "decided_at"], relation_rows())
    return {"videos": V, "trajectories": V * T, "queries": len(targets), "relations": n_relations}


def naive_relations_export(folder: Path) -> int:
    """The obvious way, for one table: read every relation into memory, then write it."""
    from annotation.models import Relation

    rows = list(Relation.objects.order_by("query_id", "trajectory_id").values(
        "id", "query_id", "trajectory_id", "label", "source", "stratum", "pseudo", "evidence", "item_id", "rule_id",
        "decided_at"))
    for r in rows:
        r["decided_at"] = r["decided_at"].isoformat()
    with open(folder / "relations.jsonl", "w") as fh:
        fh.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    table = pa.Table.from_pylist([{**r, "evidence": json.dumps(r["evidence"], sort_keys=True)} for r in rows])
    pq.write_table(table, folder / "relations.parquet")
    return len(rows)


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_release_export_streams_with_bounded_memory(tmp_path):
    from annotation.releases.services.release_io.check import verify_checksums
    from annotation.releases.services.releases import release_create

    start = time.perf_counter()
    sizes = build_records()
    build_s = time.perf_counter() - start

    with override_settings(VAR_DIR=tmp_path / "var", MEDIA_ROOT=tmp_path / "media"):
        baseline = _status("VmRSS")
        _reset_peak()
        start = time.perf_counter()
        release = release_create(name="bench", version="1.0.0", splits=["train"])
        stream_s = time.perf_counter() - start
        stream_peak = _status("VmHWM")
    folder = Path(release.path)
    assert release.counts["relations"] == sizes["relations"]
    assert release.counts["trajectories"] == release.counts["pool_members"] == sizes["trajectories"]
    assert release.counts["benchmark"] == sizes["queries"]
    stream_bytes = _size(folder)
    verify_start = time.perf_counter()
    assert verify_checksums(folder, expect_manifest_sha256=release.manifest_sha256) == []
    verify_s = time.perf_counter() - verify_start

    naive_folder = tmp_path / "naive"
    naive_folder.mkdir()
    naive_baseline = _status("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    n_naive = naive_relations_export(naive_folder)
    naive_s = time.perf_counter() - start
    naive_peak = _status("VmHWM")
    assert n_naive == sizes["relations"]

    relations_share = sum((folder / "data" / f"relations.{ext}").stat().st_size for ext in ("jsonl", "parquet"))
    result = {
        "mode": "full" if FULL else "quick",
        **{f"n_{k}": v for k, v in sizes.items()},
        "build_s": round(build_s, 2),
        "streaming": {"seconds": round(stream_s, 2), "records_per_s": round(sum(release.counts.values()) / stream_s),
                      "relations_per_s": round(sizes["relations"] / stream_s),
                      "bytes_written": stream_bytes, "mb_per_s": round(stream_bytes / stream_s / 1e6, 1),
                      "rss_before_mb": round(baseline / 2**20, 1), "peak_rss_mb": round(stream_peak / 2**20, 1),
                      "peak_above_baseline_mb": round((stream_peak - baseline) / 2**20, 1),
                      "files": release.files.count(), "verify_s": round(verify_s, 2)},
        "naive_relations_only": {"seconds": round(naive_s, 2), "relations_per_s": round(n_naive / naive_s),
                                 "rss_before_mb": round(naive_baseline / 2**20, 1),
                                 "peak_rss_mb": round(naive_peak / 2**20, 1),
                                 "peak_above_baseline_mb": round((naive_peak - naive_baseline) / 2**20, 1),
                                 "bytes_written": _size(naive_folder)},
        "streaming_relations_bytes": relations_share,
        "python": platform.python_version(), "pyarrow": pa.__version__, "cpu_count": os.cpu_count(),
    }
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "release.json").write_text(json.dumps(result, indent=2) + "\n")
    buf = io.StringIO()
    s, n = result["streaming"], result["naive_relations_only"]
    print(f"\nrelease export ({result['mode']} size): {sizes['relations']:,} relations, "
          f"{sizes['trajectories']:,} trajectories, {sizes['queries']:,} queries; records built in {build_s:.1f} s",
          file=buf)
    print(f"{'way':<38}{'seconds':>9}{'relations/s':>14}{'peak RSS MB':>13}{'above start MB':>16}", file=buf)
    print(f"{'streaming release (every table)':<38}{s['seconds']:>9.2f}{s['relations_per_s']:>14,}"
          f"{s['peak_rss_mb']:>13.1f}{s['peak_above_baseline_mb']:>16.1f}", file=buf)
    print(f"{'read whole, then write (relations)':<38}{n['seconds']:>9.2f}{n['relations_per_s']:>14,}"
          f"{n['peak_rss_mb']:>13.1f}{n['peak_above_baseline_mb']:>16.1f}", file=buf)
    print(f"streaming wrote {stream_bytes / 1e6:.1f} MB in {s['files']} files ({s['mb_per_s']} MB/s); "
          f"checksums verified in {verify_s:.2f} s", file=buf)
    print(buf.getvalue())
    # what the export adds to the process (the absolute peak also holds whatever earlier tests of the
    # same run left resident; run alone, it is the figure printed above)
    assert stream_peak - baseline < MAX_PEAK_BYTES, f"the export added {(stream_peak - baseline) / 2**20:.0f} MiB"
    assert stream_peak - baseline < naive_peak - naive_baseline or not FULL
