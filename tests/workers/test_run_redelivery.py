"""An evaluation run whose worker dies mid-run is picked up again: delivered a second time (as the
broker does after the kill) it loads the model again, evaluates and ends succeeded with two
attempts, with the figures of an evaluation that was never interrupted. (Training runs resume
from their checkpoint: ``tests/integration/test_training_worker.py``.)"""
from __future__ import annotations

import pytest

from tests.common.redelivery import WorkerDied, die_at_report
from tests.workers.factories import finished_run
from workers import tasks
from workers.evaluation import evaluation_run_create, evaluation_run_evaluate

pytestmark = pytest.mark.django_db


def test_an_evaluation_run_continues_after_its_worker_died(snapshots, trained_dirs, var_dir, monkeypatch):
    uninterrupted, _ = evaluation_run_create(snapshot=snapshots["dev"], queue=False,
                                             training_run=finished_run(snapshots, trained_dirs["vtrajembed"]))
    uninterrupted = evaluation_run_evaluate(run=uninterrupted)
    assert uninterrupted.status == "succeeded", uninterrupted.error
    run, _ = evaluation_run_create(snapshot=snapshots["dev"], queue=False,
                                   training_run=finished_run(snapshots, trained_dirs["vtrajembed"]))
    die_at_report(monkeypatch, 2)                     # the model loaded, nothing evaluated yet
    with pytest.raises(WorkerDied):
        tasks.evaluation_run_task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert (run.status, run.job.status, run.job.attempts, run.metrics) == ("running", "running", 1, {})
    tasks.evaluation_run_task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert run.status == "succeeded" and run.job.status == "succeeded" and run.job.attempts == 2, run.error
    assert run.metrics == uninterrupted.metrics and run.metrics["t2traj"]["n_queries"] > 0
