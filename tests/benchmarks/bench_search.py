"""Trajectory search at scale: the exact index (``IndexFlatIP``) and the approximate one (IVF-Flat)
of ``models.training.index.TrajectoryIndex``, against the obvious way (a NumPy matrix product and a
partial sort over all embeddings) in the same run.

Full size (``TRAJLAB_BENCH_FULL=1``): 1,000,000 trajectory embeddings of width 256. Quick size
(default): 100,000. The embeddings are clustered as real ones are: trajectories of one video lie
around the video's centre (8 per video on average), and video centres around 256 scene centres.
Queries are perturbed copies of stored trajectories (a text query near its target).

Reported per kind: build time (IVF: k-means training and adding), resident memory added by the
build (from ``/proc/self/statm``), single-query latency p50/p95 over ``N_SINGLE`` queries one at a
time, batch throughput over ``N_BATCH`` queries in one call, and for IVF the recall@10 against the
exact top 10 on the batch queries, also over a sweep of ``nprobe``. The exact index must return the NumPy top 10. FAISS runs on
``TRAJLAB_BENCH_THREADS`` threads (default 1: the test machine is shared). Figures go to
``var/bench/search.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest

from models.training.index import IndexConfig, TrajectoryIndex

faiss = pytest.importorskip("faiss")
pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
THREADS = int(os.environ.get("TRAJLAB_BENCH_THREADS", "1"))
REPO = Path(__file__).resolve().parents[2]
N = 1_000_000 if FULL else 100_000
DIM = 256
N_SINGLE = 200
N_BATCH = 1000
K = 10
N_SCENES = 256
NPROBE_SWEEP = (1, 4, 8, 16, 32, 64)
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


def recall(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / K for a, b in zip(got.tolist(), exact.tolist())]))


def measure(index: TrajectoryIndex, q_single: np.ndarray, q_batch: np.ndarray) -> dict:
    lat = []
    for row in q_single:
        start = time.perf_counter()
        index.search(row[None, :], K)
        lat.append(time.perf_counter() - start)
    start = time.perf_counter()
    _, ids = index.search(q_batch, K)
    batch_s = time.perf_counter() - start
    lat_ms = 1000 * np.array(lat)
    return {"p50_ms": float(np.percentile(lat_ms, 50)), "p95_ms": float(np.percentile(lat_ms, 95)),
            "batch_s": batch_s, "qps": q_batch.shape[0] / batch_s, "ids": ids}


def rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def test_exact_and_ivf_search_at_scale():
    faiss.omp_set_num_threads(THREADS)
    x, ids, videos = embeddings(N)
    q_single, q_batch = queries(x, N_SINGLE, SEED + 1), queries(x, N_BATCH, SEED + 2)

    start = time.perf_counter()
    obvious = numpy_top_k(x, ids, q_batch, K)
    numpy_s = time.perf_counter() - start

    figures = {}
    for kind in ("exact", "ivf"):
        before = rss_bytes()
        start = time.perf_counter()
        index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM, kind=kind))
        build_s = time.perf_counter() - start
        grown = rss_bytes() - before
        m = measure(index, q_single, q_batch)
        got = m.pop("ids")
        row = {"build_s": build_s, "memory_mb": grown / 2**20, **m}
        if kind == "exact":
            agree = float(np.mean(np.all(got == obvious, axis=1)))
            row["same_top10_as_numpy"] = agree
            exact_ids = got
        else:
            ivf = faiss.extract_index_ivf(index._index)
            row["nlist"], row["nprobe"] = int(ivf.nlist), int(ivf.nprobe)
            row["recall@10"] = recall(got, exact_ids)
            sweep = []
            for nprobe in NPROBE_SWEEP:
                index.set_search_parameters(nprobe=nprobe)
                start = time.perf_counter()
                _, swept = index.search(q_batch, K)
                sweep.append({"nprobe": nprobe, "recall@10": recall(swept, exact_ids),
                              "batch_qps": N_BATCH / (time.perf_counter() - start)})
            row["nprobe_sweep"] = sweep
        figures[kind] = row
        del index

    result = {
        "mode": "full" if FULL else "quick",
        "n": N, "dim": DIM, "k": K, "threads": THREADS,
        "numpy_batch_s": round(numpy_s, 3), "numpy_qps": round(N_BATCH / numpy_s, 1),
        "kinds": rounded(figures),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "cpu_count": os.cpu_count(),
    }
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "search.json").write_text(json.dumps(result, indent=2) + "\n")

    print(f"\ntrajectory search, {N:,} embeddings of width {DIM} ({result['mode']} size), "
          f"top {K}, {THREADS} thread(s)")
    print(f"{'kind':<8}{'build s':>9}{'memory MB':>11}{'p50 ms':>9}{'p95 ms':>9}{'batch q/s':>11}{'recall@10':>11}")
    for kind, r in figures.items():
        recall_text = f"{r['recall@10']:>11.3f}" if "recall@10" in r else f"{'1 (exact)':>11}"
        print(f"{kind:<8}{r['build_s']:>9.2f}{r['memory_mb']:>11.0f}{r['p50_ms']:>9.2f}{r['p95_ms']:>9.2f}"
              f"{r['qps']:>11.0f}{recall_text}")
    print(f"{'numpy':<8}{'':>9}{'':>11}{'':>9}{'':>9}{N_BATCH / numpy_s:>11.0f}  (matrix product + partial sort)")
    if "nlist" in figures["ivf"]:
        print(f"IVF: nlist {figures['ivf']['nlist']}, nprobe {figures['ivf']['nprobe']}; sweep (batch): "
              + ", ".join(f"nprobe {r['nprobe']}: recall {r['recall@10']:.3f} at {r['batch_qps']:.0f} q/s"
                          for r in figures["ivf"]["nprobe_sweep"]))
    assert figures["exact"]["same_top10_as_numpy"] >= 0.99, "exact index and NumPy disagree on the top 10"
    assert figures["ivf"]["recall@10"] >= MIN_IVF_RECALL
    assert figures["ivf"]["p50_ms"] < figures["exact"]["p50_ms"], "IVF is not faster than brute force"
