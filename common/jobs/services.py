"""Job bookkeeping. Every long task reports through a :class:`JobReporter`."""
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


def job_start(*, job: Job) -> Job:
    """Mark a job running (again, after a re-delivery: attempts counts the deliveries)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        job.status = Job.Status.RUNNING
        job.started_at = timezone.now()
        job.finished_at = None
        job.error = ""
        job.attempts = F("attempts") + 1
        job.worker = f"{socket.gethostname()}:{os.getpid()}"
        job.log_tail = _append(job.log_tail, f"started on {job.worker}")
        job.save()
    job.refresh_from_db()
    return job


def job_progress(*, job: Job, fraction: float, message: str = "", log: str | None = None) -> None:
    """Record progress. Writes outside any caller transaction (autocommit) so readers see it live."""
    fraction = min(1.0, max(0.0, float(fraction)))
    updates = {"progress": fraction, "updated_at": timezone.now()}
    if message:
        updates["message"] = message[:500]
    if log:
        job.log_tail = _append(job.log_tail, log)
        updates["log_tail"] = job.log_tail
    Job.objects.filter(pk=job.pk).update(**updates)
    job.progress = fraction


def job_succeed(*, job: Job, result: dict | None = None, message: str = "done") -> Job:
    job.status = Job.Status.SUCCEEDED
    job.progress = 1.0
    job.message = message[:500]
    job.result = result or {}
    job.finished_at = timezone.now()
    job.log_tail = _append(Job.objects.get(pk=job.pk).log_tail, message)
    job.save(update_fields=["status", "progress", "message", "result", "finished_at", "log_tail", "updated_at"])
    return job


def job_fail(*, job: Job, error: BaseException | str) -> Job:
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    job.status = Job.Status.FAILED
    job.error = text if isinstance(error, str) else text + "\n" + "".join(traceback.format_exception(error))[-4000:]
    job.message = text[:500]
    job.finished_at = timezone.now()
    job.log_tail = _append(Job.objects.get(pk=job.pk).log_tail, f"failed: {text}")
    job.save(update_fields=["status", "error", "message", "finished_at", "log_tail", "updated_at"])
    return job


class JobReporter:
    """A progress callback ``reporter(fraction, message)`` bound to a Job (or to nothing).

    Database writes are throttled to one every ``min_interval`` seconds; a terminal callback
    (e.g. a tqdm bar in a management command) sees every call.
    """

    def __init__(self, job: Job | None = None, *, echo=None, min_interval: float = 0.5):
        self.job = job
        self.echo = echo
        self.min_interval = min_interval
        self._last = 0.0

    def __call__(self, fraction: float, message: str = "") -> None:
        if self.echo is not None:
            self.echo(fraction, message)
        now = time.monotonic()
        if self.job is not None and (now - self._last >= self.min_interval or fraction >= 1.0):
            self._last = now
            job_progress(job=self.job, fraction=fraction, message=message)

    def log(self, line: str) -> None:
        logger.info(line)
        if self.job is not None:
            job_progress(job=self.job, fraction=self.job.progress, log=line)
