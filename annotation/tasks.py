"""Celery tasks of the annotation app: describer, query-writer and mining runs. Thin wrappers that
load the run and run its service through ``model_run_execute`` (``common.jobs.runs.run_execute``:
status, job, errors, cancel); the services are idempotent, so a re-delivered task (a worker killed
mid-run, ``acks_late``) continues where the last one stopped. The services queue these tasks by
name (``common.jobs.runs.run_enqueue``), so they never import this module."""
from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task

from annotation.benchmark.services.descriptions import description_run_execute
from annotation.benchmark.services.mining import mining_run_execute
from annotation.benchmark.services.queries import generation_run_execute
from annotation.benchmark.services.runs import model_run_execute
from annotation.models import DescriptionRun, GenerationRun, MiningRun
from common.models import RunStatus

logger = logging.getLogger(__name__)


def _run(model, run_id: int, execute: Callable) -> dict:
    run = model.objects.filter(pk=run_id).select_related("job").first()
    if run is None:
        logger.warning("%s %s no longer exists; nothing to do", model.__name__, run_id)
        return {"run": run_id, "status": "missing"}
    run, counts = model_run_execute(run=run, execute=execute)
    if run.status == RunStatus.FAILED:
        return {"run": run_id, "status": "failed", "error": run.error}
    return {"run": run_id, "status": run.status, **{k: v for k, v in counts.items() if isinstance(v, int)}}


@shared_task(bind=True, acks_late=True, max_retries=0)
def description_run_task(self, run_id: int) -> dict:
    return _run(DescriptionRun, run_id, description_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def generation_run_task(self, run_id: int) -> dict:
    return _run(GenerationRun, run_id, generation_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def mining_run_task(self, run_id: int) -> dict:
    return _run(MiningRun, run_id, mining_run_execute)
