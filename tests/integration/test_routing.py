"""Queue routing on the real broker: gpu work reaches only the gpu queue, cpu work only cpu."""
from __future__ import annotations

import pytest
from django.conf import settings

from config.celery import app
from trajectories.tasks import proposal_run_task

pytestmark = pytest.mark.integration


def _depths() -> dict[str, int]:
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        return {q: channel.queue_declare(q, passive=False, durable=True).message_count for q in ("cpu", "gpu")}


def _purge() -> None:
    with app.connection_for_write() as conn:
        for q in ("cpu", "gpu"):
            conn.default_channel.queue_purge(q)


@pytest.mark.parametrize("queue", ["cpu", "gpu"])
def test_a_task_lands_only_in_its_queue(queue):
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "amqp://")):
        pytest.fail("routing is checked on the real broker (make test sets CELERY_BROKER_URL)")
    _depths()  # declare and bind both queues
    _purge()
    try:
        proposal_run_task.apply_async(args=[-1], queue=queue)
        depths = _depths()
        assert depths[queue] == 1 and sum(depths.values()) == 1, depths
    finally:
        _purge()


def test_training_and_evaluation_runs_go_to_the_gpu_queue_by_default():
    from workers.tasks import evaluation_run_task, training_run_task

    router = app.amqp.router
    for task in (training_run_task, evaluation_run_task):
        assert router.route({}, task.name)["queue"].name == "gpu"
    assert router.route({}, "workers.tasks.something_else")["queue"].name == "cpu"
