"""Celery tasks of the annotation app: describer, query-writer and mining runs. Thin wrappers that
load the run, mark its job and call one service; the services are idempotent, so a re-delivered
task (a worker killed mid-run, ``acks_late``) continues where the last one stopped."""
from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task

from annotation.models import DescriptionRun, GenerationRun, MiningRun
from common.errors import ApplicationError
from workers.services import JobReporter, job_fail, job_start, job_succeed

logger = logging.getLogger(__name__)


def _run(model, run_id: int, execute: Callable) -> dict:
    run = model.objects.filter(pk=run_id).select_related("job").first()
    if run is None:
        logger.warning("%s %s no longer exists; nothing to do", model.__name__, run_id)
        return {"run": run_id, "status": "missing"}
    job = job_start(job=run.job) if run.job is not None else None
    try:
        counts = execute(run=run, reporter=JobReporter(job))
    except ApplicationError as exc:
        if job is not None:
            job_fail(job=job, error=exc.message)
        return {"run": run_id, "status": "failed", "error": exc.message}
    except Exception as exc:
        if job is not None:
            job_fail(job=job, error=exc)
        raise
    if job is not None:
        job_succeed(job=job, result=counts, message=", ".join(f"{k} {v}" for k, v in counts.items()
                                                              if isinstance(v, int))[:500] or "done")
    return {"run": run_id, "status": "succeeded", **{k: v for k, v in counts.items() if isinstance(v, int)}}


@shared_task(bind=True, acks_late=True, max_retries=0)
def description_run_task(self, run_id: int) -> dict:
    from annotation.services.descriptions import description_run_execute

    return _run(DescriptionRun, run_id, description_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def generation_run_task(self, run_id: int) -> dict:
    from annotation.services.queries import generation_run_execute

    return _run(GenerationRun, run_id, generation_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def mining_run_task(self, run_id: int) -> dict:
    from annotation.services.mining import mining_run_execute

    return _run(MiningRun, run_id, mining_run_execute)
