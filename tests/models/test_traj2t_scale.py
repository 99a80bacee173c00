"""Traj2T ranks every query for a trajectory, so the scores it reads must be on one scale for all
queries (DESIGN 4.3): a pipeline's final scores are normalised per query (CombSUM, dual-view's
union), and its ``comparable`` scores are what Traj2T must rank instead."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from models.retrievers.pipeline import Gallery, comparable_scores, run_pipeline
from models.retrievers.rerank import minmax_rows
from models.training.metrics import evaluate_traj2t, protocol_rows

# Two queries, three trajectories (one video each); the gallery's unit vectors are the first three
# axes, so a query's cosines are the first three entries of its unit embedding. Query "a" scores
# high everywhere (0.60 / 0.50 / 0.45), query "b" low (0.30 / 0.20 / 0.05). Only trajectory 1 has a
# relevant query, "a": on the raw cosines "a" beats "b" for it (0.50 > 0.20), while min-max per
# query puts "a" at (0.50 - 0.45) / 0.15 = 1/3 and "b" at (0.20 - 0.05) / 0.25 = 3/5, above it.
COSINES = {"a": [0.60, 0.50, 0.45], "b": [0.30, 0.20, 0.05]}
RELATION = np.array([[0, 1, 0],
                     [0, 0, 0]])
TRACK_VIDEO = np.array([1, 2, 3])
QUERY_VIDEO = np.array([2, 1])


class AxisModel:
    """A retriever whose text embedding of ``"a"`` / ``"b"`` has the given cosines with the three
    axes, the fourth entry making it a unit vector."""

    def encode_texts(self, texts):
        rows = []
        for t in texts:
            head = np.asarray(COSINES[t])
            rows.append([*head, np.sqrt(1.0 - (head ** 2).sum())])
        return torch.tensor(rows, dtype=torch.float32)


def _galleries(n: int) -> list[Gallery]:
    vectors = np.eye(3, 4, dtype=np.float32)                                     # [T, d]
    return [Gallery(AxisModel(), vectors) for _ in range(n)]


def test_traj2t_ranks_the_fused_scores_on_one_scale_not_the_per_query_ones():
    pipeline = {"retrievers": ["dense"], "fuse_runs": [7], "fusion": "combsum"}
    result = run_pipeline(pipeline, _galleries(2), None, ["a", "b"])
    # the final scores are CombSUM's, min-max normalised per query: fine for each query's own gallery
    assert np.allclose(result.scores, 2 * minmax_rows(np.array([COSINES["a"], COSINES["b"]])), atol=1e-6)
    # the comparable scores keep one scale: "a" stays above "b" in every column
    assert (result.comparable[0] > result.comparable[1]).all()
    raw = evaluate_traj2t(result.comparable, RELATION, TRACK_VIDEO, QUERY_VIDEO)
    assert raw["n_queries"] == 1 and raw["R@1"] == 100.0
    # the same protocol over the per-query-normalised scores ranks "b" first: what Traj2T must not read
    per_query = evaluate_traj2t(result.scores, RELATION, TRACK_VIDEO, QUERY_VIDEO)
    assert per_query["R@1"] == 0.0


def test_protocol_rows_rank_traj2t_on_the_comparable_scores_and_the_rest_per_query():
    result = run_pipeline({"retrievers": ["dense"], "fuse_runs": [7], "fusion": "combsum"}, _galleries(2), None,
                          ["a", "b"])
    rows = protocol_rows(result.scores, RELATION, TRACK_VIDEO, QUERY_VIDEO, traj2t_sim=result.comparable)
    assert rows["traj2t"]["row"] == [1] and rows["traj2t"]["R@1"] == [1.0]
    assert protocol_rows(result.scores, RELATION, TRACK_VIDEO, QUERY_VIDEO)["traj2t"]["R@1"] == [0.0]
    # T2Traj ranks each query's row, where the per-query scale changes nothing
    assert rows["t2traj"] == protocol_rows(result.comparable, RELATION, TRACK_VIDEO, QUERY_VIDEO)["t2traj"]
    with pytest.raises(ValueError, match="traj2t_sim must have the shape"):
        protocol_rows(result.scores, RELATION, TRACK_VIDEO, QUERY_VIDEO, traj2t_sim=result.comparable[:, :2])


def test_comparable_scores_of_each_fusion():
    a = np.array([[0.6, 0.5], [0.3, 0.2]])
    b = np.array([[0.2, 0.4], [0.1, 0.0]])
    assert np.array_equal(comparable_scores("none", [a]), a)
    assert np.allclose(comparable_scores("dual_view", [a, b]), (a + b) / 2)
    # CombSUM over the whole matrix: one affine map per list, the same for both queries
    expected = (a - 0.2) / 0.4 + (b - 0.0) / 0.4
    assert np.allclose(comparable_scores("combsum", [a, b]), expected)
    with pytest.raises(ValueError, match="unknown fusion"):
        comparable_scores("max", [a])


def test_plain_dense_pipeline_hands_traj2t_the_raw_cosines():
    result = run_pipeline(None, _galleries(1), None, ["a", "b"])
    assert np.allclose(result.comparable, [COSINES["a"], COSINES["b"]], atol=1e-6)
    assert np.array_equal(result.comparable, result.scores)
