"""A running job's heartbeat (``Job.heartbeat_at``) and when it has lapsed.

The worker executing a job beats: :func:`common.jobs.services.job_start` gives the first beat, every
progress write of the job's own reporter is one (throttled with it), and :class:`JobHeartbeat`, a
thread beside the work, beats every ``TRAJLAB_JOB_HEARTBEAT_S`` seconds through steps that report
nothing (a model loading, one long tracker call). A job not heard from for longer than its kind's
timeout (``TRAJLAB_JOB_TIMEOUTS``) has lapsed: its worker died. ``common.jobs.sweep`` ends it.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime

from django.conf import settings
from django.db import connection, connections
from django.utils import timezone

from common.jobs.services import job_beat
from common.models import Job

logger = logging.getLogger(__name__)


def job_timeout(kind: str) -> int:
    """Seconds a running job of ``kind`` may go unheard before it is taken for abandoned."""
    timeouts = settings.TRAJLAB_JOB_TIMEOUTS
    return timeouts.get(kind, timeouts["default"])


def job_lapsed(*, job: Job, now: datetime | None = None) -> float | None:
    """Seconds since ``job``'s worker was last heard from, when that is past its kind's timeout and
    the job is still running; None otherwise. A job from before heartbeats counts from its start."""
    if job.status != Job.Status.RUNNING:
        return None
    last = job.heartbeat_at or job.started_at or job.updated_at
    silence = ((now or timezone.now()) - last).total_seconds()
    return silence if silence > job_timeout(job.kind) else None


class JobHeartbeat:
    """``with JobHeartbeat(job):`` beats for ``job`` from a thread every ``interval`` seconds
    (``TRAJLAB_JOB_HEARTBEAT_S``) until the block ends, or until the job is no longer running.

    No thread is started for no job, or inside a transaction (an inline run in a test or a command:
    nobody else sees the job, and the thread would wait on the caller's row locks). The thread
    keeps its own database connection and closes it when it stops; a failed beat (the database
    busy) is logged and the next one tried."""

    def __init__(self, job: Job | None, *, interval: float | None = None):
        self.job = job
        self.interval = settings.TRAJLAB_JOB_HEARTBEAT_S if interval is None else interval
        self.beats = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    if not job_beat(job=self.job):
                        return  # swept or ended: nothing left to keep alive
                    self.beats += 1
                except Exception:
                    logger.warning("job %s: heartbeat not recorded", self.job.pk, exc_info=True)
        finally:
            connections.close_all()  # this thread's connections only

    def __enter__(self) -> JobHeartbeat:
        if self.job is not None and not connection.in_atomic_block:
            self._thread = threading.Thread(target=self._run, name=f"job-{self.job.pk}-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(self.interval, 5.0))
