"""Text search over the trajectories of a snapshot with a trained retriever (DESIGN 4, 5).

**Index.** :func:`search_index_build` embeds every trajectory of a sealed snapshot with a
succeeded training run's final checkpoint and stores a FAISS inner-product index
(``models.training.index.TrajectoryIndex``, unit vectors: the score is the cosine similarity) of
the kind ``models.training.index.served_config`` gives for the gallery's size (exact below
``EXACT_MAX`` trajectories, IVF-Flat from it up) under
``VAR_DIR/search/run-<run id>/<snapshot content hash>.npz`` (ids, videos, config) and ``.faiss``,
with the vectors in id order next to it (``.vectors.npy``, memory-mapped when a search scores the
whole gallery, as fusion does). The key is the run (whose checkpoint never changes once it
succeeded) and the snapshot's content hash, so an index is built once and found again by any
process of the machine; an index stored by an older layout is rebuilt from its stored vectors.
The files are also stored under ``search/run-<run id>/<hash>/`` in the platform's store
(``workers.artefacts``): a host without the local copy fetches it (each file checked against its
stored checksum) instead of building the index again.
Each process keeps the last few loaded models and indexes (:data:`LOADED_MAX`), the FAISS files
memory-mapped, so a search after the first costs one text encoding and one index lookup.

**Search.** :func:`search` runs a retrieval pipeline (``models.retrievers.pipeline``: declared as
data, executed by ``run_pipeline``, the executor evaluation runs too) over the memory-mapped
vectors of the run (and of the runs it fuses), for the one text, and ranks. The plain pipeline
(the dense retriever alone, no fusion, no reranker) ranks with the run's index instead
(``models.training.index.GalleryRanker``): the exact ranking below ``EXACT_MAX`` trajectories, the
IVF index's above (the report's ``first_stage`` says which answered):

- ``level="trajectory"``: the top ``k`` trajectories by the pipeline's final score (the cosine
  similarity without fusion or reranking);
- ``level="video"``: the top ``k`` videos scored by their best trajectory (OCVR's
  ``max_{r ∈ pool(V)} s(e, r)``), each with that trajectory.

``pipeline`` gives the pipeline as JSON; without it the older arguments build one
(:func:`search_pipeline`): ``fuse_with`` fuses other succeeded runs scored on the same snapshot
with CombSUM (``models.retrievers.rerank.combsum``); ``rerank`` pivot-promotes the first
``RERANK_DEPTH`` (10) trajectories (ActPair Algorithm 1) with the run's trained pairwise head
where it has one (an ActPair run trained with ``pairwise.enabled``: the comparator of ActPair's
Table 5), else with the comparator that prefers the candidate whose describer description is
closer to the query in the frozen MiniLM text space (differences within ``RERANK_TIE_MARGIN``
are ties; it compares two per-candidate values). Every reranking, the catalogue's included, is
``run_pipeline``'s: search and evaluation share one reranker. The response carries the pipeline,
its report (comparator and scorer requests, invalid answers, rewrite requests) and the number of
comparator calls.

**Modes** (DESIGN 4.4, no answer key in the inputs). ``mode="retrieval"``, the default, reads
model-side inputs only: the run's checkpoint, the trajectories' pixels and boxes and the query
text. A reranked trajectory's description is a model output, the describer backend's reading of
its own frames and boxes (:data:`SEARCH_DESCRIBER`, the embedded heuristic describer: colours and
motion), computed on demand and kept in memory per snapshot content hash. Nothing the annotation
app approved (descriptions, facts, predicates, votes, relation labels) reaches it, so its
rankings are what an evaluation of the same pipeline would measure. ``mode="catalogue"`` is the
browse-the-catalogue search for people: the head is always reranked, by each trajectory's
approved description (``D_r^H``) where it has one (the describer's elsewhere), through the same
executor with the description comparator fed those texts; each hit says which it compared. It
reads the answer key: evaluation and experiments never call it.

Results carry the trajectory id, its video id and the score (cosine, or the fused CombSUM score),
with per-stage timings in milliseconds.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from django.conf import settings

from annotation.benchmark.services.snapshots import relation_snapshot_load
from common.errors import ApplicationError, ConflictError
from models.backends.encoders import build_text_encoder
from models.backends.vlm import build_describer, build_scorer
from models.retrievers.described import describe_tracks, description_text
from models.retrievers.pipeline import Gallery, PipelineTools, RetrievalPipeline, run_pipeline
from models.retrievers.pipeline import encode_texts as pipeline_encode_texts
from models.retrievers.rerank import top_positions
from models.training.evaluation import embed_snapshot
from models.training.index import (
    FORMAT,
    GalleryRanker,
    IndexConfig,
    TrajectoryIndex,
    faiss_path,
    served_config,
)
from models.training.trainer import CheckpointIncompatible, load_model
from workers.answer_guard import reranker_proposer_check
from workers.artefacts import checkpoint_local, index_fetch, index_store
from workers.folders import feature_cache_dir
from workers.models import RunStatus, TrainingRun
from workers.pipelines import pipeline_resolve
from workers.selectors import approved_description_texts

LEVELS = ("trajectory", "video")
MODES = ("retrieval", "catalogue")               # leak-free default; browse the approved catalogue
SEARCH_DESCRIBER = ("heuristic", {})             # describer backend and settings of the retrieval mode
MAX_K = 1000                                     # most results one search returns
MAX_TEXT = 1000                                  # longest query text, characters
MAX_FUSED = 8                                    # most runs fused with the searched one
RERANK_DEPTH = 10                                # first-stage results reranked (ActPair's top-M)
RERANK_TIE_MARGIN = 0.01                         # description cosines closer than this are a tie
LOADED_MAX = 4                                   # (run, snapshot) pairs kept loaded per process
DESCRIPTIONS_MAX = 20000                         # describer descriptions kept in memory per process


@dataclass
class _Loaded:
    """A run's model and its index over one snapshot, loaded in this process."""

    model: object                                # the retriever, in eval mode on the CPU
    ranker: GalleryRanker                        # the index over the vectors (its FAISS file memory-mapped)
    prepared: object | None = None               # the model's prepared inputs, once a pipeline stage needed them

    @property
    def ids(self) -> np.ndarray:                 # [T] trajectory ids, ascending
        return self.ranker.ids

    @property
    def videos(self) -> np.ndarray:              # [T] the video of each
        return self.ranker.videos

    @property
    def vectors(self) -> np.ndarray:             # [T, d] unit embeddings in id order (memory-mapped)
        return self.ranker.vectors


_loaded: OrderedDict[tuple[int, str], _Loaded] = OrderedDict()
_descriptions: OrderedDict[tuple[str, str, int], str] = OrderedDict()  # (snapshot hash, describer, id) -> text
_lock = threading.Lock()
_tools: dict[str, object] = {}
# Backends built from pipelines' settings (scorers, comparators), least recently used first.
_built: OrderedDict[str, object] = OrderedDict()
MAX_BACKENDS = 8


def search_index_path(*, run: TrainingRun, snapshot) -> Path:
    return Path(settings.VAR_DIR) / "search" / f"run-{run.pk}" / f"{snapshot.content_sha256}.npz"


def _require_searchable(run: TrainingRun) -> None:
    if run.status != RunStatus.SUCCEEDED:
        raise ConflictError(f"training run {run.pk} is {run.status}; only a succeeded run can be searched",
                            code="run_not_finished")


def _sealed(snapshot) -> None:
    if snapshot.sealed_at is None:
        raise ConflictError(f"snapshot {snapshot.pk} is not sealed", code="snapshot_not_sealed")


def _load_model(run: TrainingRun):
    try:
        model, _ = load_model(checkpoint_local(run), device="cpu")
    except FileNotFoundError as exc:
        raise ConflictError(f"training run {run.pk} has no checkpoint here ({exc})",
                            code="checkpoint_missing") from None
    except CheckpointIncompatible as exc:
        raise ConflictError(f"training run {run.pk}: {exc}", code="checkpoint_incompatible") from None
    return model


def search_index_save(*, run: TrainingRun, snapshot, embeddings: np.ndarray, ids: np.ndarray,
                      video_ids: np.ndarray) -> Path:
    """Store the index of ``run`` over ``snapshot``: unit ``embeddings`` ``[T, d]`` with their
    trajectory and video ids ``[T]``. Writes the FAISS index of ``served_config``'s kind
    (``<hash>.faiss`` and ``<hash>.npz``), a description (``<hash>.json``, with the index config)
    and the vectors in ascending id order (``<hash>.vectors.npy``, memory-mapped by searches that
    score the whole gallery), each atomically; the vectors go last, so a reader that finds them
    finds the rest."""

    ids = np.asarray(ids, np.int64)
    order = np.argsort(ids, kind="stable")
    vectors = np.ascontiguousarray(np.asarray(embeddings, np.float32)[order])                  # [T, d]
    path = search_index_path(run=run, snapshot=snapshot)
    _index_write(run=run, snapshot=snapshot, path=path, vectors=vectors, ids=ids[order],
                 videos=np.asarray(video_ids, np.int64)[order])
    _write_atomic(_vectors_path(path), lambda fh: np.save(fh, vectors))
    index_store(run_id=run.pk, snapshot_sha256=snapshot.content_sha256, files=_index_files(path))
    with _lock:
        _loaded.pop((run.pk, snapshot.content_sha256), None)
    return path


def _index_files(path: Path) -> list[Path]:
    """The files of the index at ``path``, the vectors (what a reader looks for) last."""
    return [faiss_path(path), path, path.with_suffix(".json"), _vectors_path(path)]


def _index_write(*, run: TrainingRun, snapshot, path: Path, vectors: np.ndarray, ids: np.ndarray,
                 videos: np.ndarray) -> IndexConfig:
    """Build and save the index of ``vectors`` ``[T, d]`` (ascending ``ids``, their ``videos``)
    and its description; returns the index config."""
    config = served_config(n=int(vectors.shape[0]), dim=int(vectors.shape[1]))
    index = TrajectoryIndex.build(vectors, ids, videos, config)
    index.save(path)
    _write_atomic(path.with_suffix(".json"), lambda fh: fh.write(json.dumps({
        "run": run.pk, "snapshot": snapshot.pk, "snapshot_sha256": snapshot.content_sha256,
        "model_kind": run.model_kind, "steps": run.steps_done, "n": len(index), "dim": index.config.dim,
        "format": FORMAT, "index": asdict(config)}).encode()))
    return config


def _index_current(path: Path, vectors: np.ndarray) -> bool:
    """Whether the index stored at ``path`` is of this layout and of the kind its vectors call for."""
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
    except (OSError, ValueError):
        return False
    kind = served_config(n=int(vectors.shape[0]), dim=int(vectors.shape[1])).kind
    return meta.get("format") == FORMAT and meta.get("index", {}).get("kind") == kind and path.is_file()


def _vectors_path(path: Path) -> Path:
    return path.with_name(path.stem + ".vectors.npy")


def _write_atomic(path: Path, write) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def search_index_build(*, run: TrainingRun, snapshot, force: bool = False) -> dict:
    """Build the index of ``run`` over ``snapshot`` unless it is on disk already (or ``force``).

    Returns ``{"path", "built", "n", "dim", "seconds"}``. Files are written atomically, so two
    processes building at once both end with a complete, identical index."""
    _require_searchable(run)
    _sealed(snapshot)
    path = search_index_path(run=run, snapshot=snapshot)
    began = time.perf_counter()
    if not force and not _vectors_path(path).is_file():                 # stored by another host: fetch a copy
        index_fetch(run_id=run.pk, snapshot_sha256=snapshot.content_sha256, files=_index_files(path))
    if path.is_file() and _vectors_path(path).is_file() and not force:
        vectors = np.load(_vectors_path(path), mmap_mode="r")                                  # [T, d]
        if not _index_current(path, vectors):                  # an older layout: a new index of the same vectors
            with np.load(path, allow_pickle=False) as stored:
                ids, videos = stored["ids"].astype(np.int64), stored["videos"].astype(np.int64)
            _index_write(run=run, snapshot=snapshot, path=path, vectors=vectors, ids=ids, videos=videos)
            index_store(run_id=run.pk, snapshot_sha256=snapshot.content_sha256, files=_index_files(path))
            with _lock:
                _loaded.pop((run.pk, snapshot.content_sha256), None)
        return {"path": str(path), "built": False, "n": int(vectors.shape[0]), "dim": int(vectors.shape[1]),
                "seconds": round(time.perf_counter() - began, 3)}
    data = relation_snapshot_load(snapshot=snapshot)
    model = _load_model(run)
    _, v, _ = embed_snapshot(model, data, cache_dir=feature_cache_dir())                   # [T, d]
    search_index_save(run=run, snapshot=snapshot, embeddings=v,
                      ids=np.asarray([t.id for t in data.tracks], np.int64),
                      video_ids=np.asarray([t.video_id for t in data.tracks], np.int64))
    return {"path": str(path), "built": True, "n": int(v.shape[0]), "dim": int(v.shape[1]),
            "seconds": round(time.perf_counter() - began, 3)}


def _get_loaded(run: TrainingRun, snapshot) -> _Loaded:
    key = (run.pk, snapshot.content_sha256)
    with _lock:
        if key in _loaded:
            _loaded.move_to_end(key)
            return _loaded[key]
    search_index_build(run=run, snapshot=snapshot)
    path = search_index_path(run=run, snapshot=snapshot)
    vectors = np.load(_vectors_path(path), mmap_mode="r")                                      # [T, d] by id
    try:
        ranker = GalleryRanker(vectors, TrajectoryIndex.load(path, mmap=True))
    except ValueError as exc:
        raise ConflictError(f"the search index at {path} is inconsistent ({exc}); build it again",
                            code="index_inconsistent") from None
    loaded = _Loaded(model=_load_model(run), ranker=ranker)
    with _lock:
        _loaded[key] = loaded
        while len(_loaded) > LOADED_MAX:
            _loaded.popitem(last=False)
    return loaded


def encode_texts(model, texts: list[str]) -> np.ndarray:
    """``models.retrievers.pipeline.encode_texts`` (a model without a text path is a 409)."""
    try:
        return pipeline_encode_texts(model, texts)
    except ValueError as exc:
        raise ConflictError(str(exc), code="no_text_path") from None


def _ranked(top, ids: np.ndarray, videos: np.ndarray, k: int, level: str) -> list[tuple[int, int, float]]:
    """(trajectory, video, score) of the ``k`` best trajectories, or of the ``k`` best videos each
    with its best trajectory (ties to the lower trajectory id). ``top(depth)`` gives the positions
    of the ``depth`` best trajectories, best first, and their scores; a video search looks at the
    best trajectories first and widens until ``k`` videos are found."""
    n = len(ids)
    if level == "trajectory":
        return [(int(ids[i]), int(videos[i]), float(s)) for i, s in zip(*top(min(k, n) or 1), strict=True)]
    depth = min(n, max(4 * k, 64))
    while True:
        out, seen = [], set()
        for i, s in zip(*top(depth or 1), strict=True):
            v = int(videos[i])
            if v not in seen:
                seen.add(v)
                out.append((int(ids[i]), v, float(s)))
                if len(out) == k:
                    return out
        if depth >= n:
            return out
        depth = min(n, depth * 2)


def _plain(p: RetrievalPipeline) -> bool:
    """Whether the pipeline is the dense retriever alone (its ranking is the first stage's)."""
    return tuple(p.retrievers) == ("dense",) and p.fusion == "none" and not p.fuse_runs and p.reranker == "none"


DESCRIPTION_COMPARATOR = {"kind": "description", "backend": SEARCH_DESCRIBER[0], "settings": SEARCH_DESCRIBER[1],
                          "tie_margin": RERANK_TIE_MARGIN}


def has_pairwise_head(run: TrainingRun) -> bool:
    """Whether the run trained ActPair's pairwise head (``model.pairwise.enabled``)."""
    model = (run.config or {}).get("model") or {}
    return run.model_kind == "actpair" and bool((model.get("pairwise") or {}).get("enabled"))


def search_pipeline(*, fuse_with: list[TrainingRun], rerank: bool, pairwise_head: bool = False) -> dict:
    """The pipeline of the ``fuse_with`` / ``rerank`` arguments: CombSUM over the runs, and
    pivot-promote over the first :data:`RERANK_DEPTH` with the run's pairwise head
    (``pairwise_head``) or else the describer-description comparator (:data:`SEARCH_DESCRIBER`,
    ties within :data:`RERANK_TIE_MARGIN`)."""
    return {"fuse_runs": [r.pk for r in fuse_with], "fusion": "combsum" if fuse_with else "none",
            "shortlist": RERANK_DEPTH, "top_k": max(RERANK_DEPTH, 100),
            "reranker": "pairwise" if rerank else "none",
            "comparator": {"kind": "pairwise-head"} if pairwise_head else DESCRIPTION_COMPARATOR}


def _pipeline(pipeline: dict | None, run: TrainingRun, fuse_with: list[TrainingRun], rerank: bool
              ) -> tuple[RetrievalPipeline, dict]:
    """The pipeline to run and its record (``workers.pipelines``)."""
    if pipeline is not None and (fuse_with or rerank):
        raise ApplicationError("give either a pipeline or fuse_with / rerank, not both", code="invalid_pipeline")
    if pipeline is None:
        pipeline = search_pipeline(fuse_with=fuse_with, rerank=rerank, pairwise_head=rerank and has_pairwise_head(run))
    return pipeline_resolve(pipeline)


def catalogue_pipeline(p: RetrievalPipeline) -> RetrievalPipeline:
    """The catalogue mode's pipeline: ``p``'s first stage, then pivot-promote over the first
    :data:`RERANK_DEPTH` with the description comparator (fed the catalogue's texts)."""
    return RetrievalPipeline.from_dict({**p.as_dict(), "reranker": "pairwise", "shortlist": min(RERANK_DEPTH, p.top_k),
                                        "comparator": DESCRIPTION_COMPARATOR})


def _fused_runs(p: RetrievalPipeline, run: TrainingRun, given: list[TrainingRun]) -> list[TrainingRun]:
    if len(p.fuse_runs) > MAX_FUSED:
        raise ApplicationError(f"at most {MAX_FUSED} runs can be fused", code="invalid_fuse_with")
    if run.pk in p.fuse_runs:
        raise ApplicationError("fuse_with must name other runs, each once", code="invalid_fuse_with")
    by_pk = {r.pk: r for r in given} | {r.pk: r for r in TrainingRun.objects.filter(pk__in=p.fuse_runs)}
    missing = [pk for pk in p.fuse_runs if pk not in by_pk]
    if missing:
        raise ApplicationError(f"pipeline.fuse_runs names unknown training runs {missing}", code="invalid_pipeline")
    return [by_pk[pk] for pk in p.fuse_runs]


def _pipeline_tools(p: RetrievalPipeline, snapshot) -> PipelineTools:
    """This process's cached backends for the pipeline's stages (the describer's descriptions of
    :data:`SEARCH_DESCRIBER` come from :func:`model_descriptions`' cache)."""
    tools = PipelineTools(cache_dir=feature_cache_dir())
    c = p.comparator
    if p.reranker == "pairwise" and c.kind == "description":
        tools.text_encoder = _text_encoder()
        if (c.backend, c.settings) == SEARCH_DESCRIBER:
            tools.descriptions = lambda ids: model_descriptions(snapshot, ids)
    elif c.kind != "pairwise-head" and (p.reranker == "pairwise" or (p.reranker == "pointwise"
                                                                      and p.weights.absolute > 0)):
        tools.comparator_backend = _cached("scorer", c.backend, c.settings, build_scorer)
    if p.reranker == "pointwise" and p.weights.vlm > 0:
        tools.scorer = _cached("scorer", p.scorer.backend, p.scorer.settings, build_scorer)
    return tools


def search(*, run: TrainingRun, text: str, snapshot=None, k: int = 10, level: str = "trajectory",
           fuse_with: list[TrainingRun] | None = None, rerank: bool = False, mode: str = "retrieval",
           pipeline: dict | None = None) -> dict:
    """Rank the trajectories (or videos) of ``snapshot`` for ``text`` (the module docstring).

    ``snapshot`` defaults to the run's evaluation snapshot (its training snapshot when it had
    none). ``pipeline`` (``models.retrievers.pipeline.RetrievalPipeline`` as JSON) or the older
    ``fuse_with`` / ``rerank`` say what runs (:func:`search_pipeline`); the one executor,
    ``run_pipeline``, is what evaluation runs too. ``mode="retrieval"`` (default) reads
    model-side inputs only; ``mode="catalogue"`` browses the approved catalogue (its first stage
    the pipeline's, then always reranked by approved descriptions; never for evaluation).
    Refused with 400 for bad arguments (an invalid pipeline included), 409 for a run that has not
    succeeded or has no checkpoint on this machine."""
    began = time.perf_counter()
    text = (text or "").strip()
    if not text or len(text) > MAX_TEXT:
        raise ApplicationError(f"text must be 1 to {MAX_TEXT} characters", code="invalid_text")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ApplicationError(f"k must be an integer in 1..{MAX_K}", code="invalid_k")
    if level not in LEVELS:
        raise ApplicationError(f"level must be one of {', '.join(LEVELS)}", code="invalid_level")
    if mode not in MODES:
        raise ApplicationError(f"mode must be one of {', '.join(MODES)}", code="invalid_mode")
    fuse_with = list(fuse_with or [])
    if len(fuse_with) > MAX_FUSED:
        raise ApplicationError(f"at most {MAX_FUSED} runs can be fused", code="invalid_fuse_with")
    if len({r.pk for r in fuse_with} | {run.pk}) != len(fuse_with) + 1:
        raise ApplicationError("fuse_with must name other runs, each once", code="invalid_fuse_with")
    p, record = _pipeline(pipeline, run, fuse_with, bool(rerank) and mode == "retrieval")
    if mode == "catalogue" and p.reranker != "none":
        raise ApplicationError("the catalogue mode reranks by approved descriptions; its pipeline takes no reranker",
                               code="invalid_pipeline")
    fuse_with = _fused_runs(p, run, fuse_with)
    _require_searchable(run)
    for other in fuse_with:
        _require_searchable(other)
    if snapshot is None:
        snapshot = run.eval_snapshot if run.eval_snapshot_id else run.snapshot
    _sealed(snapshot)
    reranker_proposer_check(snapshot, record)
    timing: dict[str, float] = {}

    tick = time.perf_counter()
    loaded = [_get_loaded(r, snapshot) for r in [run, *fuse_with]]
    main = loaded[0]
    for item in loaded[1:]:
        if not np.array_equal(item.ids, main.ids):
            raise ConflictError("the fused runs' indexes hold different trajectories", code="gallery_mismatch")
    sources: dict[int, str] = {}
    tools = None
    if mode == "catalogue":
        p, tools = catalogue_pipeline(p), PipelineTools(text_encoder=_text_encoder())
        tools.descriptions = lambda ids: _catalogue_texts(snapshot, ids, sources)
    data = relation_snapshot_load(snapshot=snapshot).model_inputs() if p.reranker != "none" else None
    timing["load"] = time.perf_counter() - tick
    if _plain(p):
        ranked, report = _first_stage(main, text, k, level)
        timing |= {"encode": report["timing_s"]["encode"], "search": report["timing_s"]["fuse"]}
        calls, descriptions = 0, {}
    else:
        try:
            galleries = [Gallery(item.model, item.vectors, item.prepared) for item in loaded]
            result = run_pipeline(p, galleries, data, [text], tools=tools or _pipeline_tools(p, snapshot))
            for item, gallery in zip(loaded, galleries, strict=True):
                item.prepared = gallery.data             # kept with the loaded run: the ITM term prepares once
        except ValueError as exc:
            raise ApplicationError(f"the pipeline cannot run: {exc}", code="invalid_pipeline") from None
        stages = result.report["timing_s"]
        timing |= {"encode": stages["encode"], "search": stages["fuse"]}
        if p.reranker != "none":
            timing["rerank"] = stages["rerank"]
        final = result.scores[0]                                                          # [T]

        def top(n: int) -> tuple[np.ndarray, np.ndarray]:
            positions = top_positions(final, n)
            return positions, final[positions]

        ranked = _ranked(top, main.ids, main.videos, k, level)
        report = {k_: v for k_, v in result.report.items() if k_ != "pipeline"}
        calls = int(result.report.get("comparator_requests", {}).get("total", 0))
        descriptions = result.descriptions[0] if result.descriptions else {}
    sources = sources or dict.fromkeys(descriptions, "describer")
    timing["total"] = time.perf_counter() - began
    results = [{"rank": i + 1, "trajectory": t, "video": v, "score": s,
                **({"description": descriptions[t], "description_source": sources[t]} if t in descriptions else {})}
               for i, (t, v, s) in enumerate(ranked)]
    return {"run": run.pk, "snapshot": snapshot.pk, "level": level, "k": k, "text": text, "mode": mode,
            "fused_runs": [r.pk for r in fuse_with], "score": {"none": "cosine"}.get(p.fusion, p.fusion),
            "reranked": p.reranker != "none" or mode == "catalogue", "comparator_calls": calls,
            "pipeline": record, "report": report, "results": results,
            "timing_ms": {name: round(1000 * seconds, 2) for name, seconds in timing.items()}}


def _first_stage(loaded: _Loaded, text: str, depth: int, level: str) -> tuple[list[tuple[int, int, float]], dict]:
    """The plain pipeline's ranking (:func:`_ranked`) from the run's index, and the report
    ``run_pipeline`` gives for it, with ``first_stage``: the index kind that answered and its
    ``nprobe`` (``"exact"`` where the exact path did)."""
    tick = time.perf_counter()
    try:
        query = pipeline_encode_texts(loaded.model, [text])[0]                             # [d]
    except ValueError as exc:
        raise ApplicationError(f"the pipeline cannot run: {exc}", code="invalid_pipeline") from None
    encoded = time.perf_counter() - tick
    tick = time.perf_counter()
    answered = []

    def top(n: int) -> tuple[np.ndarray, np.ndarray]:
        positions, scores, by_index = loaded.ranker.top(query, n)
        answered.append(by_index)
        return positions, scores

    ranked = _ranked(top, loaded.ids, loaded.videos, depth, level)
    searched = time.perf_counter() - tick
    config = loaded.ranker.index.config
    first = {"index": config.kind, "nprobe": config.nprobe} if all(answered) else {"index": "exact"}
    timing = {"encode": round(encoded, 4), "fuse": round(searched, 4), "rerank": 0.0}
    return ranked, {"queries": 1, "timing_s": timing, "first_stage": first}


# -- reranking ----------------------------------------------------------------------------------------
def _text_encoder():
    with _lock:
        if "text" not in _tools:

            _tools["text"] = build_text_encoder({})
        return _tools["text"]


def _cached(kind: str, backend: str, settings: dict, build):
    """One backend per (kind, name, settings) in this process (scorers keep per-trajectory caches),
    at most :data:`MAX_BACKENDS` of them: the least recently used is dropped first."""
    key = f"{kind}:{backend}:{json.dumps(settings, sort_keys=True, default=str)}"
    with _lock:
        if key not in _built:
            _built[key] = build(backend, settings)
            while len(_built) > MAX_BACKENDS:
                _built.popitem(last=False)
        _built.move_to_end(key)
        return _built[key]


def _describer():
    with _lock:
        if "describer" not in _tools:

            _tools["describer"] = build_describer(*SEARCH_DESCRIBER)
        return _tools["describer"]


def model_descriptions(snapshot, trajectory_ids: list[int]) -> dict[int, str]:
    """A sentence pair per trajectory from the describer backend run on its frames and boxes
    (:data:`SEARCH_DESCRIBER`; ``""`` where it failed), kept in memory per snapshot content hash
    and trajectory. Model outputs only: no approved record is read (DESIGN 4.4)."""
    name = SEARCH_DESCRIBER[0]
    out: dict[int, str] = {}
    with _lock:
        for t in trajectory_ids:
            key = (snapshot.content_sha256, name, t)
            if key in _descriptions:
                _descriptions.move_to_end(key)
                out[t] = _descriptions[key]
    missing = [t for t in trajectory_ids if t not in out]
    if not missing:
        return out
    data = relation_snapshot_load(snapshot=snapshot).model_inputs()
    for t, result in describe_tracks(_describer(), data, missing).items():
        out[t] = description_text(result)
        with _lock:
            _descriptions[(snapshot.content_sha256, name, t)] = out[t]
            while len(_descriptions) > DESCRIPTIONS_MAX:
                _descriptions.popitem(last=False)
    return out


def catalogue_descriptions(snapshot, trajectory_ids: list[int]) -> tuple[dict[int, str], dict[int, str]]:
    """The catalogue's reading (``mode="catalogue"`` only; it is the answer key): each
    trajectory's approved description (``D_r^H``) where it has one, else the describer's. Returns
    the texts and where each came from (``"approved"`` or ``"describer"``)."""
    approved = approved_description_texts(trajectory_ids=trajectory_ids)
    described = model_descriptions(snapshot, [t for t in trajectory_ids if t not in approved])
    texts = {t: approved[t] if t in approved else described[t] for t in trajectory_ids}
    return texts, {t: "approved" if t in approved else "describer" for t in trajectory_ids}


def _catalogue_texts(snapshot, trajectory_ids: list[int], sources: dict[int, str]) -> dict[int, str]:
    """:func:`catalogue_descriptions` as the description comparator reads them (``""`` for an
    empty one), each trajectory's source recorded in ``sources``."""
    texts, found = catalogue_descriptions(snapshot, trajectory_ids)
    sources.update(found)
    return texts
