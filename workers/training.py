"""Training and evaluation runs (DESIGN 2.10): services around ``models.training.trainer``.

A **training run** names a sealed relation snapshot, a model kind and a complete
``models.training.trainer.TrainConfig`` (the model kind's config under ``"model"``). Creating one checks
everything that can be checked without loading weights (the kind, every config key and value, that
the snapshots are sealed) and queues :func:`workers.tasks.training_run_task` on the ``gpu`` queue
after the transaction commits. ``workers.execute.training_run_execute`` runs in the worker (:func:`training_run_train`, then
what follows the run's end):

- it loads the snapshot(s) through ``annotation.benchmark.services.snapshots.relation_snapshot_load``
  (refused when the folder no longer matches the sealed hash);
- it trains in a folder of the worker's host (``VAR_DIR/training/<run id>``) and stores each
  checkpoint, and at the end the run's files, under ``out_dir``, a storage key
  (:mod:`workers.artefacts`); each step's record (loss parts, realized positive/negative counts
  overall and across videos, zero-negative row/column rates) becomes a :class:`TrainingStep` row,
  written in batches (at least once a second and at every checkpoint step) so the series is
  live; the Job's progress follows (throttled);
- a **re-delivered** task (``acks_late`` + ``reject_on_worker_lost``: the worker died) resumes from
  the last checkpoint stored whole, fetched from the store on whichever host takes it: the trainer redoes the steps after it, the rows of those steps are replaced
  by the new attempt's and ``resumes`` records ``{attempt, from_step}``. The run ends with the same
  number of steps as an uninterrupted one. An exclusive lock on the work folder (released by the
  kernel when its holder dies) keeps two deliveries on one host from training it at once;
- cancelling sets a flag that the trainer's ``should_stop`` reads (at most once a second); the
  trainer saves a checkpoint and the run ends ``cancelled``;
- with ``launch.nproc_per_node > 1`` (or ``launcher="torchrun"``) the worker starts
  ``torchrun`` with :mod:`workers.train_entry` as a subprocess, tails its per-step progress file
  and turns a cancel into the stop file;
- at the end the trainer evaluates on the evaluation snapshot (the training snapshot when none is
  named): the figures are stored on the run and as its :class:`EvaluationRun`.

Evaluation runs are :mod:`workers.evaluation`; the per-step series is read with
``workers.selectors.training_step_series``.

Web and worker hosts share no folder: snapshots and checkpoints are read through the store.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import math
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.snapshots import (
    relation_snapshot_load,
    relation_snapshot_local_copy,
)
from common.errors import ApplicationError, ConflictError
from common.jobs.runs import (
    RunCancelled,
    RunOutcome,
    RunReporter,
    run_cancel,
    run_enqueue,
    run_execute,
)
from common.jobs.services import JobReporter, job_create
from common.models import TERMINAL
from common.registry import folders_resolve, refuse_locations
from models.config import PlainConfig
from models.retrievers.registry import RETRIEVERS
from models.training.trainer import TrainConfig, epoch_steps, train
from workers.artefacts import (
    checkpoint_restore,
    checkpoint_store,
    run_files_store,
    run_key,
    work_dir,
)
from workers.defaults import attempt_defaults, defaults_record
from workers.folders import feature_cache_dir
from workers.models import EvaluationRun, RunStatus, TrainingRun, TrainingStep
from workers.train_entry import command, die_with_parent

logger = logging.getLogger(__name__)

LAUNCHERS = ("auto", "inline", "torchrun")
STEP_FLUSH_SECONDS = 1.0                         # TrainingStep rows are written at least this often
CANCEL_POLL_SECONDS = 1.0                        # the cancel flag is read at most this often
TORCHRUN_POLL_SECONDS = 0.5                      # how often the worker tails a torchrun attempt


@dataclass
class LaunchConfig(PlainConfig):
    """How the worker runs a training (the keys sit next to the TrainConfig keys in a request)."""

    nproc_per_node: int = 1                      # training processes on the worker's machine (one per GPU)
    launcher: str = "auto"                       # "auto": torchrun when nproc_per_node > 1; "inline"; "torchrun"

    def __post_init__(self) -> None:
        if not isinstance(self.nproc_per_node, int) or isinstance(self.nproc_per_node, bool) \
                or not 1 <= self.nproc_per_node <= 64:
            raise ValueError(f"nproc_per_node must be an integer in 1..64, got {self.nproc_per_node!r}")
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {self.launcher!r}")
        if self.launcher == "inline" and self.nproc_per_node > 1:
            raise ValueError("several processes (nproc_per_node > 1) need the torchrun launcher")

    @property
    def uses_torchrun(self) -> bool:
        return self.launcher == "torchrun" or (self.launcher == "auto" and self.nproc_per_node > 1)


# -- plain helpers --------------------------------------------------------------------------------------
def json_safe(value):
    """``value`` as strict JSON data: NaN and infinities become ``None`` (PostgreSQL's JSON has no
    NaN), tuples become lists, NumPy and torch scalars become Python numbers."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def require_sealed(snapshot, what: str) -> None:
    if snapshot is None:
        raise ApplicationError(f"{what} is required", code="invalid_snapshot")
    if snapshot.sealed_at is None:
        raise ConflictError(f"{what} {snapshot.pk} is not sealed yet; only sealed snapshots can be used",
                            code="snapshot_not_sealed")


# -- validation -----------------------------------------------------------------------------------------
def training_config_validate(*, model_kind: str, config: dict | None) -> tuple[dict, LaunchConfig]:
    """The complete TrainConfig (as a dict) and the launch settings of a request, or a 400.

    ``config`` holds ``TrainConfig`` keys (``steps``, ``batch_size``, ``lr``, ``batching``,
    ``model``, ...) and optionally the launch keys ``nproc_per_node`` and ``launcher``. The model
    kind must be registered in ``models.retrievers.registry.RETRIEVERS``; its ``model`` dict is checked by
    the kind's config class, and the nested encoder and feature dicts by theirs. Local weight
    folders are named by registered folder entries (``common.registry``): a request carries no
    path, and the worker that loads them resolves the name (the folder may exist only there).
    """
    refuse_locations(config, field="config", folders=True)

    if model_kind not in RETRIEVERS:
        raise ApplicationError(f"unknown model kind {model_kind!r}; known: {', '.join(sorted(RETRIEVERS))}",
                               code="invalid_model_kind")
    if config is not None and not isinstance(config, dict):
        raise ApplicationError("config must be a JSON object of TrainConfig keys", code="invalid_config")
    data = dict(config or {})
    launch_keys = {f.name for f in dataclasses.fields(LaunchConfig)}
    try:
        launch = LaunchConfig.from_dict({k: data.pop(k) for k in list(data) if k in launch_keys})
        train_config = TrainConfig.from_dict(data)
        if not train_config.eval_at_end:
            raise ValueError("eval_at_end cannot be false: a training run always ends with an evaluation run")
        if train_config.batch_size % launch.nproc_per_node:
            raise ValueError(f"batch_size {train_config.batch_size} must be a multiple of nproc_per_node "
                             f"{launch.nproc_per_node} (each process takes an equal share)")
        model = train_config.model
        if not isinstance(model, dict):
            raise ValueError("model must be a JSON object of the model kind's config")
        RETRIEVERS[model_kind].config.from_dict(dict(model))   # checks its nested encoder and feature dicts too
    except (TypeError, ValueError) as exc:
        raise ApplicationError(f"invalid training config: {exc}", code="invalid_config") from None
    return json_safe(train_config.as_dict()), launch


# -- training runs ---------------------------------------------------------------------------------------
TRAIN_SPLIT = "train-split"
INCOMPLETE = "incomplete"


def evaluation_stamps(snapshot, *, training_snapshot=None, allow_train_split: bool = False,
                      allow_incomplete: bool = False) -> list[str]:
    """What figures on ``snapshot`` must be read with, or a refusal (400) when they would mislead.

    Figures on a snapshot of the training split, on the model's own training snapshot, or on any
    snapshot of the split the model was trained on, measure fit, not retrieval: refused
    (``evaluation_on_training_data``) unless ``allow_train_split``, and then stamped ``train-split``. A dev or test snapshot taken with ``allow_incomplete`` holds
    non-binary gallery relations: refused (``snapshot_incomplete``) unless ``allow_incomplete``,
    and then stamped ``incomplete``.
    """
    stamps = []
    own = training_snapshot is not None and snapshot.pk == training_snapshot.pk
    same_split = training_snapshot is not None and training_snapshot.split == snapshot.split
    on_training = snapshot.split == "train" or own or same_split
    if on_training:
        if not allow_train_split:
            what = ("the model's own training snapshot" if own else f"a snapshot of the {snapshot.split} split"
                    + (", the split the model was trained on" if same_split and snapshot.split != "train" else ""))
            raise ApplicationError(
                f"snapshot {snapshot.pk} is {what}: its figures would measure fit, not retrieval; evaluate on a "
                f"dev or test snapshot, or ask for allow_train_split to get figures stamped {TRAIN_SPLIT}",
                code="evaluation_on_training_data", extra={"snapshot": snapshot.pk, "split": snapshot.split})
        stamps.append(TRAIN_SPLIT)
    if snapshot.split in ("dev", "test") and not snapshot.complete:
        if not allow_incomplete:
            raise ApplicationError(
                f"snapshot {snapshot.pk} ({snapshot.split}) is incomplete: some relations its galleries need are "
                f"not binary yet; finish verification and take a new snapshot, or ask for allow_incomplete to get "
                f"figures stamped {INCOMPLETE}",
                code="snapshot_incomplete", extra={"snapshot": snapshot.pk, "split": snapshot.split})
        stamps.append(INCOMPLETE)
    return stamps


def training_run_create(*, snapshot, model_kind: str, config: dict | None = None, eval_snapshot=None,
                        allow_train_split: bool = False, allow_incomplete: bool = False,
                        created_by=None, queue: bool = True, experiment=None, variant: str = "",
                        defaults: dict | None = None) -> TrainingRun:
    """Record a training run (with its Job on the ``gpu`` queue) and queue it after commit.

    Refused with 400 for an unknown kind or a bad config, with 409 for a snapshot that is not
    sealed. The final evaluation runs on ``eval_snapshot`` (none: the training snapshot); training
    data there, or an incomplete dev/test snapshot, is refused with 400 unless asked for
    (``allow_train_split``, ``allow_incomplete``), and the figures are then stamped
    (:func:`evaluation_stamps`). ``experiment`` and ``variant`` name the experiment cell the run is
    (``workers.experiments``). The run records the version of the defaults it will read
    (``workers.defaults``; ``defaults``: that record, computed once by an experiment); the worker
    records it again when it trains."""
    require_sealed(snapshot, "snapshot")
    if eval_snapshot is not None:
        require_sealed(eval_snapshot, "eval_snapshot")
    train_config, launch = training_config_validate(model_kind=model_kind, config=config)
    stamps = evaluation_stamps(eval_snapshot if eval_snapshot is not None else snapshot, training_snapshot=snapshot,
                               allow_train_split=allow_train_split, allow_incomplete=allow_incomplete)
    with transaction.atomic():
        job = job_create(kind="training_run", queue="gpu", created_by=created_by,
                         params={"snapshot": snapshot.pk, "model_kind": model_kind})
        run = TrainingRun.objects.create(
            snapshot=snapshot, eval_snapshot=eval_snapshot, model_kind=model_kind, config=train_config,
            launch=launch.as_dict(), job=job, steps_total=_planned_steps(train_config, snapshot), eval_stamps=stamps,
            created_by=created_by, experiment=experiment, variant=variant,
            defaults_version=defaults or defaults_record(model_kind))
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if queue:
            run_enqueue(run=run)
    return run


def _planned_steps(train_config: dict, snapshot) -> int:
    """The run's steps as far as they are known before training: ``steps``, or with ``epochs`` the
    passes over the snapshot's queries (an upper bound: queries the plan cannot use are not
    counted by the trainer, which reports the exact number with its first step)."""
    epochs = train_config.get("epochs")
    if epochs is None:
        return int(train_config["steps"])
    n_queries = int((snapshot.counts or {}).get("n_queries") or 1)
    return epoch_steps(int(epochs), max(1, n_queries), int(train_config["batch_size"]))


def training_run_cancel(*, run: TrainingRun, user=None) -> TrainingRun:
    """Ask a run to stop (``common.jobs.runs.run_cancel``): a queued run is cancelled at once; a
    running one stops at its next step after a checkpoint (the trainer reads the flag); a finished
    one is a 409."""
    return run_cancel(run=run, by=user)


class _StepRecorder:
    """``on_step`` of the trainer: TrainingStep rows in batches, steps_done and the Job's progress.

    The first record of an attempt says where the trainer resumed (its step minus one): rows past
    that point (written by a killed attempt after its last checkpoint) are deleted, so the series
    never has a gap or a step from two attempts."""

    def __init__(self, run: TrainingRun, attempt: int, reporter: JobReporter, checkpoint_every: int):
        self.run = run
        self.attempt = attempt
        self.reporter = reporter
        self.checkpoint_every = max(1, int(checkpoint_every))
        self.buffer: list[TrainingStep] = []
        self.first_step: int | None = None
        self.last_step = run.steps_done
        self._last_flush = time.monotonic()

    def __call__(self, record: dict) -> None:
        step = int(record["step"])
        if self.first_step is None:
            self.first_step = step
            self._start(step - 1, int(record.get("steps") or self.run.steps_total))
        record = json_safe(record)
        loss = record.get("loss")
        self.buffer.append(TrainingStep(run_id=self.run.pk, step=step, attempt=self.attempt,
                                        loss=loss if isinstance(loss, int | float) else None, record=record))
        self.last_step = step
        total = self.run.steps_total
        if (time.monotonic() - self._last_flush >= STEP_FLUSH_SECONDS or step % self.checkpoint_every == 0
                or step >= total):
            self.flush()
        text = f"step {step}/{total}" + (f" · loss {loss:.4f}" if isinstance(loss, int | float) else "")
        self.reporter(min(step / total, 1.0), text)

    def _start(self, from_step: int, steps_total: int) -> None:
        """Drop rows past the resume point; ``steps_total`` is the trainer's own count (exact for a
        run in epochs, whose steps follow from the training plan)."""
        with transaction.atomic():
            TrainingStep.objects.filter(run_id=self.run.pk, step__gt=from_step).delete()
            run = TrainingRun.objects.select_for_update().get(pk=self.run.pk)
            if from_step > 0:
                run.resumes = [*run.resumes, {"attempt": self.attempt, "from_step": from_step}]
            run.steps_done, run.steps_total = from_step, steps_total
            run.save(update_fields=["resumes", "steps_done", "steps_total", "updated_at"])
            self.run.resumes, self.run.steps_total = run.resumes, steps_total
        if from_step > 0:
            self.reporter.log(f"attempt {self.attempt} resumed from the checkpoint at step {from_step}")

    def flush(self) -> None:
        if not self.buffer:
            return
        with transaction.atomic():
            TrainingStep.objects.bulk_create(self.buffer, update_conflicts=True, unique_fields=["run", "step"],
                                             update_fields=["attempt", "loss", "record"])
            TrainingRun.objects.filter(pk=self.run.pk).update(steps_done=self.last_step, updated_at=timezone.now())
        self.buffer = []
        self._last_flush = time.monotonic()


class _CancelPoll:
    """``should_stop`` of the trainer: the run's cancel flag, read at most once a second."""

    def __init__(self, run_id: int):
        self.run_id = run_id
        self._last = 0.0
        self._value = False

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self._value and now - self._last >= CANCEL_POLL_SECONDS:
            self._last = now
            self._value = TrainingRun.objects.filter(pk=self.run_id, cancel_requested=True).exists()
        return self._value


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """An exclusive, non-blocking lock on ``path``: yields whether it was taken. The kernel drops it
    when the holder exits, even on SIGKILL."""
    fh = open(path, "a+")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    finally:
        fh.close()


def training_run_train(*, run: TrainingRun,
                       echo: Callable[[float, str], None] | None = None) -> tuple[TrainingRun, bool]:
    """Train ``run`` (the module docstring) through ``common.jobs.runs.run_execute``: idempotent for
    finished runs, resuming for started ones. Returns the run and whether this call ran it (False:
    it had ended or was cancelled before it started, or another process holds its folder).

    ``echo(fraction, message)`` sees every progress call (a terminal bar). Failures are recorded on
    the run and its Job (the traceback in the Job) and not raised: retrying the same config will
    not help. The wrapper locks the run row while deciding to start, so a cancel in between is not
    lost; an exclusive lock on ``out_dir`` keeps a second delivery from training the same folder.
    What follows a run's end (its search index, its experiment's table) is
    ``workers.execute.training_run_execute``'s."""
    run = TrainingRun.objects.get(pk=run.pk)
    if run.status in TERMINAL or run.cancel_requested:
        return run_execute(run, _training_body, echo=echo, stop_on_cancel=False, reraise=False), False
    if not run.out_dir:
        TrainingRun.objects.filter(pk=run.pk, out_dir="").update(out_dir=run_key(run.pk))
        run.refresh_from_db()
    out = work_dir(run)
    out.mkdir(parents=True, exist_ok=True)
    with _exclusive(out / ".train.lock") as held:
        if not held:
            logger.warning("training run %s is being trained by another process; this delivery does nothing", run.pk)
            return run, False
        return run_execute(run, _training_body, echo=echo, stop_on_cancel=False, reraise=False), True


def _training_body(run: TrainingRun, reporter: RunReporter) -> RunOutcome:
    run = TrainingRun.objects.select_related("snapshot", "eval_snapshot", "job").get(pk=run.pk)
    job = reporter.job
    attempt = job.attempts if job is not None else 1 + max(run.steps.values_list("attempt", flat=True), default=0)
    result = _train(run, attempt, reporter)
    return _finish(run, result)


def _train(run: TrainingRun, attempt: int, reporter: JobReporter) -> dict:
    config = {**folders_resolve(run.config), "cache_dir": feature_cache_dir()}  # registered folders, this host's cache
    launch = LaunchConfig.from_dict(run.launch)
    recorder = _StepRecorder(run, attempt, reporter, config.get("checkpoint_every", 1))
    run.defaults_version = attempt_defaults(model_kind=run.model_kind, recorded=run.defaults_version,
                                            steps_done=run.steps_done)
    TrainingRun.objects.filter(pk=run.pk).update(defaults_version=run.defaults_version)
    stop = _CancelPoll(run.pk)
    reporter.log(f"attempt {attempt}: {run.model_kind}, {run.steps_total} steps"
                 + (f", torchrun with {launch.nproc_per_node} process(es)" if launch.uses_torchrun else ""))
    out = work_dir(run)
    if (step := checkpoint_restore(run=run, out=out)) is not None:
        reporter.log(f"attempt {attempt}: checkpoint of step {step} read from {run.checkpoint_key}")

    def stored(path: Path, step: int) -> None:
        checkpoint_store(run_id=run.pk, path=path, step=step)

    if launch.uses_torchrun:
        result = _train_torchrun(run, config, launch, attempt, recorder, stop, stored)
    else:
        data = relation_snapshot_load(snapshot=run.snapshot)
        eval_data = relation_snapshot_load(snapshot=run.eval_snapshot) if run.eval_snapshot_id else data
        result = train(data, run.model_kind, config, out, eval_snapshot=eval_data, on_step=recorder,
                       should_stop=stop, on_checkpoint=stored)
    recorder.flush()
    run_files_store(run=run, out=out)
    run.refresh_from_db(fields=["checkpoint_key"])
    return {**result, "checkpoint": run.checkpoint_key or result.get("checkpoint")}


def _train_torchrun(run: TrainingRun, config: dict, launch: LaunchConfig, attempt: int,
                    recorder: _StepRecorder, stop: _CancelPoll, stored: Callable[[Path, int], None]) -> dict:
    """One attempt through ``torchrun`` (:mod:`workers.train_entry`), tailing its progress file:
    step records go to ``recorder``, each announced checkpoint (a hard link rank 0 made of it) to
    ``stored``."""
    evaluated = run.eval_snapshot if run.eval_snapshot_id else run.snapshot
    out = work_dir(run)
    progress, stop_file, config_file = out / f"progress-{attempt}.jsonl", out / "STOP", out / "train_config.json"
    for stale in (progress, stop_file, out / "result.json"):
        stale.unlink(missing_ok=True)
    config_file.write_text(json.dumps(config))
    # checked against the sealed hashes, videos named by this host's files (refused before launching)
    folder, eval_folder = (relation_snapshot_local_copy(snapshot=s) for s in (run.snapshot, evaluated))
    cmd = command(nproc_per_node=launch.nproc_per_node, snapshot_dir=str(folder),
                  snapshot_sha=run.snapshot.content_sha256, model_kind=run.model_kind, config_file=str(config_file),
                  out_dir=str(out), eval_snapshot_dir=str(eval_folder), eval_snapshot_sha=evaluated.content_sha256,
                  progress_file=str(progress), stop_file=str(stop_file), checkpoint_links=True)

    def on_record(record: dict) -> None:
        if "checkpoint_file" not in record:
            recorder(record)
            return
        link = out / record["checkpoint_file"]
        try:
            stored(link, int(record["checkpoint_step"]))
        finally:
            link.unlink(missing_ok=True)

    recorder.reporter.log("launch: " + " ".join(cmd))
    with open(out / f"torchrun-{attempt}.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=settings.BASE_DIR,
                                preexec_fn=die_with_parent)
        offset = 0
        try:
            while proc.poll() is None:
                offset = _drain(progress, offset, on_record)
                if stop() and not stop_file.exists():
                    stop_file.touch()
                time.sleep(TORCHRUN_POLL_SECONDS)
        finally:
            if proc.poll() is None:            # this worker is being stopped: take the trainers along
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=30)
                if proc.poll() is None:
                    proc.kill()
    _drain(progress, offset, on_record)
    if proc.returncode != 0:
        tail = (out / f"torchrun-{attempt}.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"torchrun exited with status {proc.returncode}:\n{tail}")
    return json.loads((out / "result.json").read_text())


def _drain(path: Path, offset: int, on_step: Callable[[dict], None]) -> int:
    """Feed the complete JSON lines of ``path`` after byte ``offset`` to ``on_step``; the new offset."""
    if not path.is_file():
        return offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        chunk = fh.read()
    end = chunk.rfind(b"\n") + 1
    for line in chunk[:end].splitlines():
        if line.strip():
            on_step(json.loads(line))
    return offset + end


def _finish(run: TrainingRun, result: dict) -> RunOutcome:
    """Record the trainer's summary: a cancelled run (raises :class:`RunCancelled`, the checkpoint
    kept), or a finished one with its evaluation run (the wrapper then marks it succeeded)."""
    summary = json_safe({k: v for k, v in result.items() if k not in ("metrics", "per_query")})
    now = timezone.now()
    if result["status"] == "stopped":
        TrainingRun.objects.filter(pk=run.pk).update(result=summary, steps_done=int(result["step"]), updated_at=now)
        raise RunCancelled(f"cancelled at step {int(result['step'])}/{run.steps_total} (checkpoint kept)")
    with transaction.atomic():
        run = TrainingRun.objects.select_for_update().get(pk=run.pk)
        run.result, run.steps_done = summary, int(result["step"])
        run.metrics = json_safe(result.get("metrics") or {})
        figures = {"model_kind": run.model_kind, "status": RunStatus.SUCCEEDED, "metrics": run.metrics,
                   "per_query": json_safe(result.get("per_query") or {}), "stamps": run.eval_stamps,
                   "defaults_version": run.defaults_version, "finished_at": now}
        evaluation, _ = EvaluationRun.objects.update_or_create(
            kind=EvaluationRun.Kind.TRAINED, training_run=run, snapshot_id=run.eval_snapshot_id or run.snapshot_id,
            pipeline_sha256="", defaults=figures, create_defaults=figures | {"created_by": run.created_by})
        run.save(update_fields=["result", "steps_done", "metrics", "updated_at"])
    t2 = run.metrics.get("t2traj") or {}
    return RunOutcome(result={"run": run.pk, "steps": run.steps_done, "evaluation": evaluation.pk,
                              "t2traj_R@1": t2.get("R@1"), "t2traj_mAP": t2.get("mAP")},
                      message=f"{run.steps_done} steps; T2Traj R@1 {percent_text(t2.get('R@1'))}, "
                              f"mAP {percent_text(t2.get('mAP'))}")


def percent_text(value) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "n/a"
