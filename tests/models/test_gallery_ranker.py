"""The served first stage (``models.training.index.GalleryRanker``): the exact path equals a stable
sort of the cosines the pipeline computes; the IVF path equals it where it visits every cell, ties
included, and reaches a recall floor with the served ``nprobe``; what the IVF path cannot answer
goes to the exact path; bad galleries and queries are refused."""
from __future__ import annotations

import numpy as np
import pytest

from models.training import index as index_module
from models.training.index import (
    EXACT_MAX,
    SERVED_NPROBE,
    GalleryRanker,
    IndexConfig,
    TrajectoryIndex,
    cosines,
    served_config,
)

faiss = pytest.importorskip("faiss")
faiss.omp_set_num_threads(1)
DIM = 32


def quantised(n: int, rng) -> np.ndarray:
    """``[n, DIM]`` unit rows with four entries of ±1/2: every inner product of two of them is a
    multiple of 1/4, exact in float32 whatever the order of summation, so many tie."""
    x = np.zeros((n, DIM), np.float32)
    for row in x:
        row[rng.choice(DIM, 4, replace=False)] = rng.choice([-0.5, 0.5], 4)
    return x


def gaussian(n: int, rng) -> np.ndarray:
    x = rng.normal(size=(n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def gallery(x: np.ndarray, rng, config: IndexConfig) -> GalleryRanker:
    """``x`` with ascending ids (gaps between them) and random videos, indexed by ``config``."""
    ids = np.cumsum(rng.integers(1, 5, len(x))) + 100
    return GalleryRanker(x, TrajectoryIndex.build(x, ids, rng.integers(0, 9, len(x)), config))


def stable_top(x: np.ndarray, q: np.ndarray, depth: int) -> np.ndarray:
    """The obvious way: every cosine, a stable descending sort of all of them."""
    return np.argsort(-cosines(x, q), kind="stable")[:depth]


def test_the_exact_path_equals_a_stable_sort_ties_and_short_galleries_included():
    rng = np.random.default_rng(0)
    for case in range(300):
        n = int(rng.integers(0, 400))
        x = quantised(n, rng) if case % 2 else gaussian(n, rng)
        ranker = gallery(x, rng, IndexConfig(dim=DIM))
        q = quantised(1, rng)[0] if case % 3 else gaussian(1, rng)[0]
        depth = int(rng.integers(1, n + 8))                                    # deeper than the gallery too
        positions, scores, by_index = ranker.top(q, depth)
        assert not by_index and np.array_equal(positions, stable_top(x, q, depth)), case
        assert np.array_equal(scores, cosines(x, q)[positions])


@pytest.mark.parametrize("mapped", [False, True])
def test_the_ivf_path_visiting_every_cell_equals_the_exact_path_ties_included(tmp_path, mapped):
    rng = np.random.default_rng(1)
    x = quantised(3000, rng)
    ranker = gallery(x, rng, IndexConfig(dim=DIM, kind="ivf", nlist=16, nprobe=16))
    if mapped:
        index = TrajectoryIndex.load(ranker.index.save(tmp_path / "g.npz"), mmap=True)
        ranker = GalleryRanker(x, index)
    for case in range(60):
        q = quantised(1, rng)[0]
        depth = int(rng.choice([1, 10, 57, 1000, 3000, 3100]))
        positions, scores, by_index = ranker.top(q, depth)
        assert by_index, case
        assert np.array_equal(positions, stable_top(x, q, depth)), case
        assert np.array_equal(scores, cosines(x, q)[positions])              # exact sums: the same values
        assert np.array_equal(ranker.ids[positions], ranker.index.ids[positions])


def scenes(n: int, seed: int, dim: int) -> np.ndarray:
    """Unit rows clustered as the benchmark's are: trajectories around videos, videos around scenes."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim))[rng.integers(0, 64, n // 8)] + 0.8 * rng.normal(size=(n // 8, dim))
    x = centres[rng.integers(0, n // 8, n)] + 0.6 * rng.normal(size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_the_served_config_is_exact_below_the_threshold_and_ivf_from_it_up():
    assert served_config(n=EXACT_MAX - 1, dim=8) == IndexConfig(dim=8, kind="exact")
    assert served_config(n=0, dim=8).kind == "exact"
    config = served_config(n=EXACT_MAX, dim=64)
    assert config.kind == "ivf" and config.nprobe == SERVED_NPROBE
    rng = np.random.default_rng(2)
    x = scenes(EXACT_MAX, 3, 64)
    ranker = GalleryRanker(x, TrajectoryIndex.build(x, np.arange(EXACT_MAX) + 1, np.zeros(EXACT_MAX, int), config))
    q = x[rng.integers(0, EXACT_MAX, 100)] + 0.1 * rng.normal(size=(100, 64))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    exact = np.argsort(-(q @ x.T), axis=1, kind="stable")[:, :10]
    found = [ranker.top(row, 10) for row in q]
    assert all(by_index for _, _, by_index in found)
    recall = np.mean([len(set(p.tolist()) & set(e.tolist())) / 10 for (p, _, _), e in zip(found, exact)])
    assert recall >= 0.98, f"recall@10 {recall:.3f} with the served nprobe"


def test_what_the_index_cannot_answer_goes_to_the_exact_path(monkeypatch):
    rng = np.random.default_rng(4)
    x = gaussian(2000, rng)
    ranker = gallery(x, rng, IndexConfig(dim=DIM, kind="ivf", nlist=40, nprobe=1))
    q = gaussian(1, rng)[0]
    assert ranker.top(q, 5)[2]
    positions, _, by_index = ranker.top(q, 1500)                      # more than one cell holds
    assert not by_index and np.array_equal(positions, stable_top(x, q, 1500))
    zero = np.zeros(DIM, np.float32)                                  # not a unit vector: all scores 0
    positions, scores, by_index = ranker.top(zero, 7)
    assert not by_index and positions.tolist() == list(range(7)) and not scores.any()
    monkeypatch.setattr(index_module, "APPROX_MAX_DEPTH", 4)
    ranker.index.set_search_parameters(nprobe=40)
    positions, _, by_index = ranker.top(q, 5)                         # deeper than the index answers
    assert not by_index and np.array_equal(positions, stable_top(x, q, 5))
    same = np.repeat(x[:1], 300, axis=0)                              # a tie past every depth it may ask
    ranker = gallery(same, rng, IndexConfig(dim=DIM, kind="ivf", nlist=4, nprobe=4))
    positions, _, by_index = ranker.top(x[0], 3)
    assert not by_index and positions.tolist() == [0, 1, 2]
    monkeypatch.setattr(index_module, "APPROX_MAX_DEPTH", 400)
    assert ranker.top(x[0], 3)[0].tolist() == [0, 1, 2] and ranker.top(x[0], 3)[2]


def test_bad_galleries_and_queries_are_refused():
    rng = np.random.default_rng(5)
    x = gaussian(50, rng)
    index = TrajectoryIndex.build(x, np.arange(50) + 1, np.zeros(50, int), IndexConfig(dim=DIM))
    with pytest.raises(ValueError, match="shape"):
        GalleryRanker(x[:49], index)
    with pytest.raises(ValueError, match="ascending"):
        GalleryRanker(x, TrajectoryIndex.build(x, np.arange(50)[::-1] + 1, np.zeros(50, int), IndexConfig(dim=DIM)))
    ranker = GalleryRanker(x, index)
    for depth in (0, -1, 2.0, None):
        with pytest.raises(ValueError, match="depth"):
            ranker.top(x[0], depth)
    with pytest.raises(ValueError, match="query"):
        ranker.top(x[:2], 3)
