"""The lifecycle of every queued run: start, report, fail, finish, cancel and retry.

Every run kind is a concrete :class:`common.models.QueuedRun`; this module knows them only
through that shape, so it imports nothing above ``common``:

- :func:`run_execute` is the one wrapper a task (or an inline command) runs a run's body through.
  It locks the run row to decide: a run in a ``skip`` status is returned as it is, a run whose
  cancel was requested between deliveries ends ``cancelled``; otherwise the run is marked
  ``running`` and its Job started (``attempts`` counts the deliveries). The body gets the run and
  a :class:`RunReporter` and returns a :class:`RunOutcome`. An :class:`ApplicationError` ends the
  run ``failed`` with its message (not raised: retrying the same input will not help); any other
  exception (and Ctrl-C in an inline run) ends it ``failed`` and is raised again (``acks_late``
  semantics stay with the task); a ``BaseException`` that stands for the worker going away
  (``SystemExit``) leaves it ``running`` for the next delivery;
  :class:`RunCancelled` (raised by the reporter when a cancel was requested, or by the body)
  ends it ``cancelled``; :class:`WorkerStopping` (raised by the reporter once the worker was told
  to stop, ``common.jobs.stopping``) puts it back to ``queued`` (the delivery does not count as an
  attempt) and rejects its message back onto the broker, so another worker takes it up; success ends it ``succeeded``. Bodies are idempotent, so a re-delivered
  task continues where the last delivery stopped. While the body runs, the job's heartbeat goes on
  (``common.jobs.heartbeat``: the reporter's writes and a thread beside the body); a delivery whose
  job was ended meanwhile (the sweep took its worker for dead, :class:`JobAbandoned` from the
  reporter) stops and records nothing more.
- :func:`run_abandon`: a running run whose job's heartbeat lapsed (its worker died) ends
  ``failed`` with that reason, or ``cancelled`` if a cancel was waiting for it; ``common.jobs.sweep``
  calls it for every lapsed job.
- :func:`run_cancel`: a queued run is cancelled at once; a running one gets ``cancel_requested``
  and stops at its next progress report (training: at its next step, after a checkpoint); a
  running one whose worker is gone (lapsed heartbeat) is cancelled at once.
- :func:`run_enqueue`: how every run is queued, the first time and on a retry: its task is sent by
  name after commit, ``celery.current_app.send_task(run.task_name, args=[run.pk],
  queue=job.queue)``, so services never import their app's tasks (the tasks import the services);
  a broker that refuses the message fails the run with that reason.
- :func:`run_retry`: a failed or cancelled run (or a running one whose worker is gone, failed
  first) is queued again, on the same row with a fresh Job (``retries`` counts it).
- :func:`job_run` finds the run of a Job through the reverse one-to-one relations from Job to
  the concrete ``QueuedRun`` subclasses (``Job._meta.related_objects``).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from celery import current_app
from celery.exceptions import Reject
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from common.errors import ApplicationError, ConflictError
from common.jobs.heartbeat import JobHeartbeat, job_lapsed
from common.jobs.services import (
    JobAbandoned,
    JobReporter,
    job_create,
    job_fail,
    job_start,
    job_succeed,
)
from common.jobs.stopping import WorkerStopping, worker_stopping
from common.models import TERMINAL, Job, QueuedRun, RunStatus

logger = logging.getLogger(__name__)
#: The cancel flag is read at most this often by a reporter.
CANCEL_POLL_SECONDS = 1.0


class RunCancelled(Exception):
    """Raised inside a run's body to end it ``cancelled`` (the message goes to its Job)."""

    def __init__(self, message: str = "cancelled"):
        super().__init__(message)
        self.message = message


@dataclass
class RunOutcome:
    """What a successful body returns: the Job's result and its closing message."""

    result: dict = field(default_factory=dict)
    message: str = "done"


class RunReporter(JobReporter):
    """The reporter of the worker executing a run: a beating :class:`JobReporter` that also reads the
    run's cancel flag (at most once a second) and raises :class:`RunCancelled` from the progress call
    once it is set. ``stop_on_cancel=False`` for bodies that stop on their own (the trainer's
    ``should_stop``)."""

    def __init__(self, run: QueuedRun, job: Job | None = None, *, echo=None, min_interval: float = 0.5,
                 stop_on_cancel: bool = True):
        super().__init__(job, echo=echo, min_interval=min_interval, beats=True)
        self.run = run
        self.stop_on_cancel = stop_on_cancel
        self._polled = 0.0

    def cancel_requested(self) -> bool:
        now = time.monotonic()
        if now - self._polled < CANCEL_POLL_SECONDS:
            return False
        self._polled = now
        return type(self.run).objects.filter(pk=self.run.pk, cancel_requested=True).exists()

    def __call__(self, fraction: float, message: str = "") -> None:
        super().__call__(fraction, message)
        if worker_stopping():
            raise WorkerStopping(f"the worker is stopping at {fraction:.0%}")
        if self.stop_on_cancel and self.cancel_requested():
            raise RunCancelled(f"cancelled at {fraction:.0%}")


def _close(run: QueuedRun, status: str, *, error: str = "") -> None:
    now = timezone.now()
    fields = {"status": status, "error": error[:10000], "finished_at": now}
    if hasattr(run, "updated_at"):
        fields["updated_at"] = now
    type(run).objects.filter(pk=run.pk).update(**fields)


def run_fail(*, run: QueuedRun, error: BaseException | str) -> QueuedRun:
    """End ``run`` failed: its error (the message of an :class:`ApplicationError`) on the run, the
    same (with the traceback of any other exception) on its Job."""
    text = (error if isinstance(error, str) else
            error.message if isinstance(error, ApplicationError) else f"{type(error).__name__}: {error}")
    _close(run, RunStatus.FAILED, error=text)
    if run.job_id is not None:
        job_fail(job=run.job, error=text if isinstance(error, str | ApplicationError) else error)
    run.refresh_from_db()
    return run


def _cancelled(run: QueuedRun, message: str) -> QueuedRun:
    _close(run, RunStatus.CANCELLED)
    if run.job_id is not None:
        job_fail(job=run.job, error=message, cancelled=True)
    run.refresh_from_db()
    return run


def run_execute(run: QueuedRun, body: Callable[[QueuedRun, RunReporter], RunOutcome], *, echo=None,
                skip: tuple[str, ...] = TERMINAL, stop_on_cancel: bool = True,
                max_attempts: int | None = None, min_interval: float = 0.5, reraise: bool = True) -> QueuedRun:
    """Run ``body(run, reporter)`` through the run's lifecycle (the module docstring); returns the
    run as it ended. Locks the run row while deciding to start, so a cancel in between is not
    lost. ``reraise=False`` records any exception as a failure without raising it (for runs that
    retrying will not help). ``max_attempts``: a run whose Job was delivered more often than this
    (each delivery died with its worker) fails instead of running again."""
    model = type(run)
    with transaction.atomic():
        run = model.objects.select_for_update(of=("self",)).select_related("job").get(pk=run.pk)
        if run.status in skip:
            return run
        if run.cancel_requested:                 # asked to stop while it was between deliveries
            return _cancelled(run, "cancelled between deliveries" if run.started_at else "cancelled before it started")
        run.status, run.started_at = RunStatus.RUNNING, run.started_at or timezone.now()
        fields = ["status", "started_at", *(["updated_at"] if hasattr(run, "updated_at") else [])]
        run.save(update_fields=fields)
        # with the run: a run is never running without a running job, whose heartbeat the sweep reads
        job = job_start(job=run.job) if run.job_id is not None else None
    run.job = job
    if job is not None and max_attempts is not None and job.attempts > max_attempts:
        return run_fail(run=run, error=(
            f"gave up after {job.attempts - 1} attempts: every attempt ended with its worker process; "
            "check the worker's memory or the input, then queue the run again"))
    reporter = RunReporter(run, job, echo=echo, min_interval=min_interval, stop_on_cancel=stop_on_cancel)
    try:
        with JobHeartbeat(job):
            outcome = body(run, reporter)
    except JobAbandoned:
        logger.warning("%s %s: its job %s was ended while this delivery ran (taken for dead); it stops",
                       model.__name__, run.pk, job.pk if job else None)
        run.refresh_from_db()
        return run
    except RunCancelled as exc:
        return _cancelled(run, exc.message)
    except WorkerStopping as exc:
        run_requeue(run=run, reason=str(exc))
        raise Reject(str(exc), requeue=True) from None
    except ApplicationError as exc:
        logger.warning("%s %s failed: %s", model.__name__, run.pk, exc.message)
        return run_fail(run=run, error=exc)
    except (Exception, KeyboardInterrupt) as exc:  # also Ctrl-C in an inline run: never leave it "running"
        logger.exception("%s %s failed", model.__name__, run.pk)
        run = run_fail(run=run, error=exc)
        if reraise or not isinstance(exc, Exception):
            raise
        return run
    # Any other BaseException (the worker going away) passes through and leaves the run "running":
    # the task is delivered again and the body continues where it stopped.
    with transaction.atomic():
        locked = model.objects.select_for_update(of=("self",)).get(pk=run.pk)
        if locked.job_id != run.job_id or locked.status not in (RunStatus.RUNNING, RunStatus.SUCCEEDED):
            # ended (taken for dead) or queued again while this delivery finished: that stands
            logger.warning("%s %s was %s while this delivery finished; its result is not recorded",
                           model.__name__, run.pk, locked.status)
            return locked
        # The job first: whoever waits for the run to succeed then finds its job finished too.
        if job is not None:
            job_succeed(job=job, result=outcome.result, message=outcome.message[:500] or "done")
        now = timezone.now()
        fields = {"status": RunStatus.SUCCEEDED, "error": ""}
        if hasattr(run, "updated_at"):
            fields["updated_at"] = now
        model.objects.filter(pk=run.pk).exclude(status=RunStatus.SUCCEEDED).update(**fields, finished_at=now)
    run.refresh_from_db()
    return run


def run_requeue(*, run: QueuedRun, reason: str) -> QueuedRun:
    """Put a running ``run`` back to ``queued`` because its worker is stopping: its Job too, with one
    attempt less (this delivery was not a death), the reason in its log. A run whose job changed
    meanwhile (swept, retried) is left as it is. Locks the run row, then its Job's."""
    with transaction.atomic():
        run = _locked(run)
        if run.status != RunStatus.RUNNING:
            return run
        logger.warning("%s %s goes back to its queue: %s", type(run).__name__, run.pk, reason)
        run.status = RunStatus.QUEUED
        run.save(update_fields=["status", *(["updated_at"] if hasattr(run, "updated_at") else [])])
        if run.job is not None:
            Job.objects.filter(pk=run.job.pk).update(
                status=Job.Status.QUEUED, attempts=F("attempts") - 1, message=f"requeued: {reason}"[:500],
                updated_at=timezone.now())
            JobReporter(run.job).log(f"requeued: {reason}")
    run.refresh_from_db()
    return run


def _locked(run: QueuedRun) -> QueuedRun:
    """``run`` read again with its row locked, and its Job's row after it (the order every writer
    of both takes)."""
    run = type(run).objects.select_for_update(of=("self",)).get(pk=run.pk)
    run.job = Job.objects.select_for_update().get(pk=run.job_id) if run.job_id is not None else None
    return run


def _gone(run: QueuedRun) -> str | None:
    """Why the worker of ``run`` (locked, with its job) is taken for dead: it is running and its job
    was not heard from past its kind's timeout. None while the run is not running or its worker beats."""
    if run.status != RunStatus.RUNNING or run.job is None:
        return None
    silence = job_lapsed(job=run.job)
    if silence is None:
        return None
    return f"no heartbeat for {silence:.0f} s: the worker died" + (f" ({run.job.worker})" if run.job.worker else "")


def run_abandon(*, run: QueuedRun) -> QueuedRun | None:
    """End ``run`` if its worker is gone (its job's heartbeat lapsed, ``common.jobs.heartbeat``):
    ``cancelled`` when a cancel was waiting for it, else ``failed``, the reason on the run and its
    Job; either can be queued again (:func:`run_retry`). Returns the ended run, or None when it is
    not running or its worker beats. Locks the run row, then its Job's."""
    with transaction.atomic():
        run = _locked(run)
        reason = _gone(run)
        if reason is None:
            return None
        logger.warning("%s %s: %s", type(run).__name__, run.pk, reason)
        if run.cancel_requested:
            return _cancelled(run, f"cancelled: {reason}")
        return run_fail(run=run, error=f"{reason}; queue the run again")


def _who(by) -> str:
    return f" by {by.get_username()}" if by is not None else ""


def run_cancel(*, run: QueuedRun, by=None) -> QueuedRun:
    """Cancel ``run``: a queued run ends ``cancelled`` at once (its Job fails with the reason); a
    running one gets ``cancel_requested`` and stops at its next progress report, unless its worker
    is gone (its job's heartbeat lapsed): then it ends ``cancelled`` at once too, as nobody is left
    to read the flag; a finished one is a 409 ``run_finished``. Locks the run row (then its Job's) so
    that a worker starting it at the same time sees either the flag or the cancelled status."""
    model = type(run)
    with transaction.atomic():
        run = _locked(run)
        if run.status in TERMINAL:
            raise ConflictError(f"{model._meta.verbose_name} {run.pk} is already {run.status}", code="run_finished",
                                extra={"status": run.status})
        gone = _gone(run)
        run.cancel_requested = True
        fields = ["cancel_requested"]
        if run.status == RunStatus.QUEUED or gone:
            run.status, run.finished_at = RunStatus.CANCELLED, timezone.now()
            fields += ["status", "finished_at"]
        if hasattr(run, "updated_at"):
            fields.append("updated_at")
        run.save(update_fields=fields)
        if run.job_id is not None:
            if gone:
                job_fail(job=run.job, error=f"cancelled{_who(by)}: {gone}", cancelled=True)
            elif run.status == RunStatus.CANCELLED:
                job_fail(job=run.job, error=f"cancelled{_who(by)} before it started", cancelled=True)
            else:
                JobReporter(run.job).log(f"cancel requested{_who(by)}")
    return run


def run_retry(*, run: QueuedRun, by=None, queue: bool = True) -> QueuedRun:
    """Queue a failed or cancelled ``run`` again: same row, a fresh Job (kind, queue and parameters
    of the last one, which names it as ``retried_as``), ``retries`` + 1, the cancel flag and error
    cleared; its task is sent after commit (``queue=False``: not sent, the caller runs it inline). A
    running run whose worker is gone (its job's heartbeat lapsed) is failed with that reason first,
    then queued. Anything else is a 409 ``run_not_retryable``. Locks the run row (then its Job's)."""
    model = type(run)
    with transaction.atomic():
        run = _locked(run)
        gone = _gone(run)
        if gone:  # its worker died while it ran: it failed
            run = _locked(run_fail(run=run, error=f"{gone}; queue the run again"))
        if run.status not in (RunStatus.FAILED, RunStatus.CANCELLED):
            raise ConflictError(f"{model._meta.verbose_name} {run.pk} is {run.status}; only a failed or cancelled "
                                "run can be retried", code="run_not_retryable", extra={"status": run.status})
        if not run.task_name:
            raise ConflictError(f"a {model._meta.verbose_name} cannot be queued again", code="run_not_retryable")
        old = run.job
        run.job = job_create(kind=old.kind if old else run.job_kind, queue=old.queue if old else "cpu",
                             params=old.params if old else {"run": run.pk}, created_by=by)
        JobReporter(run.job).log(f"retry {run.retries + 1}{_who(by)}" + (f" of job {old.pk}" if old else ""))
        if old is not None:  # the ended job points at the one that carries its run on
            Job.objects.filter(pk=old.pk).update(retried_as=run.job, updated_at=timezone.now())
        run.status, run.error, run.cancel_requested = RunStatus.QUEUED, "", False
        run.finished_at = None
        run.retries += 1
        fields = ["job", "status", "error", "cancel_requested", "finished_at", "retries"]
        if hasattr(run, "updated_at"):
            fields.append("updated_at")
        run.save(update_fields=fields)
        if queue:
            run_enqueue(run=run)
    return run


def run_enqueue(*, run: QueuedRun) -> None:
    """Send ``run``'s task (``run.task_name`` with its primary key, on its Job's queue) once the
    current transaction commits. A broker that cannot take the message fails the run and its Job
    with that reason, so no run waits as ``queued`` for a message that was never sent."""
    if not run.task_name:
        raise ValueError(f"{type(run).__name__} names no task to queue")
    model, pk, task_name = type(run), run.pk, run.task_name
    queue = run.job.queue if run.job_id is not None else "cpu"

    def send() -> None:
        try:
            current_app.send_task(task_name, args=[pk], queue=queue)
        except Exception as exc:  # the broker is down or refuses the message
            logger.exception("could not queue %s %s", model.__name__, pk)
            run_fail(run=model.objects.select_related("job").get(pk=pk), error=(
                f"could not queue the run: the task broker refused it ({type(exc).__name__}: {exc}); "
                "queue it again once the broker is back"))

    transaction.on_commit(send)


def queued_run_models() -> list[type[QueuedRun]]:
    """The concrete run kinds: the models on the far side of Job's reverse one-to-one relations."""
    return [rel.related_model for rel in Job._meta.related_objects
            if rel.one_to_one and issubclass(rel.related_model, QueuedRun)]


def job_run(*, job: Job) -> QueuedRun | None:
    """The run whose current Job is ``job``, whatever its kind; None for a bare job (a video import)."""
    for rel in Job._meta.related_objects:
        if rel.one_to_one and issubclass(rel.related_model, QueuedRun):
            run = rel.related_model.objects.filter(job=job).first()
            if run is not None:
                return run
    return None
