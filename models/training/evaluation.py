"""Evaluating a retriever on a relation snapshot (DESIGN 4.3, 4.4): embeddings and scores from the
snapshot's model inputs only, the three protocols (T2Traj, Traj2T, OCVR) and the random baseline.

:func:`evaluate` returns the figures; with ``per_query=True`` it also returns, per protocol, each
scored ranking row's values (``models.training.metrics.protocol_rows``), which experiments pair
across variants for their bootstrap intervals.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from models.retrievers.pipeline import Gallery, PipelineResult, PipelineSetup, run_pipeline
from models.training.metrics import evaluate_ocvr, evaluate_t2traj, evaluate_traj2t, protocol_rows
from models.training.snapshot import RelationSnapshotData

__all__ = ["embed_snapshot", "evaluate", "evaluate_rows", "random_baseline", "score_snapshot", "snapshot_pipeline",
           "snapshot_rows"]


# -- embeddings and scores -----------------------------------------------------------------------------------------
@torch.inference_mode()
def embed_snapshot(model: torch.nn.Module, snapshot: RelationSnapshotData, *,
                   cache_dir: str | None = None, chunk: int = 256) -> tuple[np.ndarray, np.ndarray, object]:
    """Unit query and trajectory embeddings ``[E, d]``, ``[T, d]`` of a snapshot (model in eval mode).

    The model prepares :meth:`RelationSnapshotData.model_inputs` of the snapshot (pixels, boxes
    and query texts; DESIGN 4.4), so the embeddings cannot depend on predicates or relations: there
    is no way to hand it data prepared from the whole snapshot. Features come from ``cache_dir``
    when they were computed before. Also returns the prepared model inputs."""
    was_training = model.training
    model.eval()
    try:
        data = model.prepare(snapshot.model_inputs(), None, cache_dir=cache_dir)
        qids = [q.id for q in snapshot.queries]
        records = [(t.id, 0) for t in snapshot.tracks]
        q = [model.encode_queries(data, qids[i:i + chunk]).float().cpu() for i in range(0, len(qids), chunk)]
        v = [model.encode_tracks(data, records[i:i + chunk]).float().cpu() for i in range(0, len(records), chunk)]
    finally:
        model.train(was_training)
    return torch.cat(q).numpy(), torch.cat(v).numpy(), data


def score_snapshot(model: torch.nn.Module, snapshot: RelationSnapshotData, *,
                   cache_dir: str | None = None, pipeline=None) -> np.ndarray:
    """The scores ``[E, T]`` evaluation ranks: ``model.score`` of every query against every
    trajectory, from :func:`embed_snapshot` over the snapshot's model inputs (DESIGN 4.4); with a
    ``pipeline`` (``models.retrievers.pipeline``), that pipeline's final scores
    (:func:`snapshot_pipeline`)."""
    if pipeline is not None:
        return snapshot_pipeline(model, snapshot, pipeline, cache_dir=cache_dir).scores
    q, v, _ = embed_snapshot(model, snapshot, cache_dir=cache_dir)
    with torch.inference_mode():
        return model.score(torch.from_numpy(q).to(_model_device(model)),
                           torch.from_numpy(v).to(_model_device(model))).float().cpu().numpy()  # [E, T]


def snapshot_pipeline(model: torch.nn.Module, snapshot: RelationSnapshotData, pipeline, *,
                      cache_dir: str | None = None) -> PipelineResult:
    """``models.retrievers.pipeline.run_pipeline`` over the snapshot's query texts, the galleries
    being :func:`embed_snapshot`'s trajectory embeddings of the model and of the pipeline's fused
    models (``pipeline``: a ``RetrievalPipeline``, its dict, or a ``PipelineSetup``)."""
    setup = PipelineSetup.of(pipeline)
    inputs = snapshot.model_inputs()
    galleries = []
    for m in (model, *setup.fused):
        _, vectors, data = embed_snapshot(m, inputs, cache_dir=cache_dir)
        galleries.append(Gallery(m, vectors, data))
    return run_pipeline(setup.pipeline, galleries, inputs, [q.text for q in inputs.queries], tools=setup.tools)


def evaluate(model: torch.nn.Module, snapshot: RelationSnapshotData, *, cache_dir: str | None = None,
             pipeline=None) -> dict:
    """T2Traj, Traj2T and OCVR of ``model`` on ``snapshot`` (verified binary labels only; pseudo-labels
    never count), and the random T2Traj baseline (:func:`random_baseline`; its ``R@1`` is the
    ``mean_e 1/|pool(V_e)|`` of DESIGN 4.3, T2Traj's ``random_R@1``). The scores are
    :func:`score_snapshot`'s; the labels are read only to rank them into figures. With a
    ``pipeline`` the scores are its final scores and its report (requests per query, invalid
    answers) comes back under ``"pipeline"``; Traj2T, which ranks queries against each other, then
    reads the pipeline's ``comparable`` scores (its final ones are scaled per query)."""
    return evaluate_rows(model, snapshot, cache_dir=cache_dir, pipeline=pipeline)[0]


def evaluate_rows(model: torch.nn.Module, snapshot: RelationSnapshotData, *, cache_dir: str | None = None,
                  pipeline=None) -> tuple[dict, dict]:
    """:func:`evaluate`'s figures and, from the same scores, the per-row values of every protocol
    (:func:`snapshot_rows`): what an experiment pairs across variants and seeds."""
    report = None
    if pipeline is not None:
        result = snapshot_pipeline(model, snapshot, pipeline, cache_dir=cache_dir)
        sim, columns, report = result.scores, result.comparable, result.report
    else:
        sim = columns = score_snapshot(model, snapshot, cache_dir=cache_dir)    # [E, T]
    metrics = _protocols(sim, snapshot, columns) | {"random": random_baseline(snapshot)}
    if report is not None:
        metrics["pipeline"] = report
    return metrics, snapshot_rows(sim, snapshot, traj2t_sim=columns)


def snapshot_rows(sim: np.ndarray, snapshot: RelationSnapshotData, *, traj2t_sim: np.ndarray | None = None) -> dict:
    """``models.training.metrics.protocol_rows`` of ``sim`` ``[E, T]`` with each row named by its id:
    ``"id"`` holds query ids (T2Traj, OCVR) or trajectory ids (Traj2T) in place of row indices,
    so runs of two models on the same snapshot pair row by row whatever their order. Traj2T ranks
    ``traj2t_sim`` when given (a pipeline's scores comparable across queries)."""
    relation, _, _ = snapshot.matrix(include_pseudo=False)                          # [E, T]
    track_video = np.asarray([t.video_id for t in snapshot.tracks], np.int64)      # [T]
    query_video = np.asarray([q.video_id for q in snapshot.queries], np.int64)     # [E]
    rows = protocol_rows(sim, relation, track_video, query_video, traj2t_sim=traj2t_sim)
    names = {"t2traj": [q.id for q in snapshot.queries], "traj2t": [t.id for t in snapshot.tracks],
             "ocvr": [q.id for q in snapshot.queries]}
    return {task: {"id": [int(names[task][i]) for i in values.pop("row")], **values}
            for task, values in rows.items()}


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(iter(model.parameters())).device


def _protocols(sim: np.ndarray, snapshot: RelationSnapshotData, columns: np.ndarray) -> dict:
    """T2Traj and OCVR rank each query's row of ``sim``; Traj2T ranks queries for a trajectory, so it
    reads ``columns``, scores on one scale for every query (DESIGN 4.3)."""
    relation, _, _ = snapshot.matrix(include_pseudo=False)                          # [E, T]
    track_video = np.asarray([t.video_id for t in snapshot.tracks], np.int64)      # [T]
    query_video = np.asarray([q.video_id for q in snapshot.queries], np.int64)     # [E]
    return {"t2traj": evaluate_t2traj(sim, relation, track_video, query_video),
            "traj2t": evaluate_traj2t(columns, relation, track_video, query_video),
            "ocvr": evaluate_ocvr(sim, relation, track_video, query_video)}


def random_baseline(snapshot: RelationSnapshotData) -> dict:
    """The random T2Traj baseline (percent) over the queries T2Traj scores (those with a verified
    match in their video's pool).

    ``R@k`` and ``mAP`` are DESIGN 4.3's random baseline: a uniformly random ranking of the video's
    whole frozen pool (``|pool(V_e)|`` trajectories) with one relevant item, so
    ``R@1 = mean_e 1/|pool(V_e)|`` (``evaluate_t2traj``'s ``random_R@1``), ``R@k = mean_e
    min(k, |pool|)/|pool|`` and ``mAP = mean_e H_|pool| / |pool|`` (``H_n`` the harmonic number).

    ``labelled_R@k`` and ``labelled_mAP`` are the exact expectations of ``evaluate_t2traj``'s own
    figures under a uniformly random ranking, given the labels: ⊥ items leave the gallery, so a
    query ranks its ``N`` binary-labelled pool items of which ``R`` are relevant,
    ``E[R@k] = 1 - C(N-R, k) / C(N, k)`` and ``E[AP] = H_N / N + (R - 1)(N - H_N) / (N (N - 1))``
    (the chance term of each relevant item's own rank plus that of each other relevant item ranked
    above it). They equal the contract figures when every pool item is labelled and one matches.
    """
    relation, _, _ = snapshot.matrix(include_pseudo=False)
    track_video = np.asarray([t.video_id for t in snapshot.tracks])
    ks = (1, 3, 5, 10)
    out = {f"R@{k}": [] for k in ks} | {"mAP": []} | {f"labelled_R@{k}": [] for k in ks} | {"labelled_mAP": []}

    def harmonic(n: int) -> float:
        return sum(1.0 / j for j in range(1, n + 1))

    for i, q in enumerate(snapshot.queries):
        row = relation[i][track_video == q.video_id]
        pool, n, r = len(row), int((row != -1).sum()), int((row == 1).sum())
        if r == 0:
            continue
        for k in ks:
            out[f"R@{k}"].append(min(k, pool) / pool)
            out[f"labelled_R@{k}"].append(1.0 - (math.comb(n - r, k) / math.comb(n, k) if k <= n else 0.0))
        out["mAP"].append(harmonic(pool) / pool)
        h = harmonic(n)
        out["labelled_mAP"].append(h / n + ((r - 1) * (n - h) / (n * (n - 1)) if n > 1 else 0.0))
    n_queries = len(out["mAP"])
    return {k: (100.0 * float(np.mean(v)) if v else math.nan) for k, v in out.items()} | {"n_queries": n_queries}
