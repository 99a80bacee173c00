"""Reciprocal rank fusion beside CombSUM (SCOUT 7.1, 7.3): the function against a hand-computed
example and a scipy-ranked reference, bad ``k`` refused, the pipeline's ``"rrf"`` fusion, and the
``rrf`` variant of the ``scout-rerank`` preset."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import rankdata

from models.experiments.grid import spec_from_request
from models.retrievers.pipeline import Gallery, RetrievalPipeline, comparable_scores, run_pipeline
from models.retrievers.rerank import combsum, rrf

# one query, four items; list B ties items 1 and 2 (the lower index ranks first)
A = np.array([[0.9, 0.5, 0.7, 0.1]])          # ranks 1, 3, 2, 4
B = np.array([[0.2, 0.8, 0.8, 0.4]])          # ranks 4, 1, 2, 3


def test_rrf_by_hand():
    got = rrf([A, B])                                                   # k = 60
    expected = [[1 / 61 + 1 / 64, 1 / 63 + 1 / 61, 1 / 62 + 1 / 62, 1 / 64 + 1 / 63]]
    assert np.allclose(got, expected, rtol=0, atol=1e-15)
    assert np.argsort(-got[0], kind="stable").tolist() == [1, 2, 0, 3]
    # CombSUM reads the magnitudes and puts item 2 first (1.75 against 1.5)
    assert np.allclose(combsum([A, B]), [[1.0, 1.5, 1.75, 1 / 3]])
    assert np.argsort(-combsum([A, B])[0], kind="stable").tolist() == [2, 1, 0, 3]
    assert np.allclose(rrf([A, B], k=1), [[1 / 2 + 1 / 5, 1 / 4 + 1 / 2, 1 / 3 + 1 / 3, 1 / 5 + 1 / 4]])
    assert np.allclose(rrf(np.stack([A, B]), k=2.5), rrf([A, B], k=2.5))      # a stacked [L, Q, N] array
    assert np.allclose(rrf([torch.from_numpy(A), B]), got)                     # tensors are read too


def test_rrf_against_scipy_ranks():
    rng = np.random.default_rng(7)
    lists = [np.round(rng.normal(size=(5, 30)), 1) for _ in range(3)]       # rounded: many ties
    expected = np.zeros((5, 30))
    for s in lists:
        for q in range(5):
            expected[q] += 1.0 / (60 + rankdata(-s[q], method="ordinal"))   # ordinal: ties by position
    assert np.allclose(rrf(lists), expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("k", [0, -1, -0.5, float("nan"), float("inf"), True, "60"])
def test_rrf_refuses_a_k_that_is_not_a_positive_number(k):
    with pytest.raises(ValueError, match="k > 0"):
        rrf([A, B], k=k)


def test_rrf_refuses_bad_lists():
    with pytest.raises(ValueError, match="rrf needs at least one score list"):
        rrf([])
    with pytest.raises(ValueError, match="expected"):
        rrf([A, B[:, :3]])
    with pytest.raises(ValueError, match="NaN"):
        rrf([A, np.array([[0.0, np.nan, 1.0, 2.0]])])


# -- the pipeline's "rrf" fusion -------------------------------------------------------------------
class _FixedTexts:
    """A retriever whose text path gives one fixed unit vector per text."""

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.vectors = vectors

    def encode_texts(self, texts):
        return torch.from_numpy(np.stack([self.vectors[t] for t in texts]))


def test_the_pipeline_fuses_with_rrf_and_refuses_a_bad_k():
    rng = np.random.default_rng(3)
    texts = ["a person walking left", "someone in red", "a cyclist"]
    unit = lambda x: (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)   # noqa: E731
    galleries = [Gallery(_FixedTexts({t: unit(rng.normal(size=8)) for t in texts}), unit(rng.normal(size=(12, 8))))
                 for _ in range(2)]
    lists = [np.stack([g.vectors @ g.model.vectors[t] for t in texts]) for g in galleries]     # [E, T] each
    p = {"fuse_runs": [5], "fusion": "rrf", "rrf_k": 10, "shortlist": 4}
    result = run_pipeline(p, galleries, None, texts)
    assert np.allclose(result.scores, rrf(lists, k=10))
    assert np.array_equal(result.shortlists, np.argsort(-rrf(lists, k=10), axis=1, kind="stable")[:, :4])
    default = run_pipeline({**p, "rrf_k": 60}, galleries, None, texts)
    assert np.allclose(default.scores, rrf(lists))
    # the scale Traj2T ranks queries on: each list's ranks of the queries for a trajectory
    comparable = comparable_scores("rrf", lists, 10)
    assert np.allclose(comparable, rrf([s.T for s in lists], k=10).T)
    for k in (0, -3, float("nan")):
        with pytest.raises(ValueError, match="rrf_k must be a finite number > 0"):
            RetrievalPipeline.from_dict({**p, "rrf_k": k})
    with pytest.raises(ValueError, match="rrf fuses at least two"):
        RetrievalPipeline.from_dict({"fusion": "rrf"})


def test_rrf_k_is_recorded_only_where_rrf_reads_it():
    combsum_pipeline = RetrievalPipeline.from_dict({"fuse_runs": [5], "fusion": "combsum"})
    assert "rrf_k" not in combsum_pipeline.as_dict()                   # records and hashes as before
    rrf_pipeline = RetrievalPipeline.from_dict({"fuse_runs": [5], "fusion": "rrf", "rrf_k": 20})
    assert rrf_pipeline.as_dict()["rrf_k"] == 20
    assert RetrievalPipeline.from_dict(rrf_pipeline.as_dict()) == rrf_pipeline
    assert rrf_pipeline.sha256() != RetrievalPipeline.from_dict({**rrf_pipeline.as_dict(), "rrf_k": 60}).sha256()


def test_the_scout_rerank_preset_has_an_rrf_control_beside_combsum():
    fused = spec_from_request({"preset": "scout-rerank", "fuse_runs": [7, 9]})
    pipelines = {v: p for v, _, _, p in fused.cells()}
    assert pipelines["rrf"] == {"shortlist": 20, "fusion": "rrf", "rrf_k": 60, "fuse_runs": [7, 9]}
    assert pipelines["combsum"] == {"shortlist": 20, "fusion": "combsum", "fuse_runs": [7, 9]}
    assert RetrievalPipeline.from_dict(pipelines["rrf"]).fusion == "rrf"
    alone = spec_from_request({"preset": "scout-rerank"})
    assert "rrf" not in alone.variants and "combsum" not in alone.variants   # nothing to fuse
