"""Every task the platform queues is delivered again when its worker dies: acknowledged only after it
ends (``acks_late``) and put back when its pool process is lost (``reject_on_worker_lost``), the
run kinds' tasks and the others (imports of large uploads, crop strips) alike. What a second
delivery does is each service's (``tests/*/test_run_redelivery.py``, ``tests/integration``)."""
from __future__ import annotations

from common.jobs.runs import queued_run_models


def test_every_task_is_acknowledged_late_and_put_back_when_its_worker_is_lost():
    from config.celery import app

    app.loader.import_default_modules()
    ours = {name: task for name, task in app.tasks.items()
            if name.split(".")[0] in ("accounts", "annotation", "common", "trajectories", "workers")}
    queued = {model.task_name for model in queued_run_models()}
    assert queued | {"trajectories.tasks.video_import_task", "trajectories.tasks.crop_strips_task"} <= set(ours)
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost
    for name, task in ours.items():
        assert task.acks_late, name
        assert task.reject_on_worker_lost in (None, True), name      # None: the app's setting
