"""Experiments (DESIGN 4.5): a declared grid of ordinary training runs and the table of their results.

:func:`experiment_create` checks everything before anything is queued, and refuses with a 400:

- the grid (``models.experiments.grid.spec_from_request``: a preset, its variants or the caller's,
  seeds, bootstrap settings): an unknown preset or variant, a bad name or seed;
- every cell's training config (``workers.training.training_config_validate``): a key that does not
  exist, a bad value, named with the cell;
- the snapshots: both sealed (409 otherwise, as for a training run), the training snapshot of the
  ``train`` split and the evaluation snapshot another one of ``dev`` or ``test`` (a train-split
  evaluation only with ``allow_train_split``, an incomplete one only with ``allow_incomplete``,
  and then every figure is stamped); each folder still matching its sealed hash.

It then records the experiment (the snapshot hashes, the code version and the version of the
model kind's defaults, ``workers.defaults``, with it) and one
:class:`TrainingRun` per (variant, seed) on the ``gpu`` queue, all in one transaction: a refusal
queues nothing. The runs are ordinary: they resume from their checkpoints when a worker dies, and
can be cancelled or retried one by one.

:func:`experiment_refresh` (called when a cell ends, on cancel and on resume) recomputes the status
and, when the set of succeeded cells changed, the table (``models.experiments.table``) from their
evaluations' per-row values; it writes ``table.json`` and ``table.csv`` under
``VAR_DIR/experiments/<id>/``. :func:`experiment_resume` queues every failed or cancelled cell again
(succeeded cells are kept, running ones left alone); :func:`experiment_cancel` cancels the cells that
have not ended.
"""
from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.snapshots import relation_snapshot_load
from common.errors import ApplicationError, ConflictError, NotFoundError
from common.jobs.runs import run_cancel, run_retry
from common.models import TERMINAL
from common.versions import software_versions
from models.experiments.grid import PRESETS, ExperimentSpec, spec_from_request
from models.experiments.table import (
    experiment_table,
    merge_request_counts,
    pipelines_of,
    request_counts,
    table_csv,
)
from workers.answer_guard import answer_stamps
from workers.defaults import defaults_record
from workers.evaluation import evaluation_pipeline_validate, evaluation_run_create, fused_run_stamps
from workers.models import EvaluationRun, Experiment, ExperimentCell, RunStatus, TrainingRun
from workers.pipelines import pipeline_resolve
from workers.training import (
    evaluation_stamps,
    json_safe,
    require_sealed,
    training_config_validate,
    training_run_create,
)

logger = logging.getLogger(__name__)


def experiment_root() -> Path:
    return Path(settings.VAR_DIR) / "experiments"


def _check_snapshots(snapshot, eval_snapshot, *, allow_train_split: bool, allow_incomplete: bool) -> list[str]:
    require_sealed(snapshot, "snapshot")
    require_sealed(eval_snapshot, "eval_snapshot")
    if snapshot.pk == eval_snapshot.pk:
        raise ApplicationError(f"snapshot {snapshot.pk} cannot be both the training and the evaluation snapshot",
                               code="experiment_wrong_splits")
    if snapshot.split != "train":
        raise ApplicationError(f"snapshot {snapshot.pk} is of the {snapshot.split} split; an experiment trains on a "
                               "snapshot of the train split", code="experiment_wrong_splits",
                               extra={"snapshot": snapshot.pk, "split": snapshot.split})
    stamps = evaluation_stamps(eval_snapshot, training_snapshot=snapshot, allow_train_split=allow_train_split,
                               allow_incomplete=allow_incomplete)
    for snap in (snapshot, eval_snapshot):
        try:
            relation_snapshot_load(snapshot=snap)
        except ConflictError as exc:
            raise ApplicationError(f"{exc.message}; nothing was queued", code=exc.code,
                                   extra={"snapshot": snap.pk}) from None
    return stamps


def experiment_validate(request: dict) -> tuple[ExperimentSpec, list[tuple[str, int, dict]]]:
    """The grid of a request and its cells, each config complete and checked, or a 400."""
    try:
        spec = spec_from_request(request)
        cells = spec.cells()                                         # values relative to the base resolved here
    except ValueError as exc:
        raise ApplicationError(str(exc), code="invalid_experiment") from None
    for variant, _, config, pipeline in cells:
        try:
            training_config_validate(model_kind=spec.model_kind, config=config)
            if pipeline:
                evaluation_pipeline_validate(pipeline)
        except ApplicationError as exc:
            raise ApplicationError(f"variant {variant!r}: {exc.message}", code=exc.code,
                                   extra={"variant": variant}) from None
    return spec, cells


def experiment_create(*, snapshot, eval_snapshot, grid: dict, name: str = "", allow_train_split: bool = False,
                      allow_incomplete: bool = False, created_by=None, queue: bool = True) -> Experiment:
    """Record an experiment and queue its cells (module docstring); a refusal queues nothing."""
    if not isinstance(grid, dict):
        raise ApplicationError("grid must be an object (preset, variants, seeds, base, ...)", code="invalid_experiment")
    stamps = _check_snapshots(snapshot, eval_snapshot, allow_train_split=allow_train_split,
                              allow_incomplete=allow_incomplete)
    spec, cells = experiment_validate(grid)
    fused = sorted({r for *_, pipeline in cells for r in (pipeline or {}).get("fuse_runs") or []})
    stamps += [s for s in fused_run_stamps(eval_snapshot, fused, allow_train_split=allow_train_split,
                                           allow_incomplete=allow_incomplete) if s not in stamps]
    stamps += [s for s in answer_stamps(eval_snapshot, [p for *_, p in cells]) if s not in stamps]
    preset = grid.get("preset") or ""
    code = software_versions()
    defaults = defaults_record(spec.model_kind, commit=code.get("trajlab_commit", ""))
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name or (preset or spec.model_kind), preset=preset, model_kind=spec.model_kind,
            spec=json_safe(spec.stored()), snapshot=snapshot, eval_snapshot=eval_snapshot,
            snapshot_sha256=snapshot.content_sha256, eval_snapshot_sha256=eval_snapshot.content_sha256,
            code_version=code, defaults_version=defaults, stamps=stamps, cells_total=len(cells),
            created_by=created_by, queued=queue)
        through_pipeline = any(_effective(pipeline) for *_, pipeline in cells)
        trainings: dict[str, TrainingRun] = {}            # one run per distinct training config
        for variant, seed, config, pipeline in cells:
            key = json.dumps(config, sort_keys=True)
            if key not in trainings:
                trainings[key] = training_run_create(
                    snapshot=snapshot, eval_snapshot=eval_snapshot, model_kind=spec.model_kind, config=config,
                    allow_train_split=allow_train_split, allow_incomplete=allow_incomplete, created_by=created_by,
                    queue=queue, experiment=experiment, variant=variant, defaults=defaults)
            ExperimentCell.objects.create(
                experiment=experiment, variant=variant, seed=seed, training_run=trainings[key],
                pipeline=pipeline_resolve(pipeline)[1] if through_pipeline else {})
    return experiment


def _effective(pipeline: dict) -> bool:
    """Whether a cell's pipeline ranks differently from plain dense retrieval (the model's dense
    list alone, no reranker). When no cell's does, every cell is figured by its training run's own
    final evaluation; when one does, every cell (the reference included) is evaluated through the
    pipeline executor, so the differences compare pipelines on one code path."""
    if not pipeline:
        return False
    p, _ = pipeline_resolve(pipeline)
    return not (tuple(p.retrievers) == ("dense",) and not p.fuse_runs and p.reranker == "none")


def _status(statuses: list[str]) -> str:
    if any(s not in TERMINAL for s in statuses):
        return Experiment.Status.RUNNING
    if all(s == RunStatus.SUCCEEDED for s in statuses):
        return Experiment.Status.SUCCEEDED
    if any(s == RunStatus.FAILED for s in statuses):
        return Experiment.Status.FAILED
    return Experiment.Status.CANCELLED


def _evaluations_due(experiment: Experiment, *, queue: bool) -> None:
    """Link every cell whose training succeeded to its evaluation: the run's own final one without
    a pipeline, else an evaluation run of the cell's pipeline (created and queued once)."""
    due = list(experiment.cells.filter(evaluation__isnull=True, error="", training_run__status=RunStatus.SUCCEEDED)
               .select_related("training_run"))
    for cell in due:
        run = cell.training_run
        if not cell.pipeline:
            cell.evaluation = EvaluationRun.objects.filter(kind=EvaluationRun.Kind.TRAINED, training_run=run,
                                                           snapshot_id=experiment.eval_snapshot_id,
                                                           pipeline_sha256="").first()
            if cell.evaluation is None:
                cell.error = f"training run {run.pk} has no final evaluation on snapshot {experiment.eval_snapshot_id}"
        else:
            try:
                with transaction.atomic():
                    cell.evaluation, _ = evaluation_run_create(
                        snapshot=experiment.eval_snapshot, training_run=run, pipeline=cell.pipeline,
                        allow_train_split="train-split" in experiment.stamps,
                        allow_incomplete="incomplete" in experiment.stamps, created_by=experiment.created_by,
                        queue=queue)
            except ApplicationError as exc:          # e.g. a fused run that is no longer there
                cell.error = f"its evaluation could not be created: {exc.message}"
        cell.save(update_fields=["evaluation", "error"])


def cell_state(cell: ExperimentCell, experiment: Experiment) -> str:
    """A cell's status: its training's until that has succeeded, then its evaluation's; a cell
    whose evaluation could not be created has failed, and one whose evaluation is still to be
    created is queued (cancelled while the experiment is)."""
    state = cell.training_run.status
    if state != RunStatus.SUCCEEDED:
        return state
    if cell.evaluation is not None:
        return cell.evaluation.status
    if cell.error:
        return RunStatus.FAILED
    return RunStatus.CANCELLED if experiment.cancel_requested else RunStatus.QUEUED


def experiment_cells(experiment: Experiment):
    """The experiment's cells with their training and evaluation runs, in creation order."""
    return experiment.cells.select_related("training_run", "evaluation").order_by("id")


def _cell_states(experiment: Experiment) -> list[dict]:
    """Per cell: its variant, seed, :func:`cell_state` and (once succeeded) evaluation id."""
    out = []
    for cell in experiment_cells(experiment):
        state = cell_state(cell, experiment)
        out.append({"variant": cell.variant, "seed": int(cell.seed), "state": state,
                    "evaluation": cell.evaluation_id if state == RunStatus.SUCCEEDED else None,
                    "defaults": cell.training_run.defaults_version})
    return out


def experiment_refresh(*, experiment_id: int, schedule: bool = True) -> Experiment:
    """Status, cell count and (when the finished cells changed) the table of an experiment. With
    ``schedule`` (not while it is cancelled) it also creates the pipeline evaluations of cells
    whose training has succeeded: queued for the workers, or for an inline experiment left for
    the command that runs it."""
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
        if schedule and not experiment.cancel_requested:
            _evaluations_due(experiment, queue=experiment.queued)
        cells = _cell_states(experiment)
        status = _status([c["state"] for c in cells])
        done = [c for c in cells if c["state"] == RunStatus.SUCCEEDED]
        fields = {"status": status, "cells_done": len(done),
                  "finished_at": timezone.now() if status != Experiment.Status.RUNNING else None}
        if sorted(c["evaluation"] for c in done) != experiment.result.get("evaluations"):
            fields["result"] = _table(experiment, done)
        for key, value in fields.items():
            setattr(experiment, key, value)
        experiment.save(update_fields=[*fields, "updated_at"])
        if "result" in fields:
            _write(experiment)
    return experiment


def experiment_cells_evaluated(*, evaluation: EvaluationRun) -> None:
    """Refresh the experiments one of whose cells ``evaluation`` is (called when it ends). A failure
    here does not undo the evaluation: it is logged, and reading the experiment refreshes it."""
    for experiment_id in set(ExperimentCell.objects.filter(evaluation=evaluation).values_list("experiment_id",
                                                                                              flat=True)):
        try:
            experiment_refresh(experiment_id=experiment_id)
        except Exception:
            logger.exception("evaluation run %s: experiment %s could not be refreshed", evaluation.pk, experiment_id)


def _table(experiment: Experiment, done: list[dict]) -> dict:
    spec = ExperimentSpec.from_dict(experiment.spec)
    evaluations = {e.pk: e for e in EvaluationRun.objects.filter(pk__in=[c["evaluation"] for c in done])}
    cells = [{"variant": c["variant"], "seed": c["seed"], "rows": evaluations[c["evaluation"]].per_query,
              "defaults": c["defaults"]} for c in done if evaluations[c["evaluation"]].per_query]
    table = experiment_table(cells, variants=list(spec.variants), reference=spec.reference,
                             n_resamples=spec.n_resamples, confidence=spec.confidence)
    requests: dict[str, list] = {}
    for c in done:
        report = (evaluations[c["evaluation"]].metrics or {}).get("pipeline")
        if report:
            requests.setdefault(c["variant"], []).append(request_counts(report))
    runs = TrainingRun.objects.filter(experiment=experiment, status=RunStatus.SUCCEEDED)
    retained = {str(r.pk): ((r.result or {}).get("data_summary") or {}).get("eval") for r in runs}
    return json_safe(table | {"evaluations": sorted(c["evaluation"] for c in done), "stamps": experiment.stamps,
                              "snapshot_sha256": experiment.snapshot_sha256,
                              "eval_snapshot_sha256": experiment.eval_snapshot_sha256,
                              "code_version": experiment.code_version, "pipelines": pipelines_of(spec),
                              "requests": {v: merge_request_counts(r) for v, r in requests.items()},
                              "data_summary": {k: v for k, v in retained.items() if v}})


def _write(experiment: Experiment) -> None:
    folder = experiment_root() / str(experiment.pk)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("table.json", json.dumps(experiment.result, indent=2) + "\n"),
                       ("table.csv", table_csv(experiment.result))):
        with tempfile.NamedTemporaryFile("w", dir=folder, prefix=f".{name}.", delete=False) as fh:
            fh.write(text)
        os.replace(fh.name, folder / name)


def _cell_evaluations(experiment: Experiment):
    return EvaluationRun.objects.filter(pk__in=experiment.cells.filter(evaluation__isnull=False)
                                        .values("evaluation_id"))


def experiment_resume(*, experiment: Experiment, user=None, queue: bool = True) -> list:
    """Queue every failed or cancelled training and pipeline evaluation of the experiment again
    (``common.jobs.runs.run_retry``: a training resumes from its checkpoint), clear the cells whose
    evaluation could not be created and the cancel flag; succeeded runs are kept and queued or
    running ones left alone. One transaction: the messages go out when it commits. A 409 when
    nothing needs it. With ``queue=False`` the runs are reset to queued without a message (the
    caller runs them inline)."""
    stopped = [RunStatus.FAILED, RunStatus.CANCELLED]
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
        runs = [*experiment.runs.filter(status__in=stopped).order_by("id"),
                *_cell_evaluations(experiment).filter(status__in=stopped).order_by("id")]
        unscheduled = experiment.cells.filter(evaluation__isnull=True, training_run__status=RunStatus.SUCCEEDED)
        if not runs and not unscheduled.exists():
            raise ConflictError(f"experiment {experiment.pk} has no failed or cancelled cell to resume",
                                code="experiment_not_resumable", extra={"status": experiment.status})
        unscheduled.update(error="")
        Experiment.objects.filter(pk=experiment.pk).update(cancel_requested=False, queued=queue)
        again = [run_retry(run=run, by=user, queue=queue) for run in runs]
    experiment_refresh(experiment_id=experiment.pk)
    return again


def experiment_cancel(*, experiment: Experiment, user=None) -> Experiment:
    """Cancel every training and evaluation of the experiment that has not ended (running ones stop
    after a checkpoint) and stop scheduling its evaluations until it is resumed; 409 when nothing
    is left to cancel."""
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
        runs = [*experiment.runs.exclude(status__in=TERMINAL).order_by("id"),
                *_cell_evaluations(experiment).exclude(status__in=TERMINAL).order_by("id")]
        unscheduled = experiment.cells.filter(evaluation__isnull=True, error="",
                                              training_run__status=RunStatus.SUCCEEDED).exists()
        if not runs and not unscheduled:
            raise ConflictError(f"experiment {experiment.pk} has no cell left to cancel", code="run_finished")
        Experiment.objects.filter(pk=experiment.pk).update(cancel_requested=True)
    for run in runs:
        try:
            run_cancel(run=run, by=user)
        except ConflictError:       # it ended in between
            continue
    return experiment_refresh(experiment_id=experiment.pk)


def experiment_pending(experiment: Experiment) -> tuple[list[TrainingRun], list[EvaluationRun]]:
    """What an inline run of the experiment still has to execute: its trainings that have not
    succeeded, and its cells' evaluations that have not ended."""
    return (list(experiment.runs.exclude(status=RunStatus.SUCCEEDED).order_by("id")),
            list(_cell_evaluations(experiment).exclude(status__in=TERMINAL).order_by("id")))


def experiment_list(*, status: str | None = None, preset: str | None = None):
    """Experiments, newest first, optionally of one status or preset."""
    qs = Experiment.objects.all()
    if status:
        qs = qs.filter(status=status)
    if preset:
        qs = qs.filter(preset=preset)
    return qs


def experiment_get(*, experiment_id: int) -> Experiment:
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None:
        raise NotFoundError(f"experiment {experiment_id} does not exist", code="not_found")
    return experiment


def preset_list() -> list[dict]:
    """The named grids: name, model kind, reference, variants with their overrides, description."""
    return [{"name": p.name, "model_kind": p.model_kind, "reference": p.reference, "variants": p.variants,
             "description": p.description} for p in PRESETS.values()]
