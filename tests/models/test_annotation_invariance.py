"""No answer key in the inputs (DESIGN 4.4): perturb every human-side record of a snapshot's gallery
— approved descriptions and facts, their votes, the queries' construction predicates and target
ids, the relation labels — and every score and ranking that evaluation can compute stays
bit-identical: VTrajEmbed, SCOUT and ActPair scores (``score_snapshot``, what ``evaluate`` ranks),
ActPair's vocabularies, text-side action labels, rewrites and dual-view retrieval, CombSUM fusion
with its shortlist, the rerank blend with ScoutITM, pivot-promote with the described-fact
comparator, and every declared retrieval pipeline (``models.retrievers.pipeline``) with each of
its rewrites (template and chat language backends), comparators (pixel scorer, chat VLM,
describer descriptions) and the pointwise VLM reranker, with their request counts. The catalogue comparator, which reads the approved facts and the predicates, changes
under the same perturbation: the perturbation reaches what a leaking pipeline would read. (The
search reranker and its catalogue mode: ``tests/workers/test_search_invariance.py``.)"""
from __future__ import annotations

import copy
import dataclasses
import random

import numpy as np
import pytest
import torch

from models.backends.llm.chat import ChatLLM
from models.backends.vlm import build_describer, build_scorer
from models.backends.vlm.chat_scoring import ChatScorer, YesNo
from models.demo.benchmark import DemoBenchmarkConfig, build_split
from models.facts import Description, Fact, Predicate
from models.retrievers.actpair.pipeline import (
    DescribedFactComparator,
    FactComparator,
    pairwise_rerank,
)
from models.retrievers.described import describe_tracks
from models.retrievers.pipeline import PipelineSetup, PipelineTools, RetrievalPipeline
from models.retrievers.rerank import (
    BlendConfig,
    combsum,
    fuse_and_rerank,
    shortlist,
)
from models.retrievers.scout.data import record_rows
from models.retrievers.scout.itm import build_scout_itm
from models.retrievers.vlm_rerank import vlm_term_rows
from models.training.evaluation import embed_snapshot, score_snapshot, snapshot_pipeline
from models.training.snapshot import SOURCES, STRATA, Relation, RelationSnapshotData, SnapshotQuery
from models.training.trainer import build_model

TINY = {
    "vtrajembed": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "embed_dim": 32, "geo_hidden": 16,
                   "agg_layers": 1, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 8, "n_slow_budget": 2}},
    "scout": {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2, "n_prompts": 2},
              "features": {"n_fast_max": 8}},
    "actpair": {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
                "features": {"n_fast_max": 8}},
}
COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "grey")


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A rendered dev snapshot (two videos) with its approved catalogue: per trajectory the
    description people approved (from the facts its queries cite) and the votes on it."""
    root = tmp_path_factory.mktemp("invariance")
    config = DemoBenchmarkConfig(videos={"dev": 2}, include_demo_scenes=False, n_frames=16, width=128, height=96,
                                 people=(2, 3))
    snapshot = build_split(config, "dev", root, {"video": 1, "track": 1, "query": 1})
    assert len(snapshot.queries) >= 4 and len(snapshot.tracks) >= 4
    catalogue = {}
    for t in snapshot.tracks:
        required = {(p["name"], p["value"]) for q in snapshot.queries if q.target_id == t.id for p in q.predicates}
        end = int(t.frames[-1]) + 1
        facts = [Fact(f"f{i}", "event" if name in ("walks", "stands") else "attribute", name, value, 0, end)
                 for i, (name, value) in enumerate(sorted(required))]
        text = " ".join(f"{name} {value}" for name, value in sorted(required)) or "a person"
        catalogue[t.id] = {"description": Description(text, "", facts), "votes": ["usable"] * 3}
    return snapshot, catalogue, str(root / "cache")


def _perturbed(snapshot: RelationSnapshotData, catalogue: dict) -> tuple[RelationSnapshotData, dict]:
    """Every human-side record changed: predicates moved between queries with new values, target
    ids rotated, relation labels flipped; approved texts replaced, fact values shuffled between
    trajectories, votes turned."""
    rng = random.Random(7)
    predicates = [list(q.predicates) for q in snapshot.queries]
    rng.shuffle(predicates)
    targets = [q.target_id for q in snapshot.queries]
    queries = [SnapshotQuery(id=q.id, video_id=q.video_id, text=q.text, target_id=targets[i - 1],
                             predicates=[{**p, "value": rng.choice(COLOURS)} for p in predicates[i]])
               for i, q in enumerate(snapshot.queries)]
    # relation rows: labels flipped, source, stratum and the pseudo flag changed, a fifth dropped,
    # and rows added for pairs nobody labelled
    kept = [r for i, r in enumerate(snapshot.relations) if i % 5]
    relations = [dataclasses.replace(r, label={1: 0, 0: 1, -1: 1}[r.label], source=rng.choice(SOURCES),
                                     stratum=rng.choice(STRATA), pseudo=not r.pseudo) for r in kept]
    labelled = {(r.query_id, r.trajectory_id) for r in snapshot.relations}
    relations += [Relation(q.id, t.id, rng.choice((1, 0, -1))) for q in snapshot.queries for t in snapshot.tracks
                  if (q.id, t.id) not in labelled][:10]
    changed = RelationSnapshotData(split=snapshot.split, videos=snapshot.videos, tracks=snapshot.tracks,
                                   queries=queries, relations=relations, meta={"perturbed": True})
    changed.validate()
    values = [f.value for entry in catalogue.values() for f in entry["description"].facts]
    rng.shuffle(values)
    out = {}
    for tid, entry in catalogue.items():
        facts = [dataclasses.replace(f, value=values.pop()) for f in entry["description"].facts]
        text = f"a person in a {rng.choice(COLOURS)} top walking to the {rng.choice(('left', 'right'))}"
        out[tid] = {"description": Description(text, "", facts), "votes": ["unusable", "uncertain", "usable"]}
    assert len(relations) != len(snapshot.relations) or relations != snapshot.relations
    return changed, out


class _PixelJudge(ChatScorer):
    """A chat VLM stand-in that reads what a real one would be shown (the candidates' crops and
    target-marked frames, ``ChatScorer.images``): A when A's images are brighter, else B."""

    name, model = "pixel-judge", ""

    def yes_no(self, messages):
        return YesNo(text="yes" if self._brightness(messages) > 100 else "no")

    def generate(self, messages, *, max_new_tokens):
        parts = messages[1]["content"]
        split = next(i for i, p in enumerate(parts) if p.get("text") == "Candidate B:")
        a, b = self._brightness([{"content": parts[:split]}]), self._brightness([{"content": parts[split:]}])
        return "tie" if a == b else ("A" if a > b else "B")

    @staticmethod
    def _brightness(messages) -> float:
        images = [p["image"] for m in messages for p in m["content"] if p.get("type") == "image"]
        return float(np.mean([img.mean() for img in images])) if images else 0.0


class _EchoLLM(ChatLLM):
    """A chat language backend that chooses no tag and rewrites the query text into the template."""

    name, model = "echo", ""

    def generate(self, messages, *, max_new_tokens):
        text = messages[1]["content"].split("Query: ", 1)[1].split("\n", 1)[0]
        return ('{"action": null, "scene": null, "rewrite": "The image shows ' + text.replace('"', "")
                + ' wearing clothing. The background features a scene."}')


PIPELINES = {
    "paper": {"retrievers": ["dense", "rewrite"], "fusion": "dual_view", "top_k": 4, "shortlist": 3,
              "reranker": "pairwise"},
    "pointwise": {"reranker": "pointwise", "shortlist": 3, "top_k": 3, "weights": {"first_stage": 0.2, "vlm": 0.8}},
    "description": {"reranker": "pairwise", "shortlist": 3, "top_k": 3,
                    "comparator": {"kind": "description", "tie_margin": 0.01}},
    "vlm": {"retrievers": ["dense", "rewrite"], "fusion": "combsum", "shortlist": 3, "top_k": 3,
            "reranker": "pairwise", "comparator": {"kind": "vlm", "backend": "openai"}},
}


def _pipeline_outputs(model, snapshot, cache: str) -> dict:
    out = {}
    for name, pipeline in PIPELINES.items():
        tools = PipelineTools(llm=_EchoLLM(), comparator_backend=_PixelJudge()) if name == "vlm" else None
        result = snapshot_pipeline(model, snapshot, PipelineSetup(RetrievalPipeline.from_dict(pipeline), tools=tools), cache_dir=cache)
        report = {k: v for k, v in result.report.items() if k != "timing_s"}
        out[f"pipeline/{name}"] = (result.scores, result.shortlists, report, result.rewrites, result.descriptions)
    return out


def _model_side_outputs(snapshot: RelationSnapshotData, catalogue: dict, cache: str) -> dict:
    """Every score and ranking evaluation can compute over ``snapshot``, as evaluation computes it.
    ``catalogue`` is in reach (a leaking pipeline would read it); only the catalogue comparator,
    the control, does."""
    out: dict[str, object] = {}
    texts = [q.text for q in snapshot.queries]
    models = {}
    for kind, config in TINY.items():
        torch.manual_seed(0)                     # the same initial weights in every world
        models[kind] = build_model(kind, copy.deepcopy(config))
        out[f"{kind}/scores"] = score_snapshot(models[kind], snapshot, cache_dir=cache)           # [E, T]
        out[f"{kind}/ranking"] = np.argsort(-out[f"{kind}/scores"], axis=1, kind="stable")
    actpair = models["actpair"]
    out["actpair/vocabulary"] = actpair.vocabulary.to_dict()
    out["actpair/scene_vocabulary"] = actpair.scene_vocabulary.to_dict()
    out["actpair/text_action_labels"] = actpair.text_action_labels(texts)
    out["actpair/rewrites"] = rewrites = actpair.rewrite(texts)
    _, v, _ = embed_snapshot(actpair, snapshot, cache_dir=cache)                                   # [T, d]
    dual = actpair.dual_view_search(texts, rewrites, torch.from_numpy(v), top_k=4, top_m=3)
    out["actpair/dual_view"] = (dual.indices, dual.scores, dual.union_size)
    # pivot-promote over the fused top-M with the describer's facts read from the pixels
    described = describe_tracks(build_describer("heuristic", {}), snapshot.model_inputs(),
                                [t.id for t in snapshot.tracks])
    by_index = dict(enumerate(described.values()))
    out["actpair/pairwise"] = pairwise_rerank(dual, lambda q: DescribedFactComparator(texts[q], by_index))
    # CombSUM over the three retrievers, the shortlist, and the rerank blend with ScoutITM
    fused = combsum([out[f"{kind}/scores"] for kind in TINY])                                      # [E, T]
    out["fusion/combsum"], out["fusion/shortlist"] = fused, shortlist(fused, 5)
    _, _, scout = embed_snapshot(models["scout"], snapshot, cache_dir=cache)
    rows = record_rows(scout, [(t.id, 0) for t in snapshot.tracks])
    torch.manual_seed(0)
    itm = build_scout_itm({"d_visual": scout.tokens.shape[-1], "d_text": scout.text.tokens.shape[-1], "d_model": 32,
                           "n_layers": 1, "n_heads": 2, "ff_mult": 2, "max_visual_tokens": scout.tokens.shape[1],
                           "max_text_tokens": scout.text.tokens.shape[1]}).eval()

    scorer = build_scorer("heuristic", {})
    track_ids = np.array([t.id for t in snapshot.tracks])                                          # [T]

    def rerank_scores(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = itm.score_shortlist(scout.tokens[rows], scout.mask[rows], torch.from_numpy(scout.text.tokens),
                                torch.from_numpy(scout.text.mask), torch.from_numpy(ids))                # [E, M]
        # the shipped VLM term: the heuristic pixel scorer over each shortlisted trajectory
        vlm, counts = vlm_term_rows(scorer, snapshot.model_inputs(), texts, track_ids[ids])         # [E, M]
        out["fusion/vlm_requests"] = counts.requests
        return vlm, p.numpy()

    out["fusion/rerank_blend"] = fuse_and_rerank([out[f"{kind}/scores"] for kind in TINY], rerank_scores,
                                                 BlendConfig(shortlist=5))
    # every declared pipeline, as evaluation and search execute it
    out |= _pipeline_outputs(actpair, snapshot, cache)
    # SCOUT's second stage as a pipeline: CombSUM with a fused run, the VLM term and the ScoutITM term
    torch.manual_seed(0)
    scout_itm = build_model("scout", {**copy.deepcopy(TINY["scout"]), "itm": {
        "enabled": True, "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2}}})
    scout_itm.itm_trained.fill_(True)                # its random head, as if trained: what it reads is the point
    fused_itm = RetrievalPipeline.from_dict({"fuse_runs": [1], "fusion": "combsum", "reranker": "pointwise",
                                             "shortlist": 3, "top_k": 3,
                                             "weights": {"first_stage": 0.2, "vlm": 0.4, "itm": 0.4}})
    result = snapshot_pipeline(scout_itm, snapshot, PipelineSetup(fused_itm, fused=[models["vtrajembed"]]),
                               cache_dir=cache)
    out["pipeline/scout_itm_fused"] = (result.scores, result.shortlists,
                                       {k: v for k, v in result.report.items() if k != "timing_s"})
    # ActPair's Table 5 arms: its pairwise head under pivot-promote and the head's pointwise twin
    torch.manual_seed(0)
    headed = build_model("actpair", {**copy.deepcopy(TINY["actpair"]), "pairwise": {"enabled": True, "hidden": 16}})
    headed.pairwise_trained.fill_(True)           # its random head, as if trained: what it reads is the point
    for name, arm in (("pairwise", {"reranker": "pairwise"}),
                      ("pointwise", {"reranker": "pointwise", "weights": {"vlm": 0.0, "absolute": 1.0}})):
        table5 = {**PIPELINES["paper"], **arm, "comparator": {"kind": "pairwise-head"}}
        result = snapshot_pipeline(headed, snapshot, table5, cache_dir=cache)
        out[f"pipeline/head_{name}"] = (result.scores, result.shortlists,
                                        {k: v for k, v in result.report.items() if k != "timing_s"})
    # the control: the catalogue comparator reads the approved facts and the construction predicates
    facts = {i: catalogue[t.id]["description"].facts for i, t in enumerate(snapshot.tracks)}
    predicates = [[Predicate(p["name"], p["value"], p["fact_ids"]) for p in q.predicates] for q in snapshot.queries]
    out["control/catalogue"] = pairwise_rerank(dual, lambda q: FactComparator(predicates[q], facts))
    return out


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_every_evaluation_score_and_ranking_ignores_the_human_side_records(world):
    snapshot, catalogue, cache = world
    changed, changed_catalogue = _perturbed(snapshot, catalogue)
    assert changed.content_sha256() != snapshot.content_sha256()
    before = _model_side_outputs(snapshot, catalogue, cache)
    after = _model_side_outputs(changed, changed_catalogue, cache)
    assert set(before) == set(after)
    differ = sorted(name for name in before if not _same(before[name], after[name]))
    # everything evaluation computes is bit-identical; only the catalogue comparator moved
    assert differ == ["control/catalogue"]
    # and the outputs are real: rewrites read the texts, the rerankers called their comparators
    assert all(r.startswith("The image shows ") for r in before["actpair/rewrites"])
    assert before["actpair/pairwise"][1] > 0 and int((before["actpair/text_action_labels"] >= 0).sum()) > 0
    assert before["fusion/vlm_requests"] > 0
    for name in PIPELINES:
        report = before[f"pipeline/{name}"][2]
        assert report["comparator_requests"]["total"] + report["scorer_requests"]["total"] > 0, name
    assert before["pipeline/vlm"][2]["comparator_requests"]["total"] > 0
    assert before["pipeline/head_pairwise"][2]["comparator_requests"]["total"] > 0
    assert before["pipeline/head_pointwise"][2]["model_requests"]["total"] > 0
    scout_report = before["pipeline/scout_itm_fused"][2]
    assert scout_report["scorer_requests"]["total"] > 0 and "dense|run 1" in scout_report["decorrelation"]
    assert before["pipeline/vlm"][2]["rewrite"]["failed"] == 0 and before["pipeline/description"][4][0]
