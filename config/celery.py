"""The Celery application: queues ``cpu`` and ``gpu``, late acknowledgement, one task at a time.

Workers choose their queues with ``-Q``: a machine with a GPU runs ``-Q gpu``, the others
``-Q cpu``. Tasks are acknowledged after they finish (``acks_late``) and re-delivered if a
worker dies, so every task calls an idempotent service.
"""
from __future__ import annotations

import os

from celery import Celery, bootsteps
from kombu import Exchange, Queue

from common.observability import tasks as observability_tasks

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("trajlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_default_queue="cpu",
    # Each queue has its own exchange and key: a gpu task must never reach a cpu-only worker.
    task_queues=(
        Queue("cpu", Exchange("cpu", type="direct"), routing_key="cpu"),
        Queue("gpu", Exchange("gpu", type="direct"), routing_key="gpu"),
    ),
    task_default_exchange="cpu",
    task_default_routing_key="cpu",
    task_routes={
        # Tracker runs go to the gpu queue only when the backend needs it; the service that
        # queues them chooses (see trajectories.services.proposals).
        # Training and evaluation runs need the GPU machines (their services also name the queue).
        "workers.tasks.training_run_task": {"queue": "gpu"},
        "workers.tasks.evaluation_run_task": {"queue": "gpu"},
        "workers.tasks.*": {"queue": "cpu"},
    },
    task_track_started=True,
    broker_connection_retry_on_startup=True,
    result_backend=None,
    task_ignore_result=True,
)
app.autodiscover_tasks()
# Request ids in task headers and worker logs; a warm shutdown puts the running job back on its queue.
observability_tasks.connect()


class JobSweepStep(bootsteps.StartStopStep):
    """Each worker sweeps for abandoned jobs (``common.jobs.sweep``) from a thread of its main
    process, once its pool is up: no Celery beat is needed (the embedded mode runs none), and the
    jobs of a worker that died are ended by another worker, or by the web."""

    requires = {"celery.worker.components:Pool"}

    def __init__(self, worker, **kwargs):
        super().__init__(worker, **kwargs)
        self.sweeper = None

    def start(self, worker):
        from common.jobs.sweep import JobSweeper  # the worker has set Django up by now

        self.sweeper = JobSweeper()
        self.sweeper.start()

    def stop(self, worker):
        if self.sweeper is not None:
            self.sweeper.stop()


app.steps["worker"].add(JobSweepStep)
