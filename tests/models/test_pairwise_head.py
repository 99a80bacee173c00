"""ActPair's trained Bradley–Terry pairwise head (the CPU comparator of Table 5), its pointwise
twin, the pipeline stages that use them and the Table 5 preset's refusal of pointwise comparators."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from models.experiments.grid import spec_from_request
from models.retrievers.actpair.pairwise_head import (
    PairwiseHead,
    PairwiseHeadConfig,
    bradley_terry_loss,
    pair_accuracy,
    preference_pairs,
    train_pairwise_head,
)
from models.retrievers.comparators import (
    ChatPairJudge,
    ChatPointJudge,
    PairwiseHeadComparator,
    ScorerComparator,
    head_point_scores,
    parse_point,
)
from models.retrievers.pipeline import Gallery, run_pipeline
from models.retrievers.rerank import pivot_promote

D = 8


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def synthetic(n_queries: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Queries, items (one positive near its query, six random negatives per query) and their
    verified relevance matrix."""
    rng = np.random.default_rng(seed)
    q = _unit(rng.normal(size=(n_queries, D)))
    positives = _unit(q + 0.35 * rng.normal(size=q.shape))
    negatives = _unit(rng.normal(size=(n_queries * 6, D)))
    items = np.concatenate([positives, negatives])
    relevance = np.full((n_queries, len(items)), -1)
    for i in range(n_queries):
        relevance[i, i] = 1
        relevance[i, n_queries + 6 * i: n_queries + 6 * (i + 1)] = 0
    return torch.tensor(q, dtype=torch.float32), torch.tensor(items, dtype=torch.float32), relevance


CONFIG = PairwiseHeadConfig(enabled=True, hidden=32, n_negatives=6, steps=300, batch_size=64, lr=3e-3)


def test_the_bradley_terry_loss_on_a_hand_computed_example():
    # -log σ(0) = log 2; -log σ(log 3) = log(1 + 1/3) = log(4/3); the mean is log(8/3) / 2
    loss = bradley_terry_loss(torch.tensor([0.0, math.log(3.0)]))
    assert float(loss) == pytest.approx(math.log(8.0 / 3.0) / 2, abs=1e-6)
    assert float(bradley_terry_loss(torch.tensor([-2.0]))) == pytest.approx(math.log1p(math.exp(2.0)), abs=1e-6)
    with pytest.raises(ValueError, match="non-empty"):
        bradley_terry_loss(torch.zeros(0))


def test_preference_pairs_are_verified_positives_against_the_hardest_verified_negatives():
    scores = np.array([[0.9, 0.1, 0.8, 0.7, 0.95], [0.0, 0.0, 0.0, 0.0, 0.0]])
    relevance = np.array([[1, 0, 0, 0, -1], [-1, -1, 1, -1, -1]])
    pairs = preference_pairs(scores, relevance, n_negatives=2)
    # the unknown item (0.95) is never a negative; the query without a negative gives none
    assert pairs.tolist() == [[0, 0, 2], [0, 0, 3]]


def test_the_trained_head_orders_held_out_pairs_better_than_chance_and_than_untrained():
    torch.manual_seed(0)
    q, items, relevance = synthetic(60, seed=1)
    train_pairs = preference_pairs((q @ items.T).numpy(), relevance, 6)
    held_q, held_items, held_rel = synthetic(30, seed=2)
    held_pairs = preference_pairs((held_q @ held_items.T).numpy(), held_rel, 6)
    head = PairwiseHead(D, CONFIG)
    untrained = pair_accuracy(head, held_q, held_items, held_pairs)
    report = train_pairwise_head(head, q, items, train_pairs, CONFIG, seed=0)
    trained = pair_accuracy(head, held_q, held_items, held_pairs)
    assert report["pairs"] == 360 and report["pairwise_last_loss"] < report["pairwise_first_loss"]
    assert trained > 0.85 and trained > untrained + 0.2, (trained, untrained)
    assert pair_accuracy(head, held_q, held_items, held_pairs, pointwise=True) > 0.85
    # antisymmetric by construction: P(a ≻ b) = 1 - P(b ≻ a)
    a, b = held_items[:5], held_items[5:10]
    head.eval()
    with torch.no_grad():
        assert torch.allclose(head.pair_logits(held_q[:5], a, b), -head.pair_logits(held_q[:5], b, a), atol=1e-6)


def test_pivot_promote_over_the_head_is_not_a_sort_by_pointwise_scores():
    """A comparator derived from per-candidate scores makes pivot-promote put their best first; the
    head's decisions read both candidates, can be intransitive, and give another order."""
    torch.manual_seed(0)
    q, items, relevance = synthetic(60, seed=1)
    head = PairwiseHead(D, CONFIG)
    train_pairwise_head(head, q, items, preference_pairs((q @ items.T).numpy(), relevance, 6), CONFIG, seed=0)
    rng = np.random.default_rng(3)
    found_cycle = found_order = False
    for _ in range(200):
        query = _unit(rng.normal(size=D))
        vectors = _unit(query + 1.2 * rng.normal(size=(6, D))).astype(np.float32)
        ids = list(range(6))
        compare = PairwiseHeadComparator(head, query, dict(zip(ids, vectors, strict=True)))
        prefers = {(a, b): compare(a, b) == "a" for a, b in itertools.permutations(ids, 2)}
        found_cycle |= any(prefers[x, y] and prefers[y, z] and prefers[z, x]
                           for x, y, z in itertools.permutations(ids, 3))
        reranked, _ = pivot_promote(ids, PairwiseHeadComparator(head, query, dict(zip(ids, vectors, strict=True))))
        point = head_point_scores(head, query, vectors)
        cosine = vectors @ query
        by_point = sorted(ids, key=lambda t: -point[t])
        by_cosine = sorted(ids, key=lambda t: -cosine[t])
        found_order |= reranked != by_point and reranked != by_cosine
        if found_cycle and found_order:
            break
    # an intransitive triple: no per-candidate score reproduces these decisions
    assert found_cycle and found_order
    # the scorer comparator, by contrast, puts the best pointwise value first: R@1 as the pointwise sort's
    class Scorer:
        def score(self, request):
            return request

    for seed in range(20):
        values = dict(enumerate(np.random.default_rng(seed).random(6).tolist()))
        comparator = ScorerComparator(Scorer(), {})
        comparator._value = values
        assert pivot_promote(list(values), comparator)[0][0] == max(values, key=values.get)


def test_the_vlm_pointwise_baseline_asks_one_question_per_candidate():
    asked = []

    class Chat:
        def images(self, request):
            return [[{"type": "text", "text": f"crops of {request}"}]]

        def generate(self, messages, *, max_new_tokens):
            asked.append(messages[1]["content"])
            return {1: "80", 2: "Score: 35.", 3: "high"}[len(asked)]

    judge = ChatPointJudge(ChatPairJudge(Chat(), {7: 7, 8: 8, 9: 9}))
    values = judge.scores("a man in red walks left", [7, 8, 9])
    assert values.tolist() == [80.0, 35.0, 50.0] and judge.calls == 3 and judge.invalid == 1
    assert all("the primary action" in c[-1]["text"] and "walks left" in c[-1]["text"] for c in asked)
    assert parse_point("120") is None and parse_point("7 or 8") is None


class _HeadModel:
    """A model with the dual encoder's text path and a trained pairwise head (what the pipeline reads)."""

    def __init__(self, head, queries: dict[str, np.ndarray]):
        self.head, self.queries = head, queries

    def encode_texts(self, texts):
        return torch.tensor(np.stack([self.queries[t] for t in texts]), dtype=torch.float32)

    def trained_pairwise_head(self):
        return self.head


class _NoHead:
    """A dual encoder trained without the pairwise head."""

    def __init__(self, queries: dict[str, np.ndarray]):
        self.queries = queries

    def encode_texts(self, texts):
        return torch.tensor(np.stack([self.queries[t] for t in texts]), dtype=torch.float32)


class _Track:
    def __init__(self, tid):
        self.id = tid


class _View:
    def __init__(self, n):
        self.tracks = [_Track(100 + i) for i in range(n)]


def test_the_pipeline_counts_one_request_per_candidate_pointwise_and_one_per_comparison_pairwise():
    torch.manual_seed(0)
    head = PairwiseHead(D, CONFIG)
    rng = np.random.default_rng(0)
    texts = {"first": _unit(rng.normal(size=D)), "second": _unit(rng.normal(size=D))}
    vectors = _unit(rng.normal(size=(12, D))).astype(np.float32)
    gallery = Gallery(_HeadModel(head, texts), vectors)
    base = {"shortlist": 5, "top_k": 5, "comparator": {"kind": "pairwise-head"}}
    point = run_pipeline({**base, "reranker": "pointwise",
                          "weights": {"first_stage": 0.0, "vlm": 0.0, "itm": 0.0, "absolute": 1.0}},
                         [gallery], _View(12), list(texts))
    assert point.report["model_requests"]["per_query"] == [5, 5]
    assert point.report["scorer_requests"]["total"] == point.report["comparator_requests"]["total"] == 0
    # the pointwise order is the twin's scores sorted
    first = point.shortlists[0]
    scores = head_point_scores(head, texts["first"], vectors[first])
    assert list(np.argsort(-scores, kind="stable")) == list(range(5))
    pair = run_pipeline({**base, "reranker": "pairwise"}, [gallery], _View(12), list(texts))
    calls = pair.report["comparator_requests"]["per_query"]
    assert pair.report["model_requests"]["per_query"] == calls and all(4 <= c <= 10 for c in calls)
    with pytest.raises(ValueError, match="pairwise-head comparator needs an ActPair model trained with pairwise"):
        run_pipeline({**base, "reranker": "pairwise"}, [Gallery(_NoHead(texts), vectors)], _View(12), ["first"])
    with pytest.raises(ValueError, match="comparator's own model"):
        run_pipeline({"shortlist": 5, "top_k": 5, "reranker": "pointwise", "weights": {"vlm": 0.0, "absolute": 1.0}},
                     [gallery], _View(12), ["first"])


def test_the_table5_preset_uses_the_pairwise_head_and_refuses_pointwise_comparators():
    spec = spec_from_request({"preset": "actpair-rerank", "seeds": [0]})
    pipelines = {v: p for v, _, _, p in spec.cells()}
    assert spec.reference == "pointwise" and spec.base["model"]["pairwise"]["enabled"] is True
    assert pipelines["pairwise"]["comparator"] == {"kind": "pairwise-head"}
    assert pipelines["pointwise"]["weights"]["absolute"] == 1.0
    for kind in ("scorer", "description"):
        with pytest.raises(ValueError, match=f"'{kind}' comparator, which decides a pair by comparing two pointwise"):
            spec_from_request({"preset": "actpair-rerank", "pipeline": {"comparator": {"kind": kind}}})
    with pytest.raises(ValueError, match="0 by construction"):
        spec_from_request({"preset": "actpair-rerank", "variants": {"pairwise": {"pipeline": {
            "reranker": "pairwise", "comparator": {"kind": "scorer"}}}}})
    # a grid declared without the preset: refused when it also has a pointwise arm
    custom = {"model_kind": "actpair", "reference": "pointwise", "variants": {
        "pointwise": {"pipeline": {"reranker": "pointwise"}},
        "pairwise": {"pipeline": {"reranker": "pairwise", "comparator": {"kind": "scorer"}}}}}
    with pytest.raises(ValueError, match="'scorer' comparator"):
        spec_from_request(custom)
    alone = {"model_kind": "actpair", "reference": "pairwise", "variants": {"pairwise": custom["variants"]["pairwise"]}}
    assert list(spec_from_request(alone).variants) == ["pairwise"]
    vlm = spec_from_request({"preset": "actpair-rerank", "pipeline": {"comparator": {"kind": "vlm",
                                                                                     "backend": "openai"}}})
    assert {p["comparator"]["kind"] for _, _, _, p in vlm.cells()} == {"vlm"}


@pytest.mark.slow
def test_the_head_is_trained_after_the_dual_encoder_and_saved_with_the_run(tmp_path):
    from models.demo.benchmark import DemoBenchmarkConfig, build_split
    from models.training.trainer import load_model, train

    snapshot = build_split(DemoBenchmarkConfig(videos={"train": 2}), "train", tmp_path / "demo",
                           {"video": 1, "track": 1, "query": 1})
    model = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
             "pairwise": {"enabled": True, "hidden": 16, "steps": 20, "batch_size": 16, "n_negatives": 4}}
    result = train(snapshot, "actpair", {"steps": 3, "batch_size": 4, "checkpoint_every": 3, "device": "cpu",
                                         "cache_dir": str(tmp_path / "cache"), "eval_at_end": False,
                                         "batching": {"noisy_gt": False}, "model": model}, tmp_path / "run")
    report = result["after_training"]["pairwise_head"]
    assert result["status"] == "finished" and report["pairs"] > 0 and report["steps"] == 20
    loaded, meta = load_model(tmp_path / "run")
    assert meta["model_config"]["pairwise"]["enabled"] is True
    head = loaded.trained_pairwise_head()
    again = load_model(tmp_path / "run")[0].trained_pairwise_head()
    assert all(torch.equal(a, b) for a, b in zip(head.state_dict().values(), again.state_dict().values(), strict=True))
    assert bool(loaded.pairwise_trained) and set(head.state_dict()) <= {
        k.removeprefix("pairwise_head.") for k in loaded.state_dict()}
    # a run trained without the head has none to compare with
    plain = train(snapshot, "actpair", {"steps": 1, "batch_size": 4, "checkpoint_every": 1, "device": "cpu",
                                        "cache_dir": str(tmp_path / "cache"), "eval_at_end": False,
                                        "batching": {"noisy_gt": False}, "model": {"model": model["model"]}},
                  tmp_path / "plain")
    assert plain["after_training"] == {"pairwise_head": "disabled"}
    with pytest.raises(ValueError, match="no pairwise head"):
        load_model(tmp_path / "plain")[0].trained_pairwise_head()
