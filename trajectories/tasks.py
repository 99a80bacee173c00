"""Celery tasks of the trajectories app: thin wrappers that load a row and call one service."""
from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from common.errors import ApplicationError
from common.models import Job
from trajectories.models import ProposalRun
from trajectories.services.crops import crop_strips_store, crops_queued
from trajectories.services.imports import track_import_execute
from trajectories.services.ingestion import video_import_job_execute
from trajectories.services.proposals import proposal_run_execute

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=0)
def proposal_run_task(self, run_id: int) -> dict:
    """Execute one proposal run: a tracker's, or an import's (its file's tracks stored). Re-delivery
    after a killed worker re-runs it idempotently."""
    kind = ProposalRun.objects.filter(pk=run_id).values_list("kind", flat=True).first()
    if kind is None:
        logger.warning("proposal run %s no longer exists; nothing to do", run_id)
        return {"run": run_id, "status": "missing"}
    if kind == ProposalRun.Kind.IMPORTED:
        run = track_import_execute(run_id=run_id)
    else:
        try:
            run = proposal_run_execute(run_id=run_id)
        except ApplicationError as exc:
            # A refused configuration or input: recorded on the run and its job; retrying won't help.
            logger.warning("proposal run %s failed: %s", run_id, exc.message)
            return {"run": run_id, "status": "failed", "error": exc.message}
    out = {"run": run.pk, "status": run.status, "trajectories": run.trajectory_count}
    if run.status == ProposalRun.Status.SUCCEEDED and settings.TRAJLAB_PRECOMPUTE_CROPS and not crops_queued(run):
        # a cpu run's crop strips now, in this worker, rather than behind every run queued after it
        # (a gpu run's go to the cpu queue: crops_queued)
        out["crops"] = crop_strips_store(run=run)
    return out


@shared_task(bind=True, acks_late=True, max_retries=0)
def crop_strips_task(self, run_id: int) -> dict:
    """Make the crop strips of a stored run (``trajectories.services.crops``); idempotent."""
    run = ProposalRun.objects.filter(pk=run_id, status=ProposalRun.Status.SUCCEEDED).first()
    if run is None:
        logger.warning("proposal run %s is not a stored run; no crop strips to make", run_id)
        return {"run": run_id, "status": "missing"}
    return {"run": run_id, **crop_strips_store(run=run)}


@shared_task(bind=True, acks_late=True, max_retries=0)
def video_import_task(self, job_id: int) -> dict:
    """Import a large upload that the API staged (see ``video_upload_import``)."""
    if not Job.objects.filter(pk=job_id).exists():
        logger.warning("import job %s no longer exists; nothing to do", job_id)
        return {"job": job_id, "status": "missing"}
    job = video_import_job_execute(job_id=job_id)
    return {"job": job.pk, "status": job.status, "result": job.result}
