"""Release export at scale: the streaming exporter (``release_create``) against the obvious way (read
the relations table whole, then write it), in the same run, with throughput and peak memory.

Full size (``TRAJLAB_BENCH_FULL=1``): 1,000 train videos of 100 pooled trajectories each (100,000
trajectories, 20 observations each), 10 accepted queries per video (10,000), each with its full
within-video row (1,000,000 relations). Quick size (default): 100 videos (10,000 trajectories,
100,000 relations). The records are written straight into PostgreSQL with ``COPY`` (the test
database; ``tests.benchmarks.fill.release_records``), with everything a release reads: sources,
split groups, videos, proposal runs, trajectories, frozen pools and members, descriptions and
versions, queries and relations.

Peak memory is the process's resident high-water mark (``VmHWM``), reset through
``/proc/self/clear_refs`` before each phase, so it covers that phase alone; the figures are the
peak and the peak above the resident size at the phase's start. The export's CPU seconds and the
machine's load average beside its wall time tell a slow run on a busy machine from a slow export. The export must add less than
1 GiB at full size (run alone, its whole process peaks near 430 MiB). Figures go to
``var/bench/release.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import io
import json
import os
import platform
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.test import override_settings

from tests.benchmarks.fill import release_records

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
N_VIDEOS = 1_000 if FULL else 100
TRAJ_PER_VIDEO = 100
QUERIES_PER_VIDEO = 10
N_OBS = 20
MAX_PEAK_BYTES = 1 << 30


def _status(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


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
    sizes = release_records(n_videos=N_VIDEOS, traj_per_video=TRAJ_PER_VIDEO, queries_per_video=QUERIES_PER_VIDEO,
                            n_obs=N_OBS)
    build_s = time.perf_counter() - start

    with override_settings(VAR_DIR=tmp_path / "var", MEDIA_ROOT=tmp_path / "media"):
        baseline = _status("VmRSS")
        _reset_peak()
        load = os.getloadavg()[0]
        start, cpu_start = time.perf_counter(), time.process_time()
        release = release_create(name="bench", version="1.0.0", splits=["train"])
        stream_s, stream_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
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

    relations_share = sum(p.stat().st_size for p in (folder / "data").glob("relations*") if p.is_file()) + \
        sum(p.stat().st_size for p in (folder / "data" / "relations").glob("*.parquet"))
    result = {
        "mode": "full" if FULL else "quick",
        **{f"n_{k}": v for k, v in sizes.items()},
        "build_s": round(build_s, 2),
        "streaming": {"seconds": round(stream_s, 2), "records_per_s": round(sum(release.counts.values()) / stream_s),
                      "cpu_s": round(stream_cpu_s, 2), "load_average_1m": round(load, 2),
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
    print(f"streaming wrote {stream_bytes / 1e6:.1f} MB in {s['files']} files ({s['mb_per_s']} MB/s), "
          f"{s['records_per_s']:,} records/s, {s['cpu_s']} s of CPU (load average {s['load_average_1m']}); "
          f"checksums verified in {verify_s:.2f} s", file=buf)
    print(buf.getvalue())
    # what the export adds to the process (the absolute peak also holds whatever earlier tests of the
    # same run left resident; run alone, it is the figure printed above)
    assert stream_peak - baseline < MAX_PEAK_BYTES, f"the export added {(stream_peak - baseline) / 2**20:.0f} MiB"
    assert stream_peak - baseline < naive_peak - naive_baseline or not FULL
