"""The trajectory index: exact search equals brute-force NumPy, the approximate kinds reach a
recall floor on clustered data, video-level search equals a per-video maximum, files round-trip,
and bad input is refused."""
from __future__ import annotations

import json
from dataclasses import asdict

import numpy as np
import pytest
import torch

from models.training.index import FORMAT_INLINE, IndexConfig, TrajectoryIndex, faiss_path

faiss = pytest.importorskip("faiss")
faiss.omp_set_num_threads(1)
DIM = 32


def unit_rows(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def clustered(n: int, seed: int, n_videos: int = 0, spread: float = 0.35):
    """Unit embeddings around random cluster centres (tracks of one video near each other), their
    ids (not 0..n-1, to catch id mix-ups) and video ids."""
    rng = np.random.default_rng(seed)
    n_videos = n_videos or max(1, n // 8)
    videos = rng.integers(0, n_videos, n)
    centres = rng.normal(size=(n_videos, DIM))
    x = unit_rows(centres[videos] + spread * rng.normal(size=(n, DIM)))
    ids = rng.permutation(10 * n)[:n].astype(np.int64) + 1000
    return x, ids, videos.astype(np.int64) + 500


def brute_force(x: np.ndarray, ids: np.ndarray, q: np.ndarray, k: int):
    s = q.astype(np.float64) @ x.T.astype(np.float64)
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), ids[order]


def test_exact_search_equals_brute_force():
    x, ids, videos = clustered(2000, 0)
    index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM))
    q = unit_rows(np.random.default_rng(1).normal(size=(25, DIM)))
    scores, got = index.search(q, 10)
    want_scores, want_ids = brute_force(x, ids, q, 10)
    assert np.array_equal(got, want_ids)
    assert np.allclose(scores, want_scores, atol=1e-5)
    assert len(index) == 2000


def test_adding_in_batches_and_torch_input():
    x, ids, videos = clustered(600, 2)
    index = TrajectoryIndex.build(x[:200], ids[:200], videos[:200], IndexConfig(dim=DIM))
    index.add(torch.from_numpy(x[200:]), torch.from_numpy(ids[200:]), videos[200:])
    q = x[[5, 300, 599]]
    _, got = index.search(q, 1)
    assert got[:, 0].tolist() == ids[[5, 300, 599]].tolist()
    assert index.video_of(got).ravel().tolist() == videos[[5, 300, 599]].tolist()
    assert index.video_of(np.array([-1, 7])).tolist() == [-1, -1]


@pytest.mark.parametrize("config, floor", [
    (IndexConfig(dim=DIM, kind="ivf", nprobe=32), 0.97),
    (IndexConfig(dim=DIM, kind="hnsw", hnsw_m=16, ef_search=64), 0.95),
])
def test_approximate_kinds_reach_a_recall_floor(config, floor):
    x, ids, videos = clustered(5000, 3, n_videos=200)
    index = TrajectoryIndex.build(x, ids, videos, config)
    rng = np.random.default_rng(4)
    q = unit_rows(x[rng.integers(0, 5000, 100)] + 0.3 * rng.normal(size=(100, DIM)))
    _, got = index.search(q, 10)
    _, want = brute_force(x, ids, q, 10)
    recall = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(got.tolist(), want.tolist())])
    assert recall >= floor, f"recall@10 {recall:.3f} below {floor}"
    # a narrower search finds fewer neighbours: the parameter is really used
    index.set_search_parameters(nprobe=1, ef_search=10)
    _, few = index.search(q, 10)
    low = np.mean([len(set(g) & set(w)) / 10 for g, w in zip(few.tolist(), want.tolist())])
    assert low < recall
    with pytest.raises(ValueError, match="nprobe"):
        index.set_search_parameters(nprobe=0)


def test_video_search_is_the_best_track_per_video():
    x, ids, videos = clustered(800, 5, n_videos=60)
    index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM))
    q = unit_rows(np.random.default_rng(6).normal(size=(12, DIM)))
    scores, got = index.search_videos(q, 15)
    s = q.astype(np.float64) @ x.T.astype(np.float64)
    for row in range(12):
        best = {v: s[row, videos == v].max() for v in np.unique(videos)}
        ranked = sorted(best, key=lambda v: -best[v])[:15]
        assert got[row].tolist() == ranked
        assert np.allclose(scores[row], [best[v] for v in ranked], atol=1e-5)


def test_video_search_with_fewer_videos_than_k_pads():
    x, ids, videos = clustered(40, 7, n_videos=3)
    index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM))
    scores, got = index.search_videos(x[:2], 5)
    assert (got[:, :3] >= 0).all() and (got[:, 3:] == -1).all()
    assert np.isneginf(scores[:, 3:]).all()
    assert sorted(got[0, :3].tolist()) == sorted(set(videos.tolist()))


@pytest.mark.parametrize("kind", ["exact", "ivf", "hnsw"])
def test_save_and_load_round_trip(tmp_path, kind):
    x, ids, videos = clustered(1500, 8)
    config = IndexConfig(dim=DIM, kind=kind, nprobe=4, ef_search=40)
    index = TrajectoryIndex.build(x, ids, videos, config)
    path = index.save(tmp_path / "sub" / "tracks.npz")
    assert sorted(p.name for p in path.parent.iterdir()) == ["tracks.faiss", "tracks.npz"]  # no temporary left
    assert faiss_path(path) == path.with_name("tracks.faiss")
    mapped, copied = TrajectoryIndex.load(path), TrajectoryIndex.load(path, mmap=False)
    q = x[:20]
    for again in (mapped, copied):
        assert again.config == config and np.array_equal(again.ids, ids) and np.array_equal(again.videos, videos)
        for a, b in zip(index.search(q, 7), again.search(q, 7)):
            assert np.array_equal(a, b)
        assert np.array_equal(index.search_videos(q, 5)[1], again.search_videos(q, 5)[1])
    if kind == "ivf":
        assert faiss.extract_index_ivf(mapped._index).nprobe == 4
    with pytest.raises(ValueError, match="read-only"):           # the mapped file is never written
        mapped.add(unit_rows(np.ones((1, DIM))), [1], [2])
    copied.add(unit_rows(np.ones((1, DIM))), [1], [2])
    assert len(copied) == 1501 and len(mapped) == 1500


def test_an_index_saved_in_the_first_format_still_loads(tmp_path):
    x, ids, videos = clustered(300, 10)
    index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM))
    path = tmp_path / "old.npz"
    np.savez(path, format=np.array(FORMAT_INLINE), config=np.array(json.dumps(asdict(index.config))),
             index=faiss.serialize_index(index._index), ids=ids, videos=videos)
    again = TrajectoryIndex.load(path)
    assert np.array_equal(again.search(x[:5], 4)[1], index.search(x[:5], 4)[1])
    again.add(unit_rows(np.ones((1, DIM))), [1], [2])                 # held in memory: it grows
    index.save(tmp_path / "new.npz")
    faiss_path(tmp_path / "new.npz").unlink()
    with pytest.raises(ValueError, match="missing"):
        TrajectoryIndex.load(tmp_path / "new.npz")


def test_bad_input_is_refused(tmp_path):
    x, ids, videos = clustered(100, 9)
    index = TrajectoryIndex.build(x, ids, videos, IndexConfig(dim=DIM))
    bad = x[:2].copy()
    bad[0, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        index.add(bad, [1, 2], [1, 1])
    with pytest.raises(ValueError, match="NaN"):
        index.search(bad, 3)
    with pytest.raises(ValueError, match="width"):
        index.search(np.ones((1, DIM + 1)) / np.sqrt(DIM + 1), 3)
    with pytest.raises(ValueError, match="unit"):
        index.add(x[:2] * 2, [1, 2], [1, 1])
    with pytest.raises(ValueError, match="already"):
        index.add(x[:1], ids[:1], videos[:1])
    with pytest.raises(ValueError, match="duplicates"):
        index.add(x[:2], [5, 5], [1, 1])
    with pytest.raises(ValueError, match="integers"):
        index.add(x[:2], [5, 6], [1, 1, 1])
    with pytest.raises(ValueError, match="positive"):
        index.search(x[:1], 0)
    with pytest.raises(ValueError, match="kind"):
        IndexConfig(kind="pq")
    assert len(index) == 100                                  # nothing half-added
    (tmp_path / "other.npz").write_bytes(b"not an index")
    with pytest.raises(ValueError):
        TrajectoryIndex.load(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="build"):
        TrajectoryIndex(IndexConfig(dim=DIM)).add(x[:1], [1], [1])
