"""Celery tasks of the annotation app: describer, query-writer and mining runs. Thin wrappers that
load the run and run its service through ``common.jobs.runs.run_execute`` (status, job, errors,
cancel); the services are idempotent, so a re-delivered task (a worker killed mid-run,
``acks_late``) continues where the last one stopped."""
from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task

from annotation.models import DescriptionRun, GenerationRun, MiningRun
from common.jobs.runs import RunOutcome, run_execute
from common.models import RunStatus

logger = logging.getLogger(__name__)


def _run(model, run_id: int, execute: Callable) -> dict:
    run = model.objects.filter(pk=run_id).select_related("job").first()
    if run is None:
        logger.warning("%s %s no longer exists; nothing to do", model.__name__, run_id)
        return {"run": run_id, "status": "missing"}
    counts: dict = {}

    def body(run, reporter) -> RunOutcome:
        counts.update(execute(run=run, reporter=reporter))
        return RunOutcome(result=counts, message=", ".join(f"{k} {v}" for k, v in counts.items()
                                                           if isinstance(v, int))[:500] or "done")

    run = run_execute(run, body)
    if run.status == RunStatus.FAILED:
        return {"run": run_id, "status": "failed", "error": run.error}
    return {"run": run_id, "status": run.status, **{k: v for k, v in counts.items() if isinstance(v, int)}}


@shared_task(bind=True, acks_late=True, max_retries=0)
def description_run_task(self, run_id: int) -> dict:
    from annotation.benchmark.services.descriptions import description_run_execute

    return _run(DescriptionRun, run_id, description_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def generation_run_task(self, run_id: int) -> dict:
    from annotation.benchmark.services.queries import generation_run_execute

    return _run(GenerationRun, run_id, generation_run_execute)


@shared_task(bind=True, acks_late=True, max_retries=0)
def mining_run_task(self, run_id: int) -> dict:
    from annotation.benchmark.services.mining import mining_run_execute

    return _run(MiningRun, run_id, mining_run_execute)
