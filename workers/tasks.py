"""Celery tasks of the workers app: training and evaluation runs. Thin wrappers that load the run
and call one service; the services are idempotent and training resumes from its last checkpoint,
so a task re-delivered after its worker died (``acks_late``, ``reject_on_worker_lost``) continues
where the last attempt stopped. The services queue them on the ``gpu`` queue by name
(``common.jobs.runs.run_enqueue``), so they never import this module."""
from __future__ import annotations

import logging

from celery import shared_task

from workers.execute import evaluation_run_execute, training_run_execute
from workers.models import EvaluationRun, TrainingRun

logger = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=0)
def training_run_task(self, run_id: int) -> dict:
    """Train one run (``workers.execute.training_run_execute``)."""
    run = TrainingRun.objects.filter(pk=run_id).first()
    if run is None:
        logger.warning("training run %s no longer exists; nothing to do", run_id)
        return {"run": run_id, "status": "missing"}
    run = training_run_execute(run=run)
    return {"run": run.pk, "status": run.status, "steps": run.steps_done}


@shared_task(bind=True, acks_late=True, max_retries=0)
def evaluation_run_task(self, run_id: int) -> dict:
    """Evaluate one run (``workers.execute.evaluation_run_execute``)."""
    run = EvaluationRun.objects.filter(pk=run_id).first()
    if run is None:
        logger.warning("evaluation run %s no longer exists; nothing to do", run_id)
        return {"run": run_id, "status": "missing"}
    run = evaluation_run_execute(run=run)
    return {"run": run.pk, "status": run.status}
