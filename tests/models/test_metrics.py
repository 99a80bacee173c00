"""Retrieval metrics against scikit-learn and a per-query loop, and the benchmark protocols of
DESIGN 4.3 on hand-built galleries."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from models.training.metrics import (
    evaluate_ocvr,
    evaluate_rankings,
    evaluate_t2traj,
    evaluate_traj2t,
    map_at_10,
    video_scores_and_relevance,
)


def loop_rankings(scores: np.ndarray, relevance: np.ndarray) -> dict:
    """The contract of DESIGN 5 query by query: drop -1, sort by (-score, index), AP from
    scikit-learn on the resulting order, R@k and mAP@10 from the literal definitions."""
    per = {"R@1": [], "R@3": [], "R@5": [], "R@10": [], "mAP": [], "mAP@10": []}
    for s, r in zip(scores.tolist(), relevance.tolist()):
        kept = [i for i in range(len(s)) if r[i] != -1]
        ranked = sorted(kept, key=lambda i: (-s[i], i))
        rel = [r[i] == 1 for i in ranked]
        n_rel = sum(rel)
        if n_rel == 0:
            continue
        for k in (1, 3, 5, 10):
            per[f"R@{k}"].append(float(any(rel[:k])))
        # strictly decreasing stand-in scores carry the tie-broken order into scikit-learn
        per["mAP"].append(average_precision_score(rel, -np.arange(len(rel))) if len(rel) > 1 else 1.0)
        at10 = sum(sum(rel[:k]) / k for k in range(1, min(10, len(rel)) + 1) if rel[k - 1])
        per["mAP@10"].append(at10 / min(n_rel, 10))
    out = {k: 100 * float(np.mean(v)) if v else math.nan for k, v in per.items()}
    out["n_queries"] = len(per["mAP"])
    return out


def same(a: dict, b: dict) -> bool:
    for key in a:
        x, y = a[key], b[key]
        if isinstance(x, float) and math.isnan(x):
            if not math.isnan(y):
                return False
        elif x != pytest.approx(y, rel=1e-12, abs=1e-12):
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), n_queries=st.integers(0, 7), n_items=st.integers(0, 25),
       levels=st.sampled_from([2, 4, 1000]), p_unknown=st.sampled_from([0.0, 0.3, 0.8]),
       p_rel=st.sampled_from([0.05, 0.3, 0.7]))
def test_evaluate_rankings_equals_per_query_loop_and_sklearn(seed, n_queries, n_items, levels, p_unknown, p_rel):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, levels, (n_queries, n_items)) / levels      # few levels: many ties
    relevance = np.where(rng.random((n_queries, n_items)) < p_rel, 1, 0)
    relevance[rng.random((n_queries, n_items)) < p_unknown] = -1
    fast = evaluate_rankings(scores, relevance)
    slow = loop_rankings(scores, relevance)
    assert fast.keys() == slow.keys()
    assert same(fast, slow), (fast, slow)


def test_ties_go_to_the_lower_index_and_unknown_items_are_removed():
    scores = np.array([[0.5, 0.5, 0.9, 0.5, 0.1]])
    # the 0.9 item is unknown (removed); among the tied 0.5 items index 0 comes first
    relevance = np.array([[0, 1, -1, 0, 1]])
    out = evaluate_rankings(scores, relevance)
    # ranked: 0 (0), 1 (1), 3 (0), 4 (1) -> relevant at ranks 2 and 4
    assert out["R@1"] == 0.0 and out["R@3"] == 100.0
    assert out["mAP"] == pytest.approx(100 * (1 / 2 + 2 / 4) / 2)
    assert out["mAP@10"] == pytest.approx(100 * (1 / 2 + 2 / 4) / 2)
    assert out["n_queries"] == 1


def test_map_at_10_is_reciprocal_rank_within_ten():
    scores = -np.arange(15, dtype=float)[None, :].repeat(3, axis=0)          # rank = index + 1
    relevance = np.zeros((3, 15), int)
    relevance[0, 0] = relevance[1, 3] = relevance[2, 12] = 1
    assert map_at_10(scores, relevance) == pytest.approx(100 * (1 + 1 / 4 + 0) / 3)


def test_queries_without_relevant_items_are_skipped_and_torch_is_accepted():
    scores = torch.tensor([[0.2, 0.8], [0.3, 0.1], [0.9, 0.1]])
    relevance = torch.tensor([[1, 0], [0, -1], [-1, -1]])
    out = evaluate_rankings(scores, relevance)
    assert out["n_queries"] == 1 and out["R@1"] == 0.0 and out["R@3"] == 100.0
    empty = evaluate_rankings(np.zeros((2, 3)), np.zeros((2, 3), int))
    assert empty["n_queries"] == 0 and math.isnan(empty["mAP"])


@pytest.mark.parametrize("scores, relevance, message", [
    (np.zeros(3), np.zeros(3, int), "2-D"),
    (np.zeros((2, 3)), np.zeros((2, 4), int), "shape"),
    (np.array([[np.nan, 1.0]]), np.array([[1, 0]]), "NaN"),
    (np.zeros((1, 2)), np.array([[2, 0]]), "outside"),
    (np.zeros((1, 2)), np.array([[0.5, 1.0]]), "outside"),
    (np.zeros((1, 2)), np.array([[True, False]]), "integers"),
])
def test_bad_inputs_are_rejected(scores, relevance, message):
    with pytest.raises(ValueError, match=message):
        evaluate_rankings(scores, relevance)


# -- protocols ------------------------------------------------------------------------------------
def gallery(seed: int = 0):
    """Videos 10, 20, 30 with pools of 2, 4 and 12 tracks (tracks interleaved in the columns);
    two queries per video, a binary row in the own pool, mostly ⊥ elsewhere."""
    rng = np.random.default_rng(seed)
    track_video = np.array([10] * 2 + [20] * 4 + [30] * 12)
    track_video = track_video[rng.permutation(track_video.size)]
    query_video = np.array([10, 10, 20, 20, 30, 30])
    sim = rng.normal(size=(6, track_video.size))
    relation = np.where(rng.random(sim.shape) < 0.8, -1, 0)
    for e, vid in enumerate(query_video):
        pool = np.flatnonzero(track_video == vid)
        relation[e, pool] = 0
        relation[e, rng.choice(pool)] = 1
    return sim, relation, track_video, query_video


def test_t2traj_ranks_each_query_within_its_own_pool():
    sim, relation, track_video, query_video = gallery()
    out = evaluate_t2traj(sim, relation, track_video, query_video)
    # brute force: one evaluate_rankings call per query on the columns of its pool
    per, sizes = [], []
    for e, vid in enumerate(query_video):
        pool = np.flatnonzero(track_video == vid)
        per.append(loop_rankings(sim[e:e + 1, pool], relation[e:e + 1, pool]))
        sizes.append(pool.size)
    for key in ("R@1", "R@3", "mAP"):
        assert out[key] == pytest.approx(np.mean([p[key] for p in per]), rel=1e-12), key
    assert out["n_queries"] == 6
    assert out["random_R@1"] == pytest.approx(100 * np.mean([1 / n for n in sizes]))
    assert set(out["strata"]) == {"2", "3-5", "6-10", ">10"}
    assert out["strata"]["2"]["n_queries"] == 2 and out["strata"]["6-10"]["n_queries"] == 0
    assert out["strata"][">10"]["mAP"] == pytest.approx(np.mean([per[4]["mAP"], per[5]["mAP"]]))


def test_t2traj_rejects_a_query_of_an_unknown_video():
    sim, relation, track_video, query_video = gallery()
    query_video = query_video.copy()
    query_video[0] = 99
    with pytest.raises(ValueError, match="without trajectories"):
        evaluate_t2traj(sim, relation, track_video, query_video)


def test_traj2t_ranks_queries_for_each_trajectory():
    sim, relation, track_video, query_video = gallery(1)
    out = evaluate_traj2t(sim, relation, track_video, query_video)
    expected = loop_rankings(sim.T, relation.T)
    assert same({k: out[k] for k in expected}, expected)
    n_rel_tracks = int(((relation == 1).any(axis=0)).sum())
    assert out["n_queries"] == n_rel_tracks
    assert sum(v["n_queries"] for v in out["strata"].values()) == n_rel_tracks


def test_ocvr_video_relevance_rule_and_max_pooling():
    # two queries; video 1 has tracks 0, 1; video 2 tracks 2, 3; video 3 track 4
    sim = np.array([[0.1, 0.7, 0.9, 0.2, 0.3],
                    [0.5, 0.4, 0.3, 0.8, 0.6]])
    relation = np.array([[1, 0, 0, 0, -1],      # video 1 relevant, video 2 irrelevant, video 3 unknown
                         [0, -1, 0, 1, 0]])     # video 1 unknown (a ⊥ and no 1), 2 relevant, 3 irrelevant
    track_video = np.array([1, 1, 2, 2, 3])
    videos, best, rel = video_scores_and_relevance(sim, relation, track_video)
    assert videos.tolist() == [1, 2, 3]
    assert np.allclose(best, [[0.7, 0.9, 0.3], [0.5, 0.8, 0.6]])
    assert rel.tolist() == [[1, 0, -1], [-1, 1, 0]]
    out = evaluate_ocvr(sim, relation, track_video, np.array([1, 2]))
    # query 0: video 2 (0.9, irrelevant) above video 1 (0.7) -> rank 2; query 1: rank 1
    assert out["R@1"] == 50.0 and out["mAP"] == pytest.approx(75.0)
    assert out["n_videos"] == 3 and out["strata"]["2"]["n_queries"] == 2


def test_ocvr_on_a_larger_gallery_equals_a_per_video_loop():
    sim, relation, track_video, query_video = gallery(2)
    out = evaluate_ocvr(sim, relation, track_video, query_video)
    vids = sorted(set(track_video.tolist()))
    best = np.array([[sim[e, track_video == v].max() for v in vids] for e in range(6)])
    rel = np.array([[1 if (relation[e, track_video == v] == 1).any()
                     else 0 if (relation[e, track_video == v] == 0).all() else -1
                     for v in vids] for e in range(6)])
    expected = loop_rankings(best, rel)
    assert same({k: out[k] for k in expected}, expected)
