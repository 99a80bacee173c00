"""The one queued-run lifecycle (``common.jobs.runs``): the wrapper that starts, fails, finishes and
cancels a run, and cancel / retry of every run kind through the services and
``POST /api/jobs/{id}/cancel/`` and ``/retry/``."""
from __future__ import annotations

import pytest

from common.errors import ApplicationError, ConflictError
from common.jobs import runs as runs_module
from common.jobs.runs import (
    RunOutcome,
    job_run,
    queued_run_models,
    run_cancel,
    run_execute,
    run_retry,
)
from common.jobs.services import job_create
from common.models import Job, RunStatus

pytestmark = pytest.mark.django_db


def _snapshot():
    from annotation.models import RelationSnapshot

    return RelationSnapshot.objects.create(split="train", content_sha256="0" * 64, path="/nonexistent",
                                           pool_versions={}, counts={}, complete=True)


def _proposal(job):
    from tests.trajectories.factories import run_factory

    return run_factory(job=job)


def _description(job):
    from annotation.models import DescriptionRun

    return DescriptionRun.objects.create(backend={"name": "heuristic"}, prompt_version="t", prompt_sha256="0" * 64,
                                         job=job)


def _generation(job):
    from annotation.models import GenerationRun

    return GenerationRun.objects.create(backend={"name": "heuristic"}, prompt_version="t", prompt_sha256="0" * 64,
                                        job=job)


def _mining(job):
    from annotation.models import MiningRun

    return MiningRun.objects.create(split="train", config={}, job=job)


def _training(job):
    from workers.models import TrainingRun

    return TrainingRun.objects.create(snapshot=_snapshot(), model_kind="vtrajembed", config={}, steps_total=4, job=job)


def _evaluation(job):
    from workers.models import EvaluationRun

    return EvaluationRun.objects.create(kind="untrained", snapshot=_snapshot(), model_kind="vtrajembed", job=job)


KINDS = {
    "proposalrun": (_proposal, "proposal_run", "trajectories.tasks.proposal_run_task"),
    "descriptionrun": (_description, "description_run", "annotation.tasks.description_run_task"),
    "generationrun": (_generation, "generation_run", "annotation.tasks.generation_run_task"),
    "miningrun": (_mining, "mining_run", "annotation.tasks.mining_run_task"),
    "trainingrun": (_training, "training_run", "workers.tasks.training_run_task"),
    "evaluationrun": (_evaluation, "evaluation_run", "workers.tasks.evaluation_run_task"),
}



def make_run(kind: str, status: str = RunStatus.QUEUED):
    factory, job_kind, _ = KINDS[kind]
    run = factory(job_create(kind=job_kind, queue="cpu", params={"x": 1}))
    type(run).objects.filter(pk=run.pk).update(status=status)
    run.refresh_from_db()
    return run


def test_every_run_kind_is_found():
    assert sorted(m._meta.model_name for m in queued_run_models()) == sorted(KINDS)
    for kind, (_, job_kind, task) in KINDS.items():
        run = make_run(kind)
        assert job_run(job=run.job) == run and run.task_name == task and run.job_kind == job_kind
    assert job_run(job=job_create(kind="video_import")) is None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_cancel_and_retry_each_kind(kind, manager, sent, django_capture_on_commit_callbacks):
    # a queued run is cancelled at once, its job fails with the reason
    run = run_cancel(run=make_run(kind), by=manager)
    assert run.status == "cancelled" and run.cancel_requested and run.finished_at is not None
    run.job.refresh_from_db()
    assert run.job.status == "failed" and "cancelled by" in run.job.error and run.job.cancelled
    with pytest.raises(ConflictError) as exc:
        run_cancel(run=run)
    assert exc.value.code == "run_finished"
    # retry: same row, a fresh job of the same kind and queue, sent by name after commit
    old_job = run.job
    with django_capture_on_commit_callbacks(execute=True):
        again = run_retry(run=run, by=manager)
    assert again.pk == run.pk and again.status == "queued" and again.retries == 1 and not again.cancel_requested
    assert again.job.pk != old_job.pk and again.job.kind == old_job.kind and again.job.params == {"x": 1}
    assert again.finished_at is None and again.error == ""
    assert sent == [(KINDS[kind][2], [run.pk], "cpu")]
    # the ended job says it was cancelled and which job carries its run on; the new one is neither
    old_job.refresh_from_db()
    assert old_job.cancelled and old_job.retried_as_id == again.job.pk
    assert not again.job.cancelled and again.job.retried_as_id is None
    # a queued (or running, succeeded) run cannot be retried
    with pytest.raises(ConflictError) as exc:
        run_retry(run=again)
    assert exc.value.code == "run_not_retryable"
    # a running run gets the flag and keeps running until its next report
    running = make_run(kind, RunStatus.RUNNING)
    running = run_cancel(run=running)
    assert running.status == "running" and running.cancel_requested
    # a failed run is retried and the count goes on
    failed = make_run(kind, RunStatus.FAILED)
    failed_job = failed.job
    failed = run_retry(run=failed)
    assert failed.retries == 1
    failed_job.refresh_from_db()
    assert not failed_job.cancelled and failed_job.retried_as_id == failed.job_id != failed_job.pk
    with pytest.raises(ConflictError):
        run_retry(run=make_run(kind, RunStatus.SUCCEEDED))


def test_execute_succeeds_fails_and_reraises():
    run = make_run("miningrun")

    def ok(run, reporter):
        reporter(0.5, "half")
        return RunOutcome(result={"pairs": 3}, message="3 pairs")

    run = run_execute(run, ok)
    assert run.status == "succeeded" and run.started_at and run.finished_at and run.error == ""
    job = Job.objects.get(pk=run.job_id)
    assert job.status == "succeeded" and job.attempts == 1 and job.result == {"pairs": 3} and job.message == "3 pairs"
    # a finished run is returned as it is; the body is not called
    assert run_execute(run, lambda r, rep: pytest.fail("ran twice")).status == "succeeded"

    def refused(run, reporter):
        raise ApplicationError("no frozen pools", code="no_pools")

    run = run_execute(make_run("miningrun"), refused)
    assert run.status == "failed" and run.error == "no frozen pools"
    assert Job.objects.get(pk=run.job_id).error == "no frozen pools"

    def broken(run, reporter):
        raise RuntimeError("boom")

    run = make_run("miningrun")
    with pytest.raises(RuntimeError):
        run_execute(run, broken)
    run.refresh_from_db()
    assert run.status == "failed" and run.error == "RuntimeError: boom"
    assert "Traceback" in Job.objects.get(pk=run.job_id).error
    # reraise=False records the failure and returns the run
    assert run_execute(make_run("miningrun"), broken, reraise=False).status == "failed"


def test_a_cancel_request_stops_the_body_at_its_next_report(monkeypatch):
    monkeypatch.setattr(runs_module, "CANCEL_POLL_SECONDS", 0.0)
    run = make_run("descriptionrun")
    reports = []

    def body(run, reporter):
        for i in range(5):
            if i == 2:
                run_cancel(run=type(run).objects.get(pk=run.pk))
            reporter((i + 1) / 5, f"{i}")
            reports.append(i)
        return RunOutcome()

    run = run_execute(run, body)
    assert run.status == "cancelled" and reports == [0, 1]
    job = Job.objects.get(pk=run.job_id)
    assert job.status == "failed" and job.cancelled
    # a cancel requested between deliveries ends the run before its body runs
    run = make_run("descriptionrun", RunStatus.RUNNING)
    run_cancel(run=run)
    assert run_execute(run, lambda r, rep: pytest.fail("ran")).status == "cancelled"


def test_max_attempts_gives_up():
    run = make_run("proposalrun")
    Job.objects.filter(pk=run.job_id).update(attempts=3)
    run = run_execute(run, lambda r, rep: pytest.fail("ran"), max_attempts=3)
    assert run.status == "failed" and run.error.startswith("gave up after 3 attempts")


def test_cancel_and_retry_api(client_for, make_user, manager_client, sent, django_capture_on_commit_callbacks):
    run = make_run("trainingrun")
    annotator = client_for(make_user("annotator"))
    # only managers
    assert annotator.post(f"/api/jobs/{run.job_id}/cancel/").status_code == 403
    assert annotator.post(f"/api/jobs/{run.job_id}/retry/").status_code == 403
    r = manager_client.post(f"/api/jobs/{run.job_id}/cancel/")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["kind"] == "trainingrun" and body["id"] == run.pk and body["status"] == "cancelled"
    assert body["job"]["status"] == "failed" and body["job"]["cancelled"] and body["job"]["retried_as"] is None
    r = manager_client.post(f"/api/jobs/{run.job_id}/cancel/")
    assert r.status_code == 409 and r.json()["code"] == "run_finished"
    with django_capture_on_commit_callbacks(execute=True):
        r = manager_client.post(f"/api/jobs/{run.job_id}/retry/")
    assert r.status_code == 202 and r.json()["status"] == "queued" and r.json()["retries"] == 1
    new_job = r.json()["job"]["id"]
    assert new_job != run.job_id and sent == [("workers.tasks.training_run_task", [run.pk], "cpu")]
    # the old job, listed: cancelled, queued again as the new one, no longer the run's
    old = manager_client.get(f"/api/jobs/{run.job_id}/").json()
    assert (old["status"], old["cancelled"], old["retried_as"], old["run"]) == ("failed", True, new_job, None)
    # the old job is no longer the run's: 409; the new one is queued, not retryable: 409
    assert manager_client.post(f"/api/jobs/{run.job_id}/retry/").json()["code"] == "job_has_no_run"
    r = manager_client.post(f"/api/jobs/{new_job}/retry/")
    assert r.status_code == 409 and r.json()["code"] == "run_not_retryable"
    # a bare job has no run; an unknown job is a 404
    bare = job_create(kind="video_import")
    assert manager_client.post(f"/api/jobs/{bare.pk}/cancel/").status_code == 409
    assert manager_client.post("/api/jobs/999999/cancel/").status_code == 404
    # the training-run cancel endpoint goes through the same service
    other = make_run("trainingrun", RunStatus.RUNNING)
    r = manager_client.post(f"/api/training-runs/{other.pk}/cancel/")
    assert r.status_code == 200 and r.json()["cancel_requested"] and r.json()["status"] == "running"
