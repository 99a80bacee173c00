"""The retrieval pipeline declared as data and its one executor (``models.retrievers.pipeline``):
validation, the first stage against plain cosines, dual-view against Eq. 7, pivot-promote's
comparator requests against a literal Algorithm 1, the pointwise reranker's M requests, invalid
VLM answers counted, and ActPair's rewrite through the language backends."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from models.backends.llm import build_llm
from models.backends.llm.chat import ChatLLM
from models.backends.vlm import build_scorer
from models.backends.vlm.chat_scoring import ChatScorer, YesNo
from models.demo.benchmark import DemoBenchmarkConfig, build_split
from models.retrievers.actpair.pipeline import dual_view_retrieve
from models.retrievers.pipeline import Gallery, PipelineTools, RetrievalPipeline, run_pipeline
from models.retrievers.rerank import attribute_vlm_score, pair_vlm_value
from models.retrievers.vlm_rerank import score_requests
from models.training.evaluation import embed_snapshot, evaluate, evaluate_rows
from models.training.trainer import build_model

ACTPAIR = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
           "features": {"n_fast_max": 8}}
PAPER = {"retrievers": ["dense", "rewrite"], "fusion": "dual_view", "top_k": 4, "shortlist": 3, "reranker": "pairwise"}


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A rendered dev snapshot, an untrained ActPair model prepared on it and its gallery."""
    root = tmp_path_factory.mktemp("pipeline")
    config = DemoBenchmarkConfig(videos={"dev": 2}, include_demo_scenes=False, n_frames=16, width=128, height=96,
                                 people=(2, 3))
    snapshot = build_split(config, "dev", root, {"video": 1, "track": 1, "query": 1})
    torch.manual_seed(0)
    model = build_model("actpair", copy.deepcopy(ACTPAIR))
    _, v, _ = embed_snapshot(model, snapshot, cache_dir=str(root / "cache"))
    return snapshot, model, v, str(root / "cache")


def _texts(snapshot) -> list[str]:
    return [q.text for q in snapshot.queries]


def _pivot_promote_reference(items: list, compare) -> tuple[list, int]:
    """Algorithm 1 as printed: recursive, pivot first, the better ones recursed on."""
    if len(items) <= 1:
        return list(items), 0
    pivot, better, worse, calls = items[0], [], [], 0
    for other in items[1:]:
        calls += 1
        (better if compare(pivot, other) == "b" else worse).append(other)
    inner, more = _pivot_promote_reference(better, compare)
    return [*inner, pivot, *worse], calls + more


# -- the pipeline as data ------------------------------------------------------------------------
def test_a_pipeline_is_plain_data_and_bad_stages_are_refused():
    p = RetrievalPipeline.from_dict(PAPER)
    again = RetrievalPipeline.from_dict(p.as_dict())
    assert again == p and again.sha256() == p.sha256() != RetrievalPipeline().sha256()
    assert p.as_dict()["comparator"] == {"kind": "scorer", "backend": "heuristic", "settings": {}, "tie_margin": 0.0}
    cases = [({"retrievers": ["bm25"]}, "unknown first-stage retriever 'bm25'; known: dense, rewrite"),
             ({"reranker": "listwise"}, "unknown reranker 'listwise'; known: none, pairwise, pointwise"),
             ({"fusion": "borda"}, "unknown fusion 'borda'; known: none, combsum, dual_view, rrf"),
             ({"comparator": {"kind": "oracle"}}, "unknown comparator 'oracle'; known: scorer, vlm, description"),
             ({"comparator": {"kind": "vlm", "backend": "heuristic"}}, "known: transformers, openai"),
             ({"reranker": "pointwise", "weights": {"first_stage": 0.5, "vlm": 0.6}}, "weights must sum to 1"),
             ({"weights": {"first_stage": -0.5, "vlm": 1.5}}, ">= 0"),
             ({"stages": ["dense"]}, "unknown key"),
             ({"retrievers": ["dense", "rewrite"]}, "need a fusion"),
             ({"fusion": "combsum"}, "at least two"),
             ({"retrievers": ["dense"], "fuse_runs": [3], "fusion": "dual_view"}, "dual_view fuses"),
             ({"shortlist": 20, "top_k": 10}, "at most top_k"),
             ({"rewrite": {"backend": "gpt"}}, "unknown rewrite backend")]
    for data, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            RetrievalPipeline.from_dict(data)


# -- the executor --------------------------------------------------------------------------------
def test_the_default_pipeline_is_the_cosine_of_each_text(world):
    snapshot, model, v, _ = world
    result = run_pipeline(None, [Gallery(model, v)], None, _texts(snapshot))
    q = model.encode_texts(_texts(snapshot)).numpy()                                      # [E, d]
    assert result.scores.shape == (len(snapshot.queries), len(snapshot.tracks))
    assert np.allclose(result.scores, q @ v.T, atol=1e-5)
    assert "comparator_requests" not in result.report and result.report["queries"] == len(snapshot.queries)


def test_dual_view_is_eq7_and_the_final_scores_rank_like_the_shortlist(world):
    snapshot, model, v, _ = world
    p = {**PAPER, "reranker": "none"}
    result = run_pipeline(p, [Gallery(model, v)], None, _texts(snapshot))
    s_orig = run_pipeline(None, [Gallery(model, v)], None, _texts(snapshot)).scores
    s_rew = run_pipeline(None, [Gallery(model, v)], None, result.rewrites).scores
    dual = dual_view_retrieve(torch.from_numpy(s_orig), torch.from_numpy(s_rew), top_k=4, top_m=3)
    assert np.array_equal(result.shortlists, dual.indices.numpy())
    assert result.report["union_size"] == dual.union_size.tolist()
    order = np.argsort(-result.scores, axis=1, kind="stable")[:, :3]
    assert np.array_equal(order, result.shortlists)
    # the rewrite came from the template backend over the text and the model's vocabularies
    assert result.report["rewrite"] == {"requests": len(snapshot.queries), "failed": 0,
                                        "model_calls": len(snapshot.queries)}
    assert all(r.startswith("The image shows ") for r in result.rewrites)


def test_pairwise_comparator_requests_are_those_of_algorithm_1(world):
    snapshot, model, v, _ = world
    texts = _texts(snapshot)
    result = run_pipeline(PAPER, [Gallery(model, v)], snapshot, texts)
    fused = run_pipeline({**PAPER, "reranker": "none"}, [Gallery(model, v)], None, texts).shortlists
    ids = np.array([t.id for t in snapshot.tracks])
    scorer = build_scorer("heuristic", {})
    per_query = []
    for e, text in enumerate(texts):
        # replay the recorded run: each candidate's VLM value, compared as the comparator does
        candidates = [int(ids[i]) for i in fused[e]]
        values = {t: pair_vlm_value(*scorer.score(r).vlm_inputs())
                  for t, r in zip(candidates, score_requests(snapshot, text, candidates), strict=True)}

        def compare(a, b, values=values):
            return "tie" if values[a] == values[b] else ("a" if values[a] > values[b] else "b")

        order, calls = _pivot_promote_reference(candidates, compare)
        assert [int(ids[i]) for i in result.shortlists[e]] == order
        per_query.append(calls)
    assert result.report["comparator_requests"] == {"per_query": per_query, "total": sum(per_query)}
    assert all(2 <= c <= 3 for c in per_query)                    # M - 1 .. M(M - 1)/2 with M = 3
    assert result.report["scorer_requests"]["per_query"] == [3] * len(texts)   # each candidate once
    assert result.report["invalid_answers"]["total"] == 0
    assert np.array_equal(np.argsort(-result.scores, axis=1, kind="stable")[:, :3], result.shortlists)


class _CountingScorer:
    """A scorer that counts the requests reaching it."""

    def __init__(self):
        self.inner = build_scorer("heuristic", {})
        self.name, self.model, self.counts = "counting", "", self.inner.counts
        self.seen = []

    def score(self, request, *, reader=None):
        self.seen.append(request.trajectory_id)
        return self.inner.score(request)


def test_a_pointwise_reranker_over_m_candidates_makes_m_requests(world):
    snapshot, model, v, _ = world
    texts = _texts(snapshot)
    scorer = _CountingScorer()
    p = {"reranker": "pointwise", "shortlist": 4, "top_k": 4}
    result = run_pipeline(p, [Gallery(model, v)], snapshot, texts, tools=PipelineTools(scorer=scorer))
    assert len(scorer.seen) == 4 * len(texts)
    assert result.report["scorer_requests"]["per_query"] == [4] * len(texts)
    assert result.report["comparator_requests"]["total"] == 0
    # with all the weight on the VLM term the head is ordered by it (ties keep the first-stage order)
    first = run_pipeline(None, [Gallery(model, v)], None, texts).scores
    ids = np.array([t.id for t in snapshot.tracks])
    fresh = build_scorer("heuristic", {})
    for e, text in enumerate(texts):
        head = np.argsort(-first[e], kind="stable")[:4]
        inputs = np.array([fresh.score(r).vlm_inputs() for r in score_requests(snapshot, text, ids[head].tolist())])
        values = attribute_vlm_score(*inputs.T)                      # over the shortlist, log P(yes)
        assert result.shortlists[e].tolist() == head[np.argsort(-np.array(values), kind="stable")].tolist()


class _FakeChatVLM(ChatScorer):
    """A chat scoring backend without a model: answers come from a list, images are not read."""

    name, model = "fake", "fake"

    def __init__(self, answers):
        super().__init__()
        self.answers, self.asked = list(answers), []

    def images(self, request, *, reader=None):
        return [{"type": "text", "text": f"track {request.trajectory_id}"}], [], []

    def yes_no(self, messages):
        return YesNo(text="perhaps")

    def generate(self, messages, *, max_new_tokens):
        self.asked.append(messages)
        return self.answers[(len(self.asked) - 1) % len(self.answers)]


def test_vlm_answers_that_are_no_decision_or_no_score_are_counted_not_raised(world):
    snapshot, model, v, _ = world
    texts = _texts(snapshot)[:3]
    judge = _FakeChatVLM(["B", "I cannot tell", "tie"])
    p = {"reranker": "pairwise", "shortlist": 3, "top_k": 3, "comparator": {"kind": "vlm", "backend": "openai"}}
    result = run_pipeline(p, [Gallery(model, v)], snapshot, texts, tools=PipelineTools(comparator_backend=judge))
    calls = result.report["comparator_requests"]["total"]
    assert calls == len(judge.asked) >= 2 * len(texts)
    invalid = sum(1 for i in range(calls) if i % 3 == 1)           # every second of three answers
    assert result.report["invalid_answers"]["total"] == invalid > 0
    prompt = judge.asked[0][1]["content"][-1]["text"]
    assert prompt.startswith(f"Query: {texts[0]}") and "A, B, or tie" in prompt
    assert "better supported by the query" in prompt and "spatial relationships" in prompt
    # pointwise: an answer that is not yes/no and a score that is not JSON are invalid marks
    scorer = _FakeChatVLM(["no scores here"])
    p = {"reranker": "pointwise", "shortlist": 3, "top_k": 3, "scorer": {"backend": "openai"}}
    result = run_pipeline(p, [Gallery(model, v)], snapshot, texts, tools=PipelineTools(scorer=scorer))
    assert result.report["invalid_answers"]["per_query"] == [3, 3, 3]
    assert result.report["scorer_counts"]["invalid"] == {"holistic": 9, "scores": 9}


class _ScriptedLLM(ChatLLM):
    name, model = "scripted", "scripted"

    def __init__(self, answers):
        self.answers, self.seen = list(answers), []

    def generate(self, messages, *, max_new_tokens):
        self.seen.append(messages)
        return self.answers.pop(0)


def test_the_rewrite_goes_through_the_language_backends_with_the_vocabularies_only():
    template = build_llm("template", {})
    got = template.rewrite_query("a man in red walking to the left near the bench",
                                 action_tags=["walks right", "walks left"], scene_tags=["tree", "bench"])
    assert (got.action_tag, got.scene_tag, got.failed) == ("walks left", "bench", False)
    assert got.text == ("The image shows a man wearing a red top walking to the left. "
                        "The background features bench.")
    good = ('{"action": "walks left", "scene": null, "rewrite": "The image shows a man wearing a red top '
            'walking left. The background features an unspecified scene."}')
    llm = _ScriptedLLM(['{"action": "flying", "scene": null, "rewrite": "x"}', good])
    out = llm.rewrite_query("a man in red walking left", action_tags=["walks left"], scene_tags=["bench"])
    assert out.action_tag == "walks left" and out.scene_tag is None and out.text.startswith("The image shows")
    assert out.provenance.attempts == 2 and "not a name of the action vocabulary" in out.provenance.errors[0]
    user = llm.seen[0][1]["content"]
    assert '"walks left"' in user and '"bench"' in user and "a man in red walking left" in user
    failing = _ScriptedLLM(["no", "still no"])
    out = failing.rewrite_query("a man in red", action_tags=[], scene_tags=[])
    assert out.failed and out.text is None


def test_a_failed_rewrite_keeps_the_original_text_and_is_counted(world):
    snapshot, model, v, _ = world
    texts = _texts(snapshot)[:2]
    llm = _ScriptedLLM(["not json"] * 4)
    p = {**PAPER, "reranker": "none"}
    result = run_pipeline(p, [Gallery(model, v)], None, texts, tools=PipelineTools(llm=llm))
    assert result.rewrites == texts
    assert result.report["rewrite"] == {"requests": 2, "failed": 2, "model_calls": 4}


def test_evaluation_ranks_the_pipeline_scores_and_reports_its_requests(world):
    snapshot, model, _, cache = world
    figures = evaluate(model, snapshot, cache_dir=cache, pipeline=PAPER)
    report = figures["pipeline"]
    assert report["pipeline"] == RetrievalPipeline.from_dict(PAPER).as_dict()
    assert report["comparator_requests"]["total"] == sum(report["comparator_requests"]["per_query"]) > 0
    assert figures["t2traj"]["n_queries"] > 0 and set(figures) >= {"t2traj", "traj2t", "ocvr", "random"}
    # the figures rank the pipeline's final scores, not the plain dense ones
    from models.training.evaluation import snapshot_pipeline, snapshot_rows
    from models.training.metrics import evaluate_t2traj, evaluate_traj2t

    result = snapshot_pipeline(model, snapshot, PAPER, cache_dir=cache)
    scores = result.scores
    relation, _, _ = snapshot.matrix(include_pseudo=False)
    videos = (np.asarray([t.video_id for t in snapshot.tracks]), np.asarray([q.video_id for q in snapshot.queries]))
    expected = evaluate_t2traj(scores, relation, *videos)
    assert figures["t2traj"] == expected
    # Traj2T ranks queries against each other: the pipeline's scores on one scale for all queries
    assert figures["traj2t"] == evaluate_traj2t(result.comparable, relation, *videos)
    _, rows = evaluate_rows(model, snapshot, cache_dir=cache, pipeline=PAPER)
    assert rows == snapshot_rows(scores, snapshot, traj2t_sim=result.comparable)
    with pytest.raises(ValueError, match="fuses runs"):
        evaluate(model, snapshot, cache_dir=cache, pipeline={"fuse_runs": [5], "fusion": "combsum"})


def test_the_reranked_shortlist_stays_ahead_of_everything_outside_it_even_on_ties():
    from models.retrievers.pipeline import _reassign

    row = np.array([3.0, 2.0, 2.0, 1.0])                  # position 2 ties with the shortlist's last value
    _reassign(row, np.array([0, 1]), [1, 0])
    assert np.argsort(-row, kind="stable").tolist() == [1, 0, 2, 3]
    assert row[2] < row[0] and row[3] == 1.0              # below the shortlist; lower scores untouched
