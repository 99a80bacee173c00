"""Job bookkeeping. Every long task reports through a :class:`JobReporter`; a worker's reporter
also carries the job's heartbeat (``common.jobs.heartbeat``)."""
from __future__ import annotations

import logging
import os
import socket
import time
import traceback

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from common.models import Job

logger = logging.getLogger(__name__)
LOG_TAIL_CHARS = 8000


def job_create(*, kind: str, params: dict | None = None, queue: str = "cpu", created_by=None) -> Job:
    return Job.objects.create(kind=kind, params=params or {}, queue=queue, created_by=created_by)


def _append(tail: str, line: str) -> str:
    stamp = timezone.now().strftime("%H:%M:%S")
    text = f"{tail}{stamp} {line}\n"
    return text[-LOG_TAIL_CHARS:]


class JobAbandoned(Exception):
    """Raised by a worker's reporter when its job is no longer running: the sweep took the worker for
    dead (``common.jobs.sweep``) or a cancel ended it. The delivery stops and records nothing more."""


def job_start(*, job: Job) -> Job:
    """Mark a job running (again, after a re-delivery: attempts counts the deliveries), with its
    first heartbeat."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        job.status = Job.Status.RUNNING
        job.started_at = job.heartbeat_at = timezone.now()
        job.finished_at = None
        job.error = ""
        job.attempts = F("attempts") + 1
        job.worker = f"{socket.gethostname()}:{os.getpid()}"
        job.log_tail = _append(job.log_tail, f"started on {job.worker}")
        job.save()
    job.refresh_from_db()
    return job


def job_progress(*, job: Job, fraction: float, message: str = "", log: str | None = None,
                 beat: bool = False) -> bool:
    """Record progress. Writes outside any caller transaction (autocommit) so readers see it live.

    ``beat``: the job's own worker reports, so the write is also its heartbeat, and it is made only
    while the job is running; returns False (nothing written) once the job is not."""
    fraction = min(1.0, max(0.0, float(fraction)))
    now = timezone.now()
    updates = {"progress": fraction, "updated_at": now}
    if message:
        updates["message"] = message[:500]
    if log:
        job.log_tail = _append(job.log_tail, log)
        updates["log_tail"] = job.log_tail
    rows = Job.objects.filter(pk=job.pk)
    if beat:
        rows, updates["heartbeat_at"] = rows.filter(status=Job.Status.RUNNING), now
    job.progress = fraction
    return rows.update(**updates) > 0


def job_beat(*, job: Job) -> bool:
    """The heartbeat of a running job's worker alone (no progress to report); False once the job is
    no longer running."""
    return Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(heartbeat_at=timezone.now()) > 0


def job_succeed(*, job: Job, result: dict | None = None, message: str = "done") -> Job:
    job.status = Job.Status.SUCCEEDED
    job.progress = 1.0
    job.message = message[:500]
    job.result = result or {}
    job.finished_at = timezone.now()
    job.log_tail = _append(Job.objects.get(pk=job.pk).log_tail, message)
    job.save(update_fields=["status", "progress", "message", "result", "finished_at", "log_tail", "updated_at"])
    return job


def job_fail(*, job: Job, error: BaseException | str, cancelled: bool = False) -> Job:
    """End ``job`` failed with ``error`` (an exception's traceback goes in its error too);
    ``cancelled``: it ended because its run was cancelled, which the job says beside the failure."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    job.status = Job.Status.FAILED
    job.cancelled = cancelled
    job.error = text if isinstance(error, str) else text + "\n" + "".join(traceback.format_exception(error))[-4000:]
    job.message = text[:500]
    job.finished_at = timezone.now()
    job.log_tail = _append(Job.objects.get(pk=job.pk).log_tail, f"failed: {text}")
    job.save(update_fields=["status", "cancelled", "error", "message", "finished_at", "log_tail", "updated_at"])
    return job


class JobReporter:
    """A progress callback ``reporter(fraction, message)`` bound to a Job (or to nothing).

    Database writes are throttled to one every ``min_interval`` seconds; a terminal callback
    (e.g. a tqdm bar in a management command) sees every call. ``beats``: the reporter of the job's
    own worker, whose writes are the job's heartbeat; it raises :class:`JobAbandoned` once the job
    is no longer running (a reporter that only adds a line, for a cancel or a retry, does not beat).
    """

    def __init__(self, job: Job | None = None, *, echo=None, min_interval: float = 0.5, beats: bool = False):
        self.job = job
        self.echo = echo
        self.min_interval = min_interval
        self.beats = beats
        self._last = 0.0

    def _write(self, **fields) -> None:
        if not job_progress(job=self.job, beat=self.beats, **fields) and self.beats:
            raise JobAbandoned(f"job {self.job.pk} is no longer running: this delivery stops")

    def __call__(self, fraction: float, message: str = "") -> None:
        if self.echo is not None:
            self.echo(fraction, message)
        now = time.monotonic()
        if self.job is not None and (now - self._last >= self.min_interval or fraction >= 1.0):
            self._last = now
            self._write(fraction=fraction, message=message)

    def log(self, line: str) -> None:
        logger.info(line)
        if self.job is not None:
            self._write(fraction=self.job.progress, log=line)
