"""Abandoned jobs: a running job whose worker stopped beating (``common.jobs.heartbeat``) for longer
than its kind's timeout is ended with the reason, ``no heartbeat for N s: the worker died``. Its
run ends ``failed`` (``cancelled`` when a cancel was waiting for it) and can be queued again; a
job without a run (a video import) ends ``failed``.

Who sweeps, in the embedded and the production mode alike (Celery beat runs in neither):

- every Celery worker, from a thread of its main process every ``TRAJLAB_JOB_SWEEP_S`` seconds
  (:class:`JobSweeper`, started by the worker step in ``config/celery.py``), so one worker finds
  the jobs of another that died;
- the web, whenever the job list is read (``GET /api/jobs/``), so a platform whose workers are all
  gone still tells the truth; and a cancel or a retry reads the heartbeat of the run it acts on
  (``common.jobs.runs``).

A sweep only writes when it finds a lapsed job, each under the run's and the job's row locks,
checked again under them: a worker that beats meanwhile keeps its job.
"""
from __future__ import annotations

import logging
import threading
from datetime import datetime

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from common.jobs.heartbeat import job_lapsed
from common.jobs.runs import job_run, run_abandon
from common.jobs.services import job_fail
from common.models import Job

logger = logging.getLogger(__name__)


def _job_abandon(*, job: Job) -> Job | None:
    """End a job without a run whose heartbeat lapsed (locked and checked again); None if it beats."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        silence = job_lapsed(job=job)
        if silence is None:
            return None
        logger.warning("job %s (%s): no heartbeat for %.0f s", job.pk, job.kind, silence)
        return job_fail(job=job, error=f"no heartbeat for {silence:.0f} s: the worker died"
                                        + (f" ({job.worker})" if job.worker else ""))


def jobs_sweep(*, now: datetime | None = None) -> list[Job]:
    """End every running job whose heartbeat lapsed (the module docstring); returns those jobs as
    they ended. Reads the running jobs (one query); writes nothing when none lapsed."""
    now = now or timezone.now()
    ended = []
    for job in Job.objects.filter(status=Job.Status.RUNNING).order_by("id"):
        if job_lapsed(job=job, now=now) is None:
            continue
        run = job_run(job=job)
        if run is not None:
            run = run_abandon(run=run)
            if run is not None:
                ended.append(Job.objects.get(pk=job.pk))
        elif (bare := _job_abandon(job=job)) is not None:
            ended.append(bare)
    return ended


class JobSweeper(threading.Thread):
    """A daemon thread that runs :func:`jobs_sweep` every ``interval`` seconds
    (``TRAJLAB_JOB_SWEEP_S``) until :meth:`stop`; a failed sweep is logged and the next one tried.
    It closes its database connections after each sweep (it holds none while it waits)."""

    def __init__(self, *, interval: float | None = None):
        super().__init__(name="job-sweeper", daemon=True)
        self.interval = settings.TRAJLAB_JOB_SWEEP_S if interval is None else interval
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                for job in jobs_sweep():
                    logger.warning("job %s (%s) ended: %s", job.pk, job.kind, job.message)
            except Exception:
                logger.exception("the job sweep failed; trying again in %s s", self.interval)
            finally:
                connections.close_all()  # this thread's connections only

    def stop(self) -> None:
        self._stop_event.set()
