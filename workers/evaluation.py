"""Evaluation runs (DESIGN 2.10, 4.3): a model's retrieval figures on a sealed relation snapshot.

An evaluation run scores a succeeded training run's final checkpoint (``kind="trained"``: one per
run and snapshot; a training run ends with one on its evaluation snapshot), the untrained model of
a kind (``"untrained"``: its initial weights for a seed, the floor a training must beat) or the
exact random baseline (``"random"``, ``models.training.evaluation.random_baseline``). The figures are those of
``models.training.evaluation.evaluate``: T2Traj, Traj2T and OCVR (R@k, mAP, mAP@10, pool-size strata) and the
random baseline, from verified binary labels only. The scores read the snapshot's model inputs
alone (pixels, boxes, query texts: ``RelationSnapshotData.model_inputs``, DESIGN 4.4); the labels
only turn them into figures. With a retrieval pipeline (``models.retrievers.pipeline``, stored
with the run) the figures rank its final scores, computed by the executor search runs, and its
report (requests per query, invalid answers) is stored under ``metrics["pipeline"]``. The first two are queued on the ``gpu`` queue
(:func:`workers.tasks.evaluation_run_task`); the random baseline is computed at once.
"""
from __future__ import annotations

import logging
from collections.abc import Callable

import torch
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.snapshots import relation_snapshot_load
from common.errors import ApplicationError, ConflictError
from common.jobs.runs import RunOutcome, RunReporter, run_enqueue, run_execute
from common.jobs.services import job_create
from common.registry import folders_resolve, refuse_locations
from models.retrievers.pipeline import PipelineSetup
from models.training.evaluation import evaluate_rows, random_baseline
from models.training.trainer import build_model, load_model
from workers.answer_guard import reranker_proposer_check, smoke_stamp
from workers.artefacts import checkpoint_local
from workers.defaults import defaults_record
from workers.folders import feature_cache_dir
from workers.models import EvaluationRun, RunStatus, TrainingRun
from workers.pipelines import pipeline_resolve, pipeline_sha256
from workers.training import (
    evaluation_stamps,
    json_safe,
    percent_text,
    require_sealed,
    training_config_validate,
)

logger = logging.getLogger(__name__)


def evaluation_run_create(*, snapshot, kind: str = EvaluationRun.Kind.TRAINED, training_run: TrainingRun | None = None,
                          model_kind: str | None = None, config: dict | None = None, created_by=None,
                          allow_train_split: bool = False, allow_incomplete: bool = False,
                          queue: bool = True, pipeline: dict | None = None) -> tuple[EvaluationRun, bool]:
    """Evaluate on a sealed snapshot: a succeeded training run (``kind="trained"``; one evaluation per
    run and snapshot: asking again returns the existing one), the untrained model of ``model_kind``
    (``config``: ``{"model": {...}, "seed": 0}``) or the random baseline (computed at once).
    Returns ``(run, created)``; the first two are queued on the ``gpu`` queue after commit.
    Training data and incomplete dev/test snapshots are refused unless asked for, then stamped
    (:func:`evaluation_stamps`), for the evaluated run and for every run the pipeline fuses.
    ``pipeline`` (``models.retrievers.pipeline.RetrievalPipeline``
    as JSON; its ``fuse_runs`` must be succeeded runs) is what the figures rank and is stored
    with the run; none is plain dense retrieval. A trained run is evaluated once per snapshot and
    pipeline."""
    require_sealed(snapshot, "snapshot")
    if kind not in EvaluationRun.Kind.values:
        raise ApplicationError(f"kind must be one of {', '.join(EvaluationRun.Kind.values)}", code="invalid_kind")
    stored_pipeline, pipeline_sha = evaluation_pipeline_validate(pipeline, kind=kind)
    stamps = evaluation_stamps(snapshot, training_snapshot=training_run.snapshot if training_run is not None else None,
                               allow_train_split=allow_train_split, allow_incomplete=allow_incomplete)
    more = fused_run_stamps(snapshot, stored_pipeline.get("fuse_runs") or [], allow_train_split=allow_train_split,
                            allow_incomplete=allow_incomplete)
    stamps += [s for s in more if s not in stamps]
    reranker_proposer_check(snapshot, stored_pipeline)
    smoke = smoke_stamp(snapshot, stored_pipeline)
    if smoke is not None and smoke not in stamps:
        stamps.append(smoke)
    stored: dict = {}
    if kind == EvaluationRun.Kind.TRAINED:
        if training_run is None:
            raise ApplicationError("a trained evaluation needs training_run", code="invalid_training_run")
        if model_kind or config:
            raise ApplicationError("model_kind and config come from the training run; leave them out",
                                   code="invalid_config")
        if training_run.status != RunStatus.SUCCEEDED:
            raise ConflictError(f"training run {training_run.pk} is {training_run.status}; only a succeeded run "
                                "has a final checkpoint to evaluate", code="run_not_finished")
        model_kind = training_run.model_kind
        existing = EvaluationRun.objects.filter(kind=kind, training_run=training_run, snapshot=snapshot,
                                                pipeline_sha256=pipeline_sha).first()
        if existing is not None:
            return existing, False
    elif training_run is not None:
        raise ApplicationError(f"a {kind} evaluation takes no training_run", code="invalid_training_run")
    if kind == EvaluationRun.Kind.UNTRAINED:
        stored = _untrained_config(model_kind, config)
    if kind == EvaluationRun.Kind.RANDOM:
        if model_kind or config:
            raise ApplicationError("the random baseline takes no model_kind or config", code="invalid_config")
        return _random_evaluation(snapshot, created_by, stamps), True
    with transaction.atomic():
        job = job_create(kind="evaluation_run", queue="gpu", created_by=created_by,
                         params={"snapshot": snapshot.pk, "kind": kind})
        defaults = training_run.defaults_version if training_run is not None else defaults_record(model_kind)
        run = EvaluationRun.objects.create(kind=kind, training_run=training_run, snapshot=snapshot,
                                           model_kind=model_kind or "", config=stored, stamps=stamps, job=job,
                                           pipeline=stored_pipeline, pipeline_sha256=pipeline_sha,
                                           defaults_version=defaults, created_by=created_by)
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if queue:
            run_enqueue(run=run)
    return run, True


def evaluation_pipeline_validate(pipeline: dict | None, *, kind: str = EvaluationRun.Kind.TRAINED
                                 ) -> tuple[dict, str]:
    """The pipeline as stored (every default filled in) and its SHA-256; ``({}, "")`` without
    one. 400 for a pipeline that does not validate (an unknown stage, weights that do not sum to
    1, ...), for fused runs that are unknown or have not succeeded, and for the random baseline
    (which ranks nothing)."""
    if pipeline is None:
        return {}, ""
    if kind == EvaluationRun.Kind.RANDOM:
        raise ApplicationError("the random baseline takes no pipeline", code="invalid_pipeline")
    p, record = pipeline_resolve(pipeline)
    found = dict(TrainingRun.objects.filter(pk__in=p.fuse_runs).values_list("pk", "status"))
    bad = [pk for pk in p.fuse_runs if found.get(pk) != RunStatus.SUCCEEDED]
    if bad:
        raise ApplicationError(f"pipeline.fuse_runs {bad} are not succeeded training runs", code="invalid_pipeline")
    return record, pipeline_sha256(record)


def fused_run_stamps(snapshot, fuse_runs, *, allow_train_split: bool = False, allow_incomplete: bool = False
                     ) -> list[str]:
    """The stamps figures on ``snapshot`` get from the runs a pipeline fuses (each run's training
    snapshot against ``snapshot``, as :func:`evaluation_stamps` judges the evaluated run's), or
    its refusal naming the run: a fusion member trained on the evaluated split would carry the
    answer key into the figures."""
    stamps: list[str] = []
    for fused in TrainingRun.objects.filter(pk__in=list(fuse_runs)).select_related("snapshot").order_by("pk"):
        try:
            more = evaluation_stamps(snapshot, training_snapshot=fused.snapshot, allow_train_split=allow_train_split,
                                     allow_incomplete=allow_incomplete)
        except ApplicationError as exc:
            raise ApplicationError(f"pipeline.fuse_runs: run {fused.pk}: {exc.message}", code=exc.code,
                                   extra={**exc.extra, "fused_run": fused.pk}) from None
        stamps += [s for s in more if s not in stamps]
    return stamps


def _pipeline_setup(run: EvaluationRun, device: str) -> PipelineSetup | None:
    if not run.pipeline:
        return None
    p, _ = pipeline_resolve(run.pipeline)
    fused = []
    for pk in p.fuse_runs:
        model, _ = load_model(checkpoint_local(TrainingRun.objects.get(pk=pk)), device=device)
        fused.append(model)
    return PipelineSetup(p, fused)


def _untrained_config(model_kind: str | None, config: dict | None) -> dict:
    if not model_kind:
        raise ApplicationError("an untrained evaluation needs model_kind", code="invalid_model_kind")
    if config is not None and not isinstance(config, dict):
        raise ApplicationError("config must be a JSON object", code="invalid_config")
    refuse_locations(config or {}, field="config", folders=True)
    data = dict(config or {})
    unknown = sorted(set(data) - {"model", "seed", "device"})
    if unknown:
        raise ApplicationError(f"an untrained evaluation takes model, seed and device; not {', '.join(unknown)}",
                               code="invalid_config")
    train_config, _ = training_config_validate(model_kind=model_kind, config=data)
    return {"model": train_config["model"], "seed": train_config["seed"], "device": train_config["device"]}


def _random_evaluation(snapshot, created_by, stamps: list[str]) -> EvaluationRun:
    data = relation_snapshot_load(snapshot=snapshot)
    return EvaluationRun.objects.create(kind=EvaluationRun.Kind.RANDOM, snapshot=snapshot, status=RunStatus.SUCCEEDED,
                                        metrics=json_safe({"random": random_baseline(data)}), stamps=stamps,
                                        created_by=created_by, finished_at=timezone.now())


def evaluation_run_evaluate(*, run: EvaluationRun, echo: Callable[[float, str], None] | None = None) -> EvaluationRun:
    """Compute a queued evaluation run's figures through ``common.jobs.runs.run_execute``
    (idempotent: a finished run is returned as it is). Failures are recorded on the run and its
    Job, not raised; a cancel stops it at its next progress report. What follows its end (the
    experiment cells it evaluates) is ``workers.execute.evaluation_run_execute``'s."""
    return run_execute(run, _evaluation_body, echo=echo, reraise=False)


def _evaluation_body(run: EvaluationRun, reporter: RunReporter) -> RunOutcome:
    run = EvaluationRun.objects.select_related("training_run", "snapshot", "job").get(pk=run.pk)
    data = relation_snapshot_load(snapshot=run.snapshot)
    reporter(0.1, "snapshot loaded")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows: dict = {}
    if run.kind == EvaluationRun.Kind.RANDOM:
        metrics = {"random": random_baseline(data)}
    else:
        if run.kind == EvaluationRun.Kind.TRAINED:
            model, _ = load_model(checkpoint_local(run.training_run), device=device)
        else:
            run.defaults_version = defaults_record(run.model_kind)     # what this code fills in
            torch.manual_seed(int(run.config.get("seed", 0)))
            model = build_model(run.model_kind, folders_resolve(run.config.get("model") or {}))
            model.to(device if run.config.get("device", "auto") == "auto" else run.config["device"]).eval()
        reporter(0.3, "model loaded; embedding the snapshot")
        metrics, rows = evaluate_rows(model, data, cache_dir=feature_cache_dir(), pipeline=_pipeline_setup(run, device))
    run.metrics, run.per_query = json_safe(metrics), json_safe(rows)
    run.save(update_fields=["metrics", "per_query", "defaults_version", "updated_at"])
    t2 = run.metrics.get("t2traj") or run.metrics.get("random") or {}
    return RunOutcome(result={"evaluation": run.pk, "t2traj_R@1": t2.get("R@1")},
                      message=f"T2Traj R@1 {percent_text(t2.get('R@1'))}, mAP {percent_text(t2.get('mAP'))}")
