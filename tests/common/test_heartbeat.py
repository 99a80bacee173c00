"""Stranded runs (issue 27, finding 8): a run whose worker died stayed "running" forever; a cancel
of it was accepted and never applied, and a retry answered 409. Every job beats while it runs
(``common.jobs.heartbeat``); a job not heard from past its kind's timeout is ended by the sweep
(``common.jobs.sweep``) with the reason, and its run can be queued again."""
from __future__ import annotations

import re
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from common.errors import ApplicationError
from common.jobs.heartbeat import JobHeartbeat, job_timeout
from common.jobs.runs import RunOutcome, run_execute
from common.jobs.services import JobAbandoned, JobReporter, job_create, job_start
from common.jobs.sweep import jobs_sweep
from common.models import Job, RunStatus
from tests.common.test_runs import KINDS, make_run
from trajectories.services import ingestion


def _running(kind: str, *, silent_for: float):
    """A run of ``kind`` that its worker started, last heard from ``silent_for`` seconds ago."""
    run = make_run(kind)
    job = job_start(job=run.job)
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=silent_for))
    type(run).objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=job.started_at)
    run.refresh_from_db()
    return run


@pytest.mark.django_db
@pytest.mark.parametrize("kind", sorted(KINDS))  # every run kind (tests/common/test_runs.py checks the list)
def test_a_lapsed_run_is_failed_by_the_sweep_and_can_be_retried(kind, manager_client, sent,
                                                                 django_capture_on_commit_callbacks):
    timeout = job_timeout(KINDS[kind][1])
    lapsed = _running(kind, silent_for=timeout + 5)
    live = _running(kind, silent_for=timeout - 5)
    # when the jobs are listed (the web's sweep)
    listed = {j["id"]: j for j in manager_client.get("/api/jobs/?limit=50").json()["results"]}
    # then the lapsed run failed with the reason, its job too; the live one runs on
    lapsed.refresh_from_db()
    assert lapsed.status == "failed" and lapsed.finished_at is not None
    silence = re.match(r"no heartbeat for (\d+) s: the worker died", lapsed.error)
    assert silence and timeout + 5 <= int(silence[1]) < timeout + 60, lapsed.error
    assert listed[lapsed.job_id]["status"] == "failed" and listed[lapsed.job_id]["run"]["status"] == "failed"
    assert "no heartbeat for" in listed[lapsed.job_id]["error"]
    live.refresh_from_db()
    assert live.status == "running" and listed[live.job_id]["status"] == "running" and live.error == ""
    assert listed[live.job_id]["heartbeat_at"] is not None
    # and the failed run is queued again: same row, a new job, its task sent
    with django_capture_on_commit_callbacks(execute=True):
        r = manager_client.post(f"/api/jobs/{lapsed.job_id}/retry/")
    assert r.status_code == 202, r.content
    assert r.json()["status"] == "queued" and r.json()["retries"] == 1
    assert sent == [(KINDS[kind][2], [lapsed.pk], "cpu")]
    # the live one is not retryable while its worker beats
    assert manager_client.post(f"/api/jobs/{live.job_id}/retry/").status_code == 409


@pytest.mark.django_db
def test_a_lapsed_job_without_a_run_is_failed_and_a_live_one_kept():
    timeout = job_timeout("video_import")
    lapsed, live = (job_start(job=job_create(kind="video_import")) for _ in range(2))
    Job.objects.filter(pk=lapsed.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout + 1))
    Job.objects.filter(pk=live.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout - 5))
    assert [j.pk for j in jobs_sweep()] == [lapsed.pk]
    lapsed.refresh_from_db()
    live.refresh_from_db()
    assert lapsed.status == "failed" and lapsed.error.startswith("no heartbeat for") and live.status == "running"
    assert jobs_sweep() == []  # nothing more to end


@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["proposalrun", "trainingrun"])
def test_a_cancel_of_a_run_whose_worker_is_gone_takes_effect(kind, manager_client, sent,
                                                              django_capture_on_commit_callbacks):
    timeout = job_timeout(KINDS[kind][1])
    stranded = _running(kind, silent_for=timeout + 60)
    # the cancel ends it at once (nobody is left to read the flag), and it can be queued again
    r = manager_client.post(f"/api/jobs/{stranded.job_id}/cancel/")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "cancelled" and "the worker died" in r.json()["job"]["error"]
    with django_capture_on_commit_callbacks(execute=True):
        assert manager_client.post(f"/api/jobs/{stranded.job_id}/retry/").status_code == 202
    # a cancel accepted while the worker still beat, then never applied (the worker died): the retry
    # queues it again, and the sweep alone ends it cancelled
    waiting = _running(kind, silent_for=0)
    assert manager_client.post(f"/api/jobs/{waiting.job_id}/cancel/").json()["status"] == "running"
    Job.objects.filter(pk=waiting.job_id).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout + 1))
    with django_capture_on_commit_callbacks(execute=True):
        r = manager_client.post(f"/api/jobs/{waiting.job_id}/retry/")
    assert r.status_code == 202 and r.json()["status"] == "queued", r.content
    swept = _running(kind, silent_for=0)
    manager_client.post(f"/api/jobs/{swept.job_id}/cancel/")
    Job.objects.filter(pk=swept.job_id).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout + 1))
    jobs_sweep()
    swept.refresh_from_db()
    assert swept.status == "cancelled" and Job.objects.get(pk=swept.job_id).error.startswith("cancelled: no heartbeat")


@pytest.mark.django_db
def test_a_delivery_whose_job_was_swept_stops_and_records_nothing():
    timeout = job_timeout("mining_run")
    reached = []

    def body(run, reporter):
        # the sweep takes this worker for dead while it works (as after a long freeze)
        Job.objects.filter(pk=run.job_id).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout + 1))
        assert [j.pk for j in jobs_sweep()] == [run.job_id]
        reporter(0.5, "half")
        reached.append("after the report")
        return RunOutcome()

    run = run_execute(make_run("miningrun"), body)
    assert reached == [] and run.status == "failed" and run.error.startswith("no heartbeat for")
    assert Job.objects.get(pk=run.job_id).status == "failed"

    def silent(run, reporter):  # finishes without another report: its result is not recorded either
        Job.objects.filter(pk=run.job_id).update(heartbeat_at=timezone.now() - timedelta(seconds=timeout + 1))
        jobs_sweep()
        return RunOutcome(result={"pairs": 3})

    run = run_execute(make_run("miningrun"), silent)
    assert run.status == "failed" and Job.objects.get(pk=run.job_id).status == "failed"
    # a reporter that only adds a line (a cancel's, a retry's) never beats nor raises
    JobReporter(run.job).log("a note on a finished job")
    with pytest.raises(JobAbandoned):
        JobReporter(run.job, beats=True)(0.9, "still here?")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_running_job_beats_through_its_reports_and_its_silent_steps(kind, settings):
    settings.TRAJLAB_JOB_HEARTBEAT_S = 0.05
    beats = {}

    def heartbeat(run):
        return Job.objects.get(pk=run.job_id).heartbeat_at

    def body(run, reporter):
        beats["start"] = heartbeat(run)
        time.sleep(0.5)  # a long step that reports nothing: the thread beats
        beats["silent"] = heartbeat(run)
        reporter(0.5, "half")  # a report is a beat too
        beats["report"] = heartbeat(run)
        return RunOutcome()

    run = run_execute(make_run(kind), body)
    assert run.status == "succeeded"
    assert beats["start"] is not None and beats["start"] < beats["silent"] < beats["report"]


@pytest.mark.django_db(transaction=True)
def test_a_video_import_job_beats_while_it_imports(settings, media_root, monkeypatch):
    settings.TRAJLAB_JOB_HEARTBEAT_S = 0.05
    staging = media_root / "tmp" / "upload-beat" / "clip.mp4"
    staging.parent.mkdir(parents=True)
    staging.write_bytes(b"not yet a video")
    job = job_create(kind="video_import", params={"source": "s", "name": "clip",
                                                  "staging": str(staging.relative_to(media_root))})
    beats = {}

    def slow_import(**kwargs):  # a long copy that reports nothing
        beats["start"] = Job.objects.get(pk=job.pk).heartbeat_at
        time.sleep(0.5)
        beats["end"] = Job.objects.get(pk=job.pk).heartbeat_at
        raise ApplicationError("not a readable video", code="invalid_video")

    monkeypatch.setattr(ingestion, "video_import", slow_import)
    job = ingestion.video_import_job_execute(job_id=job.pk)
    assert job.status == "failed" and beats["start"] is not None and beats["start"] < beats["end"]


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_stops_with_its_job(settings):
    job = job_start(job=job_create(kind="video_import"))
    with JobHeartbeat(job, interval=0.02) as beat:
        time.sleep(0.2)
        assert beat.beats >= 2
        Job.objects.filter(pk=job.pk).update(status=Job.Status.FAILED)
        time.sleep(0.1)
        stopped = beat.beats
        time.sleep(0.1)
        assert beat.beats == stopped and not beat._thread.is_alive()
