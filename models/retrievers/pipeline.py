"""A retrieval pipeline declared as data, and the one executor that search and evaluation run.

:class:`RetrievalPipeline` (plain JSON) names the first-stage retrievers, their fusion, the
shortlist, the reranker and its weights. :func:`run_pipeline` executes it over a gallery of
trajectory embeddings for a list of query texts:

1. **first stage**: each retriever gives a score list ``[E, T]``, the cosine of a query
   embedding (``encode_texts``, the model's own text path, one text at a time so that a search
   and an evaluation of the same text compute the same numbers) with the unit trajectory
   embeddings. ``"dense"``: the query text; ``"rewrite"``: its rewrite by a language backend
   (``models.retrievers.actpair.rewrite``: the text and the model's canonical action and scene
   vocabularies only). ``fuse_runs`` adds the dense list of other trained runs (the caller loads
   them);
2. **fusion**: ``"none"`` (one list), ``"combsum"`` (``models.retrievers.rerank.combsum``),
   ``"rrf"`` (reciprocal rank fusion with ``rrf_k``, ``models.retrievers.rerank.rrf``: SCOUT's
   rank-only control for CombSUM) or ``"dual_view"`` (ActPair Eq. 7 over ``["dense", "rewrite"]``: the union of each view's top
   ``top_k``, the mean of both scores; trajectories outside the union rank below it);
3. **shortlist**: the first ``shortlist`` (M) trajectories per query, ties to the lower index;
4. **reranker** over the shortlist: ``"none"``; ``"pairwise"``: pivot-promote
   (``models.retrievers.rerank.pivot_promote``, Algorithm 1) with the ``comparator``
   (``models.retrievers.comparators``; ``"pairwise-head"``: the model's trained Bradley–Terry
   pairwise head, ``"vlm"``: a chat VLM shown both candidates); ``"pointwise"``: a VLM ``scorer``
   scores each of the M candidates once (``models.retrievers.vlm_rerank.vlm_term``) and the order is
   ``weights.first_stage · minmax(fused) + weights.vlm · minmax(vlm) + weights.itm · minmax(itm)
   + weights.absolute · minmax(absolute)`` (weights sum to 1; ``itm``: SCOUT's ScoutITM match
   probability, a SCOUT model trained with ``itm.enabled``; ``absolute``: one absolute score per
   candidate from the comparator's own model, ActPair Table 5's pointwise baseline: the pairwise
   head's pointwise twin, or the chat VLM's one-call 0–100 score; a zero weight asks nothing of its
   signal).

The final scores ``[E, T]`` are the fused scores with the shortlist's values handed out again in
the reranked order, so sorting them gives the pipeline's ranking and the scores outside the
shortlist are untouched. They rank each query's gallery and are **not** comparable across queries
(CombSUM and the reranker's blend min-max normalise per query, dual-view drops what lies outside a
query's own union). ``comparable`` holds what a ranking *of queries* reads (Traj2T ranks every
query for a trajectory, so one query's scores must be on the scale of another's): the first stage
fused on one scale for all queries (``"none"``: the cosines; ``"combsum"``: each list min-max
normalised over the whole matrix, ``models.retrievers.rerank.minmax_all``, then summed; ``"rrf"``:
each list's ranks of the queries per trajectory, fused as RRF does; ``"dual_view"``: Eq. 7's mean
of both views' cosines, without the per-query union). A reranker orders one query's shortlist and
gives no cross-query scale, so it does not reach them. The report counts, per query, comparator requests, scorer requests
and invalid answers (an answer that is not a decision, a score that could not be read: counted,
never raised), the ``model_requests`` (Table 5's requests per query: comparisons, scorer requests
and absolute scores together), and the rewrite requests; with several first-stage lists it also summarises their
per-query Spearman decorrelation (``models.retrievers.decorrelation``: what makes fusing them pay).

Every stage reads model-side inputs only (DESIGN 4.4): the query texts, the embeddings, the
snapshot's :meth:`model_inputs` view (videos, frames, boxes) and backends' outputs.
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from models.backends.encoders import build_text_encoder
from models.backends.llm import BACKENDS as LLM_BACKENDS
from models.backends.llm import build_llm
from models.backends.vlm import BACKENDS as DESCRIBER_BACKENDS
from models.backends.vlm import build_describer, build_scorer
from models.backends.vlm.scoring import SCORER_BACKENDS, ScoreCounts
from models.config import PlainConfig
from models.facts import canonical_json
from models.retrievers.actpair.pipeline import VLMComparator, dual_view_union
from models.retrievers.actpair.rewrite import rewrite_queries
from models.retrievers.comparators import (
    ChatPairJudge,
    ChatPointJudge,
    DescriptionComparator,
    PairwiseHeadComparator,
    ScorerComparator,
    head_point_scores,
)
from models.retrievers.decorrelation import pairwise_decorrelation
from models.retrievers.described import describe_tracks, description_text
from models.retrievers.rerank import combsum, minmax_all, minmax_rows, pivot_promote, rrf, shortlist
from models.retrievers.vlm_rerank import score_requests, vlm_term
from models.text import INT64_MAX
from models.training.index import cosines

RETRIEVERS = ("dense", "rewrite")
FUSIONS = ("none", "combsum", "dual_view", "rrf")
RERANKERS = ("none", "pairwise", "pointwise")
COMPARATORS = ("scorer", "vlm", "description", "pairwise-head")
CHAT_SCORERS = ("transformers", "openai")
MAX_SHORTLIST = 100


def _known(kind: str, value, known: Sequence[str]) -> None:
    if value not in known:
        raise ValueError(f"unknown {kind} {value!r}; known: {', '.join(known)}")


@dataclass
class Backend(PlainConfig):
    """A backend of one stage: its registry name and its settings."""

    backend: str = "heuristic"                   # registry name (models.backends.vlm / .llm)
    settings: dict = field(default_factory=dict)  # the backend's settings (checked when it is built)


@dataclass
class ComparatorConfig(PlainConfig):
    """The pairwise comparator of pivot-promote (``models.retrievers.comparators``)."""

    kind: str = "scorer"                         # "scorer" | "vlm" | "description" | "pairwise-head"
    backend: str = "heuristic"                   # scorer: a scoring backend; vlm: transformers | openai; description: a describer; pairwise-head: "model"
    settings: dict = field(default_factory=dict)  # that backend's settings
    tie_margin: float = 0.0                      # scorer / description: differences within it are ties; pairwise-head: |P - ½| within it

    def __post_init__(self) -> None:
        _known("comparator", self.kind, COMPARATORS)
        if self.kind == "pairwise-head" and self.backend == "heuristic":
            self.backend = "model"               # the head is the trained model's own: no backend to name
        known = {"scorer": SCORER_BACKENDS, "vlm": CHAT_SCORERS, "description": DESCRIBER_BACKENDS,
                 "pairwise-head": ("model",)}[self.kind]
        _known(f"{self.kind} comparator backend", self.backend, known)
        if isinstance(self.tie_margin, bool) or not isinstance(self.tie_margin, int | float) or not (
                np.isfinite(self.tie_margin) and self.tie_margin >= 0):
            raise ValueError(f"tie_margin must be a finite number >= 0, got {self.tie_margin!r}")


@dataclass
class BlendWeights(PlainConfig):
    """Weights of the pointwise reranker's blend (each signal min-max normalised per query)."""

    first_stage: float = 0.0                     # the fused first-stage score
    vlm: float = 1.0                             # the VLM term (attribute_vlm_score); 0: no VLM requests
    itm: float = 0.0                             # SCOUT's ScoutITM match probability (a SCOUT model trained with itm)
    absolute: float = 0.0                        # one absolute score per candidate from the comparator's model (Table 5)

    def __post_init__(self) -> None:
        values = (self.first_stage, self.vlm, self.itm, self.absolute)
        if not all(isinstance(w, int | float) and not isinstance(w, bool) and np.isfinite(w) and w >= 0
                   for w in values):
            raise ValueError(f"weights must be finite numbers >= 0, got {self.as_dict()}")
        if abs(sum(values) - 1.0) > 1e-6:
            raise ValueError(f"weights must sum to 1, got {self.as_dict()} (sum {sum(values):g})")


@dataclass
class RetrievalPipeline(PlainConfig):
    """What search and evaluation run after the embeddings (see the module docstring). The
    defaults are the plain dense retrieval that evaluation ran before pipelines existed."""

    retrievers: tuple[str, ...] = ("dense",)     # first-stage score lists of the model: "dense", "rewrite"
    fuse_runs: tuple[int, ...] = ()              # other training runs whose dense lists join the first stage
    fusion: str = "none"                         # "none" | "combsum" | "dual_view" | "rrf"
    rrf_k: float = 60                            # rrf: the constant k of 1 / (k + rank) (Cormack et al.: 60)
    top_k: int = 100                             # dual_view: candidates kept per view (K)
    shortlist: int = 10                          # candidates per query to the reranker (M)
    rewrite: Backend = field(default_factory=lambda: Backend("template"))  # language backend of "rewrite"
    reranker: str = "none"                       # "none" | "pairwise" | "pointwise"
    comparator: ComparatorConfig = field(default_factory=ComparatorConfig)  # pairwise
    scorer: Backend = field(default_factory=Backend)  # pointwise: the VLM scoring backend
    weights: BlendWeights = field(default_factory=BlendWeights)  # pointwise blend

    def __post_init__(self) -> None:
        if not self.retrievers:
            raise ValueError(f"a pipeline needs at least one first-stage retriever; known: {', '.join(RETRIEVERS)}")
        for r in self.retrievers:
            _known("first-stage retriever", r, RETRIEVERS)
        if len(set(self.retrievers)) != len(self.retrievers):
            raise ValueError(f"first-stage retrievers must be distinct, got {list(self.retrievers)}")
        if not all(isinstance(r, int) and not isinstance(r, bool) and 0 < r <= INT64_MAX for r in self.fuse_runs):
            raise ValueError(f"fuse_runs must be training run ids, got {list(self.fuse_runs)}")
        if len(set(self.fuse_runs)) != len(self.fuse_runs):
            raise ValueError("fuse_runs must name each run once")
        _known("fusion", self.fusion, FUSIONS)
        n = len(self.retrievers) + len(self.fuse_runs)
        if self.fusion == "none" and n != 1:
            raise ValueError(f"{n} first-stage score lists need a fusion (combsum, rrf or dual_view)")
        if self.fusion in ("combsum", "rrf") and n < 2:
            raise ValueError(f"{self.fusion} fuses at least two first-stage score lists")
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int | float) or not (
                np.isfinite(self.rrf_k) and self.rrf_k > 0):
            raise ValueError(f"rrf_k must be a finite number > 0 (RRF's k; 60 by default), got {self.rrf_k!r}")
        if self.fusion == "dual_view" and (tuple(self.retrievers) != ("dense", "rewrite") or self.fuse_runs):
            raise ValueError('dual_view fuses the retrievers ["dense", "rewrite"] of one model, nothing else')
        for name in ("top_k", "shortlist"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10000:
                raise ValueError(f"{name} must be an integer in 1..10000, got {value!r}")
        if self.shortlist > min(self.top_k, MAX_SHORTLIST):
            raise ValueError(f"shortlist must be at most top_k and {MAX_SHORTLIST}, got {self.shortlist}")
        _known("rewrite backend", self.rewrite.backend, LLM_BACKENDS)
        _known("reranker", self.reranker, RERANKERS)
        _known("scoring backend", self.scorer.backend, SCORER_BACKENDS)

    def as_dict(self) -> dict:
        """Every field as plain data, ``rrf_k`` only with the ``"rrf"`` fusion: a pipeline that does
        not read it keeps the record (and the hash) it had before the field existed."""
        record = super().as_dict()
        if self.fusion != "rrf":
            del record["rrf_k"]
        return record

    def sha256(self) -> str:
        """SHA-256 of the pipeline's canonical JSON (what stored runs are keyed by)."""
        return record_sha256(self.as_dict())

    @classmethod
    def coerce(cls, pipeline: RetrievalPipeline | dict | None) -> RetrievalPipeline:
        return pipeline if isinstance(pipeline, cls) else cls.from_dict(pipeline)


def record_sha256(record: dict) -> str:
    """SHA-256 of a pipeline record's canonical JSON (``models.facts.canonical_json``)."""
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()


@dataclass
class Gallery:
    """One first-stage model over the gallery."""

    model: object                                # a retriever with a text path (encode_texts)
    vectors: np.ndarray                          # [T, d] unit trajectory embeddings, gallery order
    data: object | None = None                   # the model's prepared inputs of the gallery (ITM reads them)


@dataclass
class PipelineTools:
    """The backends the stages call; each is built from the pipeline's settings when not given
    (search passes its cached ones)."""

    llm: object | None = None                    # rewrite: a language backend
    scorer: object | None = None                 # pointwise: a VLM scorer
    comparator_backend: object | None = None     # pairwise: a scorer, a chat scorer or a describer
    text_encoder: object | None = None           # description comparator: the frozen text encoder
    descriptions: Callable[[list[int]], dict[int, str]] | None = None  # description comparator: id -> text
    cache_dir: str | None = None                 # ITM: the frozen-feature cache the model prepares from


@dataclass
class PipelineSetup:
    """A pipeline with the loaded models of its ``fuse_runs`` (in order) and optional tools."""

    pipeline: RetrievalPipeline
    fused: list = field(default_factory=list)
    tools: PipelineTools | None = None

    @classmethod
    def of(cls, value) -> PipelineSetup:
        setup = value if isinstance(value, cls) else cls(RetrievalPipeline.coerce(value))
        if len(setup.fused) != len(setup.pipeline.fuse_runs):
            raise ValueError(f"the pipeline fuses runs {list(setup.pipeline.fuse_runs)}: their "
                             f"{len(setup.pipeline.fuse_runs)} models must be loaded with it, got {len(setup.fused)}")
        return setup


@dataclass
class PipelineResult:
    """What :func:`run_pipeline` computed."""

    scores: np.ndarray                           # [E, T] final scores: sorting a row gives the ranking
    shortlists: np.ndarray                       # [E, M] gallery positions of the shortlist, reranked order
    report: dict                                 # the pipeline, requests and invalid answers per query
    rewrites: list[str] | None = None            # [E] the rewritten view, when a retriever used it
    descriptions: list[dict[int, str]] = field(default_factory=list)  # [E] description comparator's texts
    comparable: np.ndarray | None = None         # [E, T] first stage on one scale for all queries (Traj2T)


def encode_texts(model, texts: Sequence[str]) -> np.ndarray:
    """Unit query embeddings ``[Q, d]`` of any texts through a retriever's text path: the model's
    ``encode_texts`` when it has one, else VTrajEmbed's (frozen text tokens, then the trained
    text pass of its aggregator). ``ValueError`` for a model without a text path."""
    with torch.inference_mode():
        if callable(getattr(model, "encode_texts", None)):
            q = model.encode_texts(list(texts))
        elif callable(getattr(model, "forward_text_tokens", None)):
            if getattr(model.config, "aggregator", "transformer") == "hf_lm":
                q = model.forward_texts_lm(list(texts))
            else:
                enc = model.text_encoder.encode(list(texts))
                q = model.forward_text_tokens(torch.from_numpy(enc.tokens).to(model.device),
                                              torch.from_numpy(enc.mask).to(model.device))
        else:
            raise ValueError(f"model {type(model).__name__} cannot encode free text")
        q = torch.nn.functional.normalize(q.float(), dim=-1)                               # [Q, d]
    return q.cpu().numpy().astype(np.float32)


def gallery_scores(gallery: Gallery, texts: Sequence[str]) -> np.ndarray:
    """Cosine ``[E, T]`` of each text (encoded alone) with every trajectory of the gallery."""
    vectors = np.asarray(gallery.vectors, np.float32)                                      # [T, d]
    rows = [cosines(vectors, encode_texts(gallery.model, [t])[0]) for t in texts]           # each [T]
    return np.stack(rows) if rows else np.zeros((0, vectors.shape[0]))                     # [E, T]


def _vocabulary_names(model, attribute: str) -> list[str]:
    vocabulary = getattr(model, attribute, None)
    return list(vocabulary.canonical) if vocabulary is not None else []


def comparable_scores(fusion: str, lists: Sequence[np.ndarray], rrf_k: float = 60) -> np.ndarray:
    """The first-stage ``lists`` (each ``[E, T]`` cosines) fused on one scale for every query (module
    docstring): no per-query normalisation, so a ranking of queries for a trajectory compares like
    with like."""
    _known("fusion", fusion, FUSIONS)
    if fusion == "none":
        return np.asarray(lists[0], np.float64).copy()                                     # [E, T]
    if fusion == "combsum":
        return np.sum([minmax_all(s) for s in lists], axis=0)                              # [E, T]
    if fusion == "rrf":         # each list's ranks of the queries per trajectory, fused as RRF does
        return rrf([np.asarray(s).T for s in lists], rrf_k).T                             # [E, T]
    return (np.asarray(lists[0], np.float64) + np.asarray(lists[1], np.float64)) / 2       # [E, T]


def _reassign(row: np.ndarray, head: np.ndarray, order: list[int]) -> None:
    """Hand the head's values (sorted, best first) to its members in ``order``, strictly
    decreasing so that the ranking of ``row`` puts them in that order (in place)."""
    values = np.sort(row[head])[::-1].copy()                                               # [M]
    for i in range(1, len(values)):
        values[i] = min(values[i], np.nextafter(values[i - 1], -np.inf))
    rest = np.ones(row.shape[0], bool)
    rest[head] = False
    if len(values) and rest.any():                 # nothing outside the shortlist ties with or passes its last
        row[rest] = np.minimum(row[rest], np.nextafter(values[-1], -np.inf))
    row[np.asarray(order, np.int64)] = values


def run_pipeline(pipeline: RetrievalPipeline | dict | None, galleries: Sequence[Gallery], snapshot,
                 texts: Sequence[str], *, tools: PipelineTools | None = None) -> PipelineResult:
    """Run ``pipeline`` for the query ``texts`` (``[E]``) over ``galleries`` (the model first, then
    the models of ``fuse_runs`` in order; each with ``[T, d]`` unit vectors in the order of
    ``snapshot.tracks``). ``snapshot`` (its ``model_inputs()`` view is what is read) is needed
    only by a reranker; ``None`` otherwise. See the module docstring."""
    p = RetrievalPipeline.coerce(pipeline)
    tools = tools or PipelineTools()
    texts = [str(t) for t in texts]
    if len(galleries) != 1 + len(p.fuse_runs):
        raise ValueError(f"the pipeline needs {1 + len(p.fuse_runs)} galleries (the model and its fused runs), "
                         f"got {len(galleries)}")
    n = int(np.asarray(galleries[0].vectors).shape[0])
    if any(int(np.asarray(g.vectors).shape[0]) != n for g in galleries):
        raise ValueError("every gallery must hold the same trajectories")
    timing: dict[str, float] = {}
    report: dict = {"pipeline": p.as_dict(), "queries": len(texts)}

    # 1. first stage
    tick = time.perf_counter()
    main = galleries[0]
    rewrites = None
    lists = []
    for name in p.retrievers:
        if name == "dense":
            lists.append(gallery_scores(main, texts))
        else:
            llm = tools.llm or build_llm(p.rewrite.backend, p.rewrite.settings)
            rewritten = rewrite_queries(texts, llm, action_tags=_vocabulary_names(main.model, "vocabulary"),
                                        scene_tags=_vocabulary_names(main.model, "scene_vocabulary"))
            rewrites = rewritten.texts
            report["rewrite"] = rewritten.counts()
            lists.append(gallery_scores(main, rewrites))
    lists += [gallery_scores(g, texts) for g in galleries[1:]]
    timing["encode"] = time.perf_counter() - tick
    if len(lists) > 1 and len(texts):
        names = [*p.retrievers, *(f"run {r}" for r in p.fuse_runs)]
        report["decorrelation"] = pairwise_decorrelation(dict(zip(names, lists, strict=True)))

    # 2. fusion
    tick = time.perf_counter()
    if p.fusion == "none":
        ranked = lists[0].copy()                                                           # [E, T]
    elif p.fusion == "combsum":
        ranked = combsum(lists)                                                            # [E, T]
    elif p.fusion == "rrf":
        ranked = rrf(lists, p.rrf_k)                                                       # [E, T]
    else:
        union, fused = dual_view_union(torch.from_numpy(lists[0]), torch.from_numpy(lists[1]), p.top_k)
        union, ranked = union.numpy(), fused.numpy().astype(np.float64)                    # [E, T] each
        if ranked.size:
            span = ranked.max(axis=1, keepdims=True) - ranked.min(axis=1, keepdims=True) + 1.0   # [E, 1]
            ranked = np.where(union, ranked, ranked - span)                                # outside: below the union
        report["union_size"] = union.sum(axis=1).astype(int).tolist()
    m = min(p.shortlist, n)
    heads = shortlist(ranked, m) if n and len(texts) else np.zeros((len(texts), 0), np.int64)  # [E, M]
    timing["fuse"] = time.perf_counter() - tick

    # 3. rerank
    tick = time.perf_counter()
    final = ranked.copy()
    out_heads = heads.copy()
    comparator_requests, scorer_requests, invalid, model_requests = [], [], [], []
    descriptions: list[dict[int, str]] = []
    counts = ScoreCounts()
    if p.reranker != "none" and m > 0:
        if snapshot is None:
            raise ValueError(f"the {p.reranker} reranker reads the snapshot's tracks: pass the snapshot")
        view = snapshot.model_inputs() if callable(getattr(snapshot, "model_inputs", None)) else snapshot
        ids = np.asarray([t.id for t in view.tracks], np.int64)                            # [T]
        if len(ids) != n:
            raise ValueError(f"the snapshot has {len(ids)} tracks, the galleries {n}")
        backend = None
        for e, text in enumerate(texts):
            head = heads[e]
            candidates = [int(ids[i]) for i in head]
            if p.reranker == "pointwise":
                blend = p.weights.first_stage * minmax_rows(ranked[e, head][None, :])[0]   # [M]
                asked = bad = 0
                if p.weights.vlm > 0:
                    if backend is None:
                        backend = tools.scorer or build_scorer(p.scorer.backend, p.scorer.settings)
                    term = vlm_term(backend, view, text, candidates)                       # M requests
                    counts = counts.merged(term.counts)
                    blend = blend + p.weights.vlm * minmax_rows(term.values[None, :])[0]
                    asked, bad = term.counts.requests, term.counts.invalid_results
                requests = asked
                if p.weights.itm > 0:
                    itm = _itm_term(main, view, tools, text, candidates)                   # [M]
                    blend = blend + p.weights.itm * minmax_rows(itm[None, :])[0]
                    requests += len(candidates)
                if p.weights.absolute > 0:
                    values, made, unread = _absolute_term(p.comparator, main, tools, view, text, head, candidates)
                    blend = blend + p.weights.absolute * minmax_rows(values[None, :])[0]
                    requests, bad = requests + made, bad + unread
                order = [int(head[i]) for i in np.argsort(-blend, kind="stable")]
                comparator_requests.append(0)
                scorer_requests.append(asked)
                invalid.append(bad)
                model_requests.append(requests)
            else:
                if p.comparator.kind == "pairwise-head":
                    compare, compared = _head_comparator(p.comparator, main, text, head, candidates), {}
                else:
                    compare, compared = _comparator(p.comparator, tools, view, text, candidates, backend)
                    backend = getattr(compare, "backend", backend)
                reranked, calls = pivot_promote(candidates, compare)
                position_of = dict(zip(candidates, head.tolist(), strict=True))
                order = [int(position_of[t]) for t in reranked]
                comparator_requests.append(int(calls))
                own = getattr(compare, "counts", None)
                if own is not None:
                    counts = counts.merged(own)
                scorer_requests.append(own.requests if own is not None else 0)
                invalid.append(int(compare.invalid))
                model_requests.append(int(calls) + scorer_requests[-1])
                descriptions.append(compared)
            _reassign(final[e], head, order)
            out_heads[e] = order
    timing["rerank"] = time.perf_counter() - tick
    if p.reranker != "none":
        report |= {"comparator_requests": {"per_query": comparator_requests, "total": sum(comparator_requests)},
                   "scorer_requests": {"per_query": scorer_requests, "total": sum(scorer_requests)},
                   "invalid_answers": {"per_query": invalid, "total": sum(invalid)},
                   "model_requests": {"per_query": model_requests, "total": sum(model_requests)},
                   "scorer_counts": counts.to_dict(), "shortlist": m}
    report["timing_s"] = {k: round(v, 4) for k, v in timing.items()}
    return PipelineResult(scores=final, shortlists=out_heads, report=report, rewrites=rewrites,
                          descriptions=descriptions, comparable=comparable_scores(p.fusion, lists, p.rrf_k))


def _itm_term(gallery: Gallery, view, tools: PipelineTools, text: str, candidates: list[int]) -> np.ndarray:
    """SCOUT's ScoutITM match probabilities ``[M]`` of one query's candidates, from the model's
    prepared features of the gallery (prepared once, from the feature cache, when the gallery came
    without them) and the query text."""
    model = gallery.model
    if not callable(getattr(model, "itm_text_scores", None)):
        raise ValueError(f"the itm weight needs a SCOUT model with a ScoutITM head, not {type(model).__name__}")
    if gallery.data is None:
        gallery.data = model.prepare(view, None, cache_dir=tools.cache_dir)
    return model.itm_text_scores(gallery.data, [text], [[(t, 0) for t in candidates]])[0].numpy().astype(np.float64)


def _trained_head(model):
    """The model's trained pairwise head (``ValueError`` for a model without one)."""
    if not callable(getattr(model, "trained_pairwise_head", None)):
        raise ValueError(f"the pairwise-head comparator needs an ActPair model trained with pairwise.enabled, "
                         f"not {type(model).__name__}")
    return model.trained_pairwise_head()


def _head_comparator(config: ComparatorConfig, gallery: Gallery, text: str, positions: np.ndarray,
                     candidates: list[int]) -> PairwiseHeadComparator:
    """The pairwise head of the gallery's model over the query text's embedding and the
    candidates' gallery embeddings (``positions`` in the gallery, ``candidates`` their ids)."""
    head = _trained_head(gallery.model)
    vectors = np.asarray(gallery.vectors, np.float32)[np.asarray(positions, np.int64)]        # [M, d]
    return PairwiseHeadComparator(head, encode_texts(gallery.model, [text])[0], dict(zip(candidates, vectors, strict=True)),
                                  tie_margin=config.tie_margin)


def _absolute_term(config: ComparatorConfig, gallery: Gallery, tools: PipelineTools, view, text: str,
                   positions: np.ndarray, candidates: list[int]) -> tuple[np.ndarray, int, int]:
    """One absolute score per candidate from the comparator's own model (Table 5's pointwise
    baseline): ``(values [M], requests, unreadable answers)``. ``pairwise-head``: the head's
    pointwise twin; ``vlm``: the chat VLM's one-call 0–100 score."""
    if config.kind == "pairwise-head":
        vectors = np.asarray(gallery.vectors, np.float32)[np.asarray(positions, np.int64)]    # [M, d]
        values = head_point_scores(_trained_head(gallery.model), encode_texts(gallery.model, [text])[0], vectors)
        return values, len(candidates), 0
    if config.kind != "vlm":
        raise ValueError(f"the absolute weight scores with the comparator's own model: comparator pairwise-head or "
                         f"vlm, not {config.kind!r} (its decisions already are pointwise scores)")
    if tools.comparator_backend is None:
        tools.comparator_backend = build_scorer(config.backend, config.settings)
    requests = dict(zip(candidates, score_requests(view, text, candidates), strict=True))
    judge = ChatPointJudge(ChatPairJudge(tools.comparator_backend, requests))
    values = judge.scores(text, candidates)
    return values, judge.calls, judge.invalid


def _comparator(config: ComparatorConfig, tools: PipelineTools, view, text: str, candidates: list[int], backend):
    """The comparator of one query over its candidates and, for the description comparator, the
    descriptions it compared. ``backend`` is the one built for an earlier query (or None)."""
    if config.kind == "description":
        if tools.descriptions is not None:
            texts = tools.descriptions(candidates)
        else:
            describer = backend or tools.comparator_backend or build_describer(config.backend, config.settings)
            texts = {t: description_text(r) for t, r in describe_tracks(describer, view, candidates).items()}
            backend = describer
        if tools.text_encoder is None:
            tools.text_encoder = build_text_encoder({})
        compare = DescriptionComparator(text, {t: texts[t] for t in candidates}, tools.text_encoder,
                                        tie_margin=config.tie_margin)
        compare.backend = backend
        return compare, {t: texts[t] for t in candidates}
    requests = dict(zip(candidates, score_requests(view, text, candidates), strict=True))
    backend = backend or tools.comparator_backend or build_scorer(config.backend, config.settings)
    if config.kind == "scorer":
        compare = ScorerComparator(backend, requests, tie_margin=config.tie_margin)
    else:
        compare = VLMComparator(ChatPairJudge(backend, requests), text)
    compare.backend = backend
    return compare, {}
