"""Trajectory search at scale: the exact index (``IndexFlatIP``) and the approximate one (IVF-Flat)
of ``models.training.index.TrajectoryIndex``, and the served first stage
(``models.training.index.GalleryRanker``, what ``workers.search.search`` ranks with), against the
obvious way (a NumPy matrix product and a sort over all embeddings) in the same run.

Full size (``TRAJLAB_BENCH_FULL=1``): 1,000,000 trajectory embeddings of width 256. Quick size
(default): 100,000. The embeddings are clustered as real ones are: trajectories of one video lie
around the video's centre (8 per video on average), and video centres around 256 scene centres.
Queries are perturbed copies of stored trajectories (a text query near its target).

Reported per kind (``kinds``): ``build_s`` (IVF: k-means training and adding), ``memory_mb``
(resident memory added by the build, from ``/proc/self/statm``), single-query latency
``p50_ms``/``p95_ms`` over ``N_SINGLE`` queries one at a time, batch throughput over ``N_BATCH``
queries in one call, and ``recall@10`` against the NumPy top 10 on the batch queries (for IVF also
over a sweep of ``nprobe``). The exact index must return the NumPy top 10. Kinds:

- ``exact``, ``ivf`` (``nprobe`` 32): ``TrajectoryIndex`` built in memory;
- ``served``: the index ``served_config`` gives a gallery of this size (IVF-Flat with
  ``SERVED_NPROBE`` from ``EXACT_MAX`` up), saved, loaded memory-mapped as a served search loads it,
  and timed through ``GalleryRanker.top``, the served search's ranking step; ``memory_mb`` is what
  the mapped index adds once queried (its pages in the page cache, shared between processes),
  ``build_s`` includes writing it. Its ``nprobe`` sweep (single queries) names the smallest
  ``nprobe`` that reaches ``RECALL_TARGET`` (``chosen_nprobe``): ``SERVED_NPROBE`` is that value;
- ``served_exact``: ``GalleryRanker.top`` on the exact path (every cosine, then
  ``top_positions``), what a gallery below ``EXACT_MAX`` gets;
- ``served_before``: the ranking step the served search ran before it had an index (every cosine,
  a stable sort of all of them, then a partial sort), over ``N_SLOW`` queries;
- ``hnsw`` (with ``TRAJLAB_BENCH_HNSW=1``; a million-vector build takes many minutes on two cores):
  ``IndexHNSWFlat`` (``hnsw_m`` 32, ``ef_construction`` 80) with an ``ef_search`` sweep.

Builds run on ``TRAJLAB_BENCH_BUILD_THREADS`` threads (default 2), queries on
``TRAJLAB_BENCH_THREADS`` (default 1: the test machine is shared). ``peak_rss_mb`` is the process's
peak. Figures go to ``var/bench/search.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest

from models.training.index import (
    SERVED_NPROBE,
    GalleryRanker,
    IndexConfig,
    TrajectoryIndex,
    cosines,
    served_config,
)

faiss = pytest.importorskip("faiss")
pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
THREADS = int(os.environ.get("TRAJLAB_BENCH_THREADS", "1"))
BUILD_THREADS = int(os.environ.get("TRAJLAB_BENCH_BUILD_THREADS", "2"))
HNSW = os.environ.get("TRAJLAB_BENCH_HNSW", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
N = 1_000_000 if FULL else 100_000
DIM = 256
N_SINGLE = 200
N_BATCH = 1000
N_SLOW = 20
K = 10
RECALL_TARGET = 0.99
SERVED_P50_MS = 1.0                      # the served single-query target at full size
N_SCENES = 256
NPROBE_SWEEP = (1, 4, 8, 16, 32, 64)
SERVED_NPROBE_SWEEP = (2, 4, 6, 8, 12, 16)
EF_SWEEP = (32, 64, 128, 256, 512)
MIN_IVF_RECALL = 0.9
SEED = 17


def embeddings(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clustered unit embeddings ``[n, DIM]`` float32, trajectory ids and video ids."""
    rng = np.random.default_rng(seed)
    n_videos = max(1, n // 8)
    scenes = rng.standard_normal((N_SCENES, DIM), dtype=np.float32)
    centres = scenes[rng.integers(0, N_SCENES, n_videos)] + 0.8 * rng.standard_normal((n_videos, DIM), dtype=np.float32)
    videos = rng.integers(0, n_videos, n)
    x = np.empty((n, DIM), np.float32)
    step = 100_000
    for start in range(0, n, step):          # in slices, to keep the peak memory near one copy
        stop = min(n, start + step)
        part = centres[videos[start:stop]] + 0.6 * rng.standard_normal((stop - start, DIM), dtype=np.float32)
        x[start:stop] = part / np.linalg.norm(part, axis=1, keepdims=True)
    return x, np.arange(n, dtype=np.int64) + 1, videos.astype(np.int64)


def queries(x: np.ndarray, n: int, seed: int = SEED + 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = x[rng.integers(0, x.shape[0], n)] + 0.1 * rng.standard_normal((n, DIM), dtype=np.float32)
    return (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def numpy_top_k(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """The obvious way: all scores, a partial sort, then a sort of the k best."""
    out = np.empty((q.shape[0], k), np.int64)
    for start in range(0, q.shape[0], 100):
        s = q[start:start + 100] @ x.T                                             # [100, N]
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(s, part, axis=1), axis=1, kind="stable")
        out[start:start + 100] = ids[np.take_along_axis(part, order, axis=1)]
    return out


def peak_rss_mb() -> float:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def before_top(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """The served ranking step before the index: every cosine, a stable sort of all of them (the
    pipeline's shortlist), a copy of the scores, then a partial sort of the k best."""
    s = cosines(x, q)[None, :]                                                     # [1, N]
    np.argsort(-s, axis=1, kind="stable")[:, :k]
    final = s.copy()[0]
    part = np.argpartition(-final, k - 1)[:k]
    part = np.flatnonzero(final >= final[part].min())
    return part[np.lexsort((part, -final[part]))][:k]


def single(call, rows: np.ndarray) -> tuple[dict, list]:
    """p50/p95 in milliseconds of ``call(row)`` one row at a time, and the answers."""
    lat, out = [], []
    for row in rows:
        start = time.perf_counter()
        out.append(call(row))
        lat.append(time.perf_counter() - start)
    lat_ms = 1000 * np.array(lat)
    return {"p50_ms": float(np.percentile(lat_ms, 50)), "p95_ms": float(np.percentile(lat_ms, 95))}, out


def recall(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(got.tolist(), exact.tolist())]))


def measure(index: TrajectoryIndex, q_single: np.ndarray, q_batch: np.ndarray) -> dict:
    latency, _ = single(lambda row: index.search(row[None, :], K), q_single)
    start = time.perf_counter()
    _, ids = index.search(q_batch, K)
    batch_s = time.perf_counter() - start
    return {**latency, "batch_s": batch_s, "qps": q_batch.shape[0] / batch_s, "ids": ids}


def rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def built(config: IndexConfig, x: np.ndarray, ids: np.ndarray, videos: np.ndarray) -> tuple[TrajectoryIndex, dict]:
    """The index of ``config`` over the gallery, built on ``BUILD_THREADS`` threads, with its
    build time and the resident memory it added."""
    faiss.omp_set_num_threads(BUILD_THREADS)
    before = rss_bytes()
    start = time.perf_counter()
    index = TrajectoryIndex.build(x, ids, videos, config)
    row = {"build_s": time.perf_counter() - start, "memory_mb": (rss_bytes() - before) / 2**20}
    faiss.omp_set_num_threads(THREADS)
    return index, row


def first_reaching(sweep: list[dict], name: str):
    """The smallest value of ``name`` in ``sweep`` whose recall@10 reaches ``RECALL_TARGET``."""
    return next((r[name] for r in sweep if r["recall@10"] >= RECALL_TARGET), None)


def served_kinds(x, ids, videos, q_single, q_batch, obvious, exact_index, folder: Path) -> dict:
    """The ``served``, ``served_exact`` and ``served_before`` rows (module docstring)."""
    q_slow = q_batch[:N_SLOW]
    exact_ranker = GalleryRanker(x, exact_index)
    latency, answers = single(lambda row: exact_ranker.top(row, K), q_slow)
    rows = {"served_exact": {**latency, "recall@10": recall(np.stack([ids[a[0]] for a in answers]), obvious[:N_SLOW]),
                             "build_s": 0.0, "memory_mb": 0.0, "queries": N_SLOW}}
    latency, answers = single(lambda row: before_top(x, row, K), q_slow)
    rows["served_before"] = {**latency, "recall@10": recall(np.stack([ids[a] for a in answers]), obvious[:N_SLOW]),
                             "build_s": 0.0, "memory_mb": 0.0, "queries": N_SLOW}

    config = served_config(n=N, dim=DIM)
    index, row = built(config, x, ids, videos)
    start = time.perf_counter()
    path = index.save(folder / "served.npz")
    row["build_s"] += time.perf_counter() - start
    row["build_memory_mb"] = row.pop("memory_mb")
    del index
    before = rss_bytes()
    start = time.perf_counter()
    ranker = GalleryRanker(x, TrajectoryIndex.load(path, mmap=True))             # as a served search loads it
    row["load_s"] = time.perf_counter() - start
    row["recall@10"] = recall(np.stack([ids[ranker.top(q, K)[0]] for q in q_batch]), obvious)
    latency, answers = single(lambda q: ranker.top(q, K), q_single)
    row |= latency
    row["memory_mb"] = (rss_bytes() - before) / 2**20
    row["answered_by_index"] = float(np.mean([a[2] for a in answers]))
    row["kind"], row["nprobe"] = config.kind, config.nprobe
    sweep = []
    for nprobe in SERVED_NPROBE_SWEEP if config.kind == "ivf" else ():
        ranker.index.set_search_parameters(nprobe=nprobe)
        swept = np.stack([ids[ranker.top(q, K)[0]] for q in q_batch])
        latency, _ = single(lambda q: ranker.top(q, K), q_single)
        sweep.append({"nprobe": nprobe, "recall@10": recall(swept, obvious), **latency})
    row["nprobe_sweep"], row["chosen_nprobe"] = sweep, first_reaching(sweep, "nprobe")
    rows["served"] = row
    return rows


def hnsw_kind(x, ids, videos, q_single, q_batch, obvious) -> dict:
    """The ``hnsw`` row: built once, then an ``ef_search`` sweep; the figures at the smallest
    ``ef_search`` that reaches ``RECALL_TARGET`` (the largest swept when none does)."""
    index, row = built(IndexConfig(dim=DIM, kind="hnsw"), x, ids, videos)
    sweep = []
    for ef in EF_SWEEP:
        index.set_search_parameters(ef_search=ef)
        m = measure(index, q_single, q_batch)
        sweep.append({"ef_search": ef, "recall@10": recall(m.pop("ids"), obvious), **m})
    row["ef_sweep"], row["chosen_ef_search"] = sweep, first_reaching(sweep, "ef_search")
    at = next(r for r in sweep if r["ef_search"] == (row["chosen_ef_search"] or EF_SWEEP[-1]))
    return row | {k: at[k] for k in ("p50_ms", "p95_ms", "recall@10", "qps")}


def test_search_at_scale(tmp_path):
    faiss.omp_set_num_threads(THREADS)
    x, ids, videos = embeddings(N)
    q_single, q_batch = queries(x, N_SINGLE, SEED + 1), queries(x, N_BATCH, SEED + 2)

    start = time.perf_counter()
    obvious = numpy_top_k(x, ids, q_batch, K)
    numpy_s = time.perf_counter() - start

    figures = {}
    for kind in ("exact", "ivf"):
        index, row = built(IndexConfig(dim=DIM, kind=kind), x, ids, videos)
        m = measure(index, q_single, q_batch)
        got = m.pop("ids")
        row |= m
        row["recall@10"] = recall(got, obvious)
        if kind == "exact":
            row["same_top10_as_numpy"] = float(np.mean(np.all(got == obvious, axis=1)))
            figures |= served_kinds(x, ids, videos, q_single, q_batch, obvious, index, tmp_path)
        else:
            ivf = faiss.extract_index_ivf(index._index)
            row["nlist"], row["nprobe"] = int(ivf.nlist), int(ivf.nprobe)
            sweep = []
            for nprobe in NPROBE_SWEEP:
                index.set_search_parameters(nprobe=nprobe)
                start = time.perf_counter()
                _, swept = index.search(q_batch, K)
                sweep.append({"nprobe": nprobe, "recall@10": recall(swept, obvious),
                              "batch_qps": N_BATCH / (time.perf_counter() - start)})
            row["nprobe_sweep"] = sweep
        figures[kind] = row
        del index
    if HNSW:
        figures["hnsw"] = hnsw_kind(x, ids, videos, q_single, q_batch, obvious)

    order = ["exact", "ivf", "hnsw", "served", "served_exact", "served_before"]
    result = {
        "mode": "full" if FULL else "quick",
        "n": N, "dim": DIM, "k": K, "threads": THREADS, "build_threads": BUILD_THREADS,
        "numpy_batch_s": round(numpy_s, 3), "numpy_qps": round(N_BATCH / numpy_s, 1),
        "kinds": rounded({kind: figures[kind] for kind in order if kind in figures}),
        "served_nprobe": SERVED_NPROBE, "recall_target": RECALL_TARGET,
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "cpu_count": os.cpu_count(),
    }
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps(result, indent=2) + "\n")

    print(f"\ntrajectory search, {N:,} embeddings of width {DIM} ({result['mode']} size), top {K}, "
          f"queries on {THREADS} thread(s), builds on {BUILD_THREADS}; peak RSS {result['peak_rss_mb']:.0f} MB")
    print(f"{'kind':<15}{'build s':>9}{'memory MB':>11}{'p50 ms':>9}{'p95 ms':>9}{'recall@10':>11}")
    for kind, r in result["kinds"].items():
        print(f"{kind:<15}{r['build_s']:>9.2f}{r['memory_mb']:>11.0f}{r['p50_ms']:>9.3f}{r['p95_ms']:>9.3f}"
              f"{r['recall@10']:>11.4f}")
    print(f"{'numpy':<15}{'':>9}{'':>11}{'':>9}{'':>9}  batch {N_BATCH / numpy_s:.0f} q/s (matrix product + partial sort)")
    served = figures["served"]
    if served["nprobe_sweep"]:
        print(f"served: IVF nprobe {served['nprobe']} (smallest reaching recall@10 {RECALL_TARGET}: "
              f"{served['chosen_nprobe']}); " + ", ".join(
                  f"nprobe {r['nprobe']}: {r['recall@10']:.4f} at {r['p50_ms']:.3f} ms" for r in served["nprobe_sweep"]))
    if "hnsw" in figures:
        print(f"hnsw: ef_search reaching the target {figures['hnsw']['chosen_ef_search']}; " + ", ".join(
            f"ef {r['ef_search']}: {r['recall@10']:.4f} at {r['p50_ms']:.3f} ms" for r in figures["hnsw"]["ef_sweep"]))
    assert figures["exact"]["same_top10_as_numpy"] >= 0.99, "exact index and NumPy disagree on the top 10"
    assert figures["served_exact"]["recall@10"] == 1.0 and figures["served_before"]["recall@10"] == 1.0
    assert figures["ivf"]["recall@10"] >= MIN_IVF_RECALL
    assert figures["ivf"]["p50_ms"] < figures["exact"]["p50_ms"], "IVF is not faster than brute force"
    assert served["recall@10"] >= RECALL_TARGET, f"the served index misses the recall target: {served['recall@10']}"
    assert served["p50_ms"] < figures["served_exact"]["p50_ms"] < figures["served_before"]["p50_ms"]
    if FULL:
        assert served["p50_ms"] < SERVED_P50_MS, f"served p50 {served['p50_ms']:.3f} ms"
