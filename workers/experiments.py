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

It then records the experiment (the snapshot hashes and the code version with it) and one
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
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.snapshots import relation_snapshot_load
from common.errors import ApplicationError, ConflictError
from common.jobs.runs import run_cancel, run_retry
from common.models import TERMINAL
from common.versions import software_versions
from models.experiments.grid import PRESETS, ExperimentSpec, spec_from_request
from models.experiments.table import experiment_table, table_csv
from workers.models import EvaluationRun, Experiment, RunStatus, TrainingRun
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
    except ValueError as exc:
        raise ApplicationError(str(exc), code="invalid_experiment") from None
    cells = spec.cells()
    for variant, _, config in cells:
        try:
            training_config_validate(model_kind=spec.model_kind, config=config)
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
    preset = grid.get("preset") or ""
    with transaction.atomic():
        experiment = Experiment.objects.create(
            name=name or (preset or spec.model_kind), preset=preset, model_kind=spec.model_kind,
            spec=json_safe(spec.as_dict()), snapshot=snapshot, eval_snapshot=eval_snapshot,
            snapshot_sha256=snapshot.content_sha256, eval_snapshot_sha256=eval_snapshot.content_sha256,
            code_version=software_versions(), stamps=stamps, cells_total=len(cells), created_by=created_by)
        for variant, _, config in cells:
            training_run_create(snapshot=snapshot, eval_snapshot=eval_snapshot, model_kind=spec.model_kind,
                                config=config, allow_train_split=allow_train_split,
                                allow_incomplete=allow_incomplete, created_by=created_by, queue=queue,
                                experiment=experiment, variant=variant)
    return experiment


def _status(statuses: list[str]) -> str:
    if any(s not in TERMINAL for s in statuses):
        return Experiment.Status.RUNNING
    if all(s == RunStatus.SUCCEEDED for s in statuses):
        return Experiment.Status.SUCCEEDED
    if any(s == RunStatus.FAILED for s in statuses):
        return Experiment.Status.FAILED
    return Experiment.Status.CANCELLED


def experiment_refresh(*, experiment_id: int) -> Experiment:
    """Status, cell count and (when the succeeded cells changed) the table of an experiment."""
    with transaction.atomic():
        experiment = Experiment.objects.select_for_update().get(pk=experiment_id)
        runs = list(experiment.runs.order_by("id").values("id", "status", "variant", "config"))
        status = _status([r["status"] for r in runs])
        done = [r for r in runs if r["status"] == RunStatus.SUCCEEDED]
        fields = {"status": status, "cells_done": len(done),
                  "finished_at": timezone.now() if status != Experiment.Status.RUNNING else None}
        if sorted(r["id"] for r in done) != experiment.result.get("runs"):
            fields["result"] = _table(experiment, done)
        for key, value in fields.items():
            setattr(experiment, key, value)
        experiment.save(update_fields=[*fields, "updated_at"])
    if "result" in fields:
        _write(experiment)
    return experiment


def _table(experiment: Experiment, done: list[dict]) -> dict:
    spec = ExperimentSpec.from_dict(experiment.spec)
    rows = dict(EvaluationRun.objects.filter(kind=EvaluationRun.Kind.TRAINED, training_run_id__in=[r["id"] for r in done],
                                             snapshot_id=experiment.eval_snapshot_id)
                .values_list("training_run_id", "per_query"))
    cells = [{"variant": r["variant"], "seed": int(r["config"]["seed"]), "rows": rows[r["id"]]}
             for r in done if rows.get(r["id"])]
    table = experiment_table(cells, variants=list(spec.variants), reference=spec.reference,
                             n_resamples=spec.n_resamples, confidence=spec.confidence)
    metrics = dict(TrainingRun.objects.filter(pk__in=[r["id"] for r in done]).values_list("id", "result"))
    retained = {r["id"]: (metrics.get(r["id"]) or {}).get("slow_retained") for r in done}
    return json_safe(table | {"runs": sorted(r["id"] for r in done), "stamps": experiment.stamps,
                              "snapshot_sha256": experiment.snapshot_sha256,
                              "eval_snapshot_sha256": experiment.eval_snapshot_sha256,
                              "code_version": experiment.code_version,
                              "slow_retained": {str(k): v for k, v in retained.items() if v is not None}})


def _write(experiment: Experiment) -> None:
    folder = experiment_root() / str(experiment.pk)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("table.json", json.dumps(experiment.result, indent=2) + "\n"),
                       ("table.csv", table_csv(experiment.result))):
        tmp = folder / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(folder / name)


def experiment_resume(*, experiment: Experiment, user=None, queue: bool = True) -> list[TrainingRun]:
    """Queue every failed or cancelled cell again (``common.jobs.runs.run_retry``); succeeded cells are
    kept and queued or running ones left alone. A 409 when no cell needs it. With ``queue=False``
    the cells are reset to queued without a message (the caller runs them inline)."""
    runs = list(experiment.runs.filter(status__in=[RunStatus.FAILED, RunStatus.CANCELLED]).order_by("id"))
    if not runs:
        raise ConflictError(f"experiment {experiment.pk} has no failed or cancelled cell to resume",
                            code="experiment_not_resumable", extra={"status": experiment.status})
    again = [run_retry(run=run, by=user, queue=queue) for run in runs]
    experiment_refresh(experiment_id=experiment.pk)
    return again


def experiment_cancel(*, experiment: Experiment, user=None) -> Experiment:
    """Cancel every cell that has not ended (running ones stop after a checkpoint); 409 when none."""
    runs = list(experiment.runs.exclude(status__in=TERMINAL).order_by("id"))
    if not runs:
        raise ConflictError(f"experiment {experiment.pk} has no cell left to cancel", code="run_finished")
    for run in runs:
        try:
            run_cancel(run=run, by=user)
        except ConflictError:       # it ended in between
            continue
    return experiment_refresh(experiment_id=experiment.pk)


def preset_list() -> list[dict]:
    """The named grids: name, model kind, reference, variants with their overrides, description."""
    return [{"name": p.name, "model_kind": p.model_kind, "reference": p.reference, "variants": p.variants,
             "description": p.description} for p in PRESETS.values()]
