"""Structured mining strata at scale: the encoded compatibility check and the structured FAISS miner
against the slow, obvious way (``predicate_support`` pair by pair), in the same run.

Quick size (default): 20,000 trajectories × 2,000 queries, d = 64, 400 videos of 50;
``TRAJLAB_BENCH_FULL=1``: 100,000 × 20,000, d = 384, 2,000 videos. Each trajectory has random
approved facts (colours, some multi-coloured, changing or interval-scoped, a category, a walking
direction; 15% none), each query one to three predicates (``tests.models.test_mining_structure``).

Timed, one process:

- ``classify``: the classes of ``PAIRS`` random (query, trajectory) pairs, vectorised
  (:meth:`Compatibility.classify`) and by :func:`classify_pair` in a loop (on a subset,
  extrapolated); both must agree on the subset;
- ``mine``: all four strata with and without the structure (same budgets), and
  ``mine_bruteforce`` with the structure on a subset of queries (extrapolated); the FAISS miner's
  potential matches and hard negatives must equal the reference's on that subset.

Figures go to ``var/bench/mining_structure.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from models.curation.compatibility import Compatibility, classify_pair
from models.curation.mining import MiningConfig
from models.curation.mining_search import mine, mine_bruteforce
from tests.models.test_mining_structure import random_facts, random_predicates

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
N_TRAJ, N_QUERY, DIM = (100_000, 20_000, 384) if FULL else (20_000, 2_000, 64)
PER_VIDEO = 50
PAIRS = 1_000_000 if FULL else 200_000
LOOP_PAIRS = 20_000
BRUTE_QUERIES = 20
OUT = Path(__file__).resolve().parents[2] / "var" / "bench" / "mining_structure.json"
BUDGETS = dict(potential_k=5, hard_k=10, easy_k=10, random_k=5, seed=6)


def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_inputs(rng: np.random.Generator) -> dict:
    n_videos = N_TRAJ // PER_VIDEO
    split_of = np.array(["train", "dev", "test"])[rng.choice(3, n_videos, p=[0.7, 0.15, 0.15])]
    t_video = np.repeat(np.arange(n_videos), PER_VIDEO)
    centres = rng.normal(size=(300, DIM))
    t_emb = unit(centres[rng.integers(0, 300, N_TRAJ)] + 0.8 * rng.normal(size=(N_TRAJ, DIM)))
    near = rng.integers(0, N_TRAJ, N_QUERY)
    q_emb = unit(t_emb[near] + 0.3 * rng.normal(size=(N_QUERY, DIM)))
    return dict(query_ids=np.arange(N_QUERY), query_videos=t_video[near], query_splits=split_of[t_video[near]],
                query_emb=q_emb, traj_ids=np.arange(N_TRAJ), traj_videos=t_video, traj_splits=split_of[t_video],
                traj_emb=t_emb)


def ranked(result, queries: set[int]) -> list[tuple]:
    keep = np.isin(result.prov_stratum, (0, 1)) & np.isin(result.query_ids[result.prov_pair], list(queries))
    pair = result.prov_pair[keep]
    return sorted(zip(result.query_ids[pair].tolist(), result.trajectory_ids[pair].tolist(),
                      result.prov_stratum[keep].tolist(), result.prov_rank[keep].tolist(),
                      result.prov_compat[keep].tolist()))


def test_structured_mining_against_the_pair_by_pair_reading():
    rng = np.random.default_rng(6)
    started = time.perf_counter()
    data = make_inputs(rng)
    rng_facts = np.random.default_rng(7)
    build_started = time.perf_counter()
    structure = Compatibility([random_predicates(rng_facts) for _ in range(N_QUERY)],
                              [random_facts(rng_facts) for _ in range(N_TRAJ)])
    build_s = time.perf_counter() - build_started

    q = rng.integers(0, N_QUERY, PAIRS)
    t = rng.integers(0, N_TRAJ, PAIRS)
    t0 = time.perf_counter()
    fast = structure.classify(q, t)
    classify_fast_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    slow = np.array([classify_pair(structure.query_predicates[a], structure.trajectory_facts[b])
                     for a, b in zip(q[:LOOP_PAIRS], t[:LOOP_PAIRS])])
    classify_loop_s = (time.perf_counter() - t0) * PAIRS / LOOP_PAIRS
    np.testing.assert_array_equal(fast[:LOOP_PAIRS], slow)

    structured_cfg = MiningConfig(**BUDGETS, easy_max=None, structured=True, run_name="bench-structured")
    plain_cfg = MiningConfig(**BUDGETS, easy_max=0.2, run_name="bench-plain")
    t0 = time.perf_counter()
    result = mine(structured_cfg, **data, structure=structure)
    mine_structured_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain = mine(plain_cfg, **data)
    mine_plain_s = time.perf_counter() - t0
    subset = rng.choice(N_QUERY, BRUTE_QUERIES, replace=False)
    sub = {k: (v[subset] if k.startswith("query_") else v) for k, v in data.items()}
    sub_structure = Compatibility([structure.query_predicates[i] for i in subset], structure.trajectory_facts)
    t0 = time.perf_counter()
    reference = mine_bruteforce(structured_cfg, **sub, structure=sub_structure)
    brute_s = (time.perf_counter() - t0) * N_QUERY / BRUTE_QUERIES
    assert ranked(result, set(subset.tolist())) == ranked(reference, set(subset.tolist()))

    figures = {
        "size": {"trajectories": N_TRAJ, "queries": N_QUERY, "dim": DIM, "full": FULL},
        "compatibility_build_s": round(build_s, 3),
        "classify": {"pairs": PAIRS, "vectorised_s": round(classify_fast_s, 4),
                     "pair_by_pair_s_extrapolated": round(classify_loop_s, 2), "loop_pairs_timed": LOOP_PAIRS,
                     "speedup": round(classify_loop_s / classify_fast_s, 1)},
        "mine": {"structured_s": round(mine_structured_s, 2), "similarity_only_s": round(mine_plain_s, 2),
                 "bruteforce_structured_s_extrapolated": round(brute_s, 1), "bruteforce_queries_timed": BRUTE_QUERIES,
                 "speedup_vs_bruteforce": round(brute_s / mine_structured_s, 1),
                 "pairs_by_stratum": result.counts(), "similarity_only_pairs_by_stratum": plain.counts(),
                 "deepened_queries": result.log["deepened_queries"],
                 "sampling_fallbacks": result.log["sampling_fallbacks"]},
        "seconds": round(time.perf_counter() - started, 1),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2))
    print(json.dumps(figures, indent=2))
    assert classify_fast_s < classify_loop_s
    assert mine_structured_s < brute_s
