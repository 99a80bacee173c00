"""Production mode end to end: PostgreSQL, a real broker and a real Celery worker process."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import write_video
from tests.processes import database_url_for_subprocess, stop_process_group
from trajectories.models import ProposalRun, Trajectory
from trajectories.services.ingestion import video_import
from trajectories.services.splits import splits_assign

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def _require_production_mode():
    if connection.vendor != "postgresql":
        pytest.fail("integration tests need DATABASE_URL pointing at PostgreSQL (make test sets it)")
    if not settings.CELERY_BROKER_URL.startswith(("redis://", "amqp://")):
        pytest.fail("integration tests need CELERY_BROKER_URL pointing at Redis or RabbitMQ (make test sets it)")


def _purge_queues():
    from config.celery import app

    with app.connection_for_write() as conn:
        for queue in ("cpu", "gpu"):
            try:
                conn.default_channel.queue_purge(queue)
            except Exception:  # the queue does not exist yet
                pass


def start_worker(media_root: Path, tmp_path: Path, name: str = "worker") -> subprocess.Popen:
    """A Celery worker in its own process (and session), on the test database and the test
    MEDIA_ROOT, logging to ``tmp_path/<name>.log`` (``proc.log_path``)."""
    env = dict(os.environ, DATABASE_URL=database_url_for_subprocess(), MEDIA_ROOT=str(media_root),
               TRAJLAB_VAR_DIR=str(tmp_path / f"{name}-var"))
    log_path = tmp_path / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "cpu,gpu", "-c", "1",
             "--loglevel", "INFO", "-n", f"itest-{name}-{os.getpid()}@%h", "--without-heartbeat",
             "--without-mingle", "--without-gossip"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc.log_path = log_path
    return proc


@pytest.fixture
def worker(media_root, tmp_path):
    """A Celery worker in its own process, on the test database and the test MEDIA_ROOT."""
    _require_production_mode()
    _purge_queues()
    proc = start_worker(media_root, tmp_path)
    yield proc
    stop_process_group(proc)


def _wait_for(run_id: int, worker, timeout: float = 180.0) -> ProposalRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = ProposalRun.objects.select_related("job").get(pk=run_id)
        # the run's status is stored with its trajectories, the job's when the delivery returns
        if run.status in (ProposalRun.Status.SUCCEEDED, ProposalRun.Status.FAILED) and \
                (run.job is None or run.job.status in ("succeeded", "failed", "cancelled")):
            return run
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}):\n{worker.log_path.read_text()[-3000:]}")
        time.sleep(0.5)
    pytest.fail(f"run {run_id} did not finish in {timeout}s:\n{worker.log_path.read_text()[-3000:]}")


def test_worker_executes_a_proposal_run_end_to_end(worker, manager_client, tmp_path):
    # given a video with a moving object, imported and assigned to a split
    path = write_video(tmp_path / "moving.mp4", n_frames=60, size=(320, 240), fps=10)
    video = video_import(path=path, source="itest").video
    splits_assign(seed=0, ratios={"train": 1})
    config = manager_client.post("/api/proposal-configs/", {
        "name": "itest", "backend": "hog-bytetrack", "categories": ["moving object"],
    }, format="json")
    assert config.status_code == 201, config.content
    # when a manager queues a proposal run over the API
    r = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config.json()["id"]}, format="json")
    assert r.status_code == 202, r.content
    run_id = r.json()["id"]
    assert r.json()["job"]["queue"] == "cpu"
    # then the worker process runs it and stores the trajectories
    run = _wait_for(run_id, worker)
    assert run.status == ProposalRun.Status.SUCCEEDED, (run.error, worker.log_path.read_text()[-3000:])
    assert run.trajectory_count >= 1
    job = run.job
    assert job.status == "succeeded" and job.progress == 1.0 and job.attempts == 1
    assert job.worker and not job.worker.endswith(f":{os.getpid()}")  # ran in the worker process
    assert "started on" in job.log_tail
    longest = max(Trajectory.objects.filter(run=run), key=lambda t: t.n_obs)
    assert longest.n_obs >= 30  # the object is followed for most of the 60 frames
    # and queuing the same configuration again creates nothing
    again = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config.json()["id"]}, format="json")
    assert again.status_code == 200 and again.json()["id"] == run_id
    assert ProposalRun.objects.count() == 1
    assert manager_client.get(f"/api/jobs/{job.pk}/").json()["status"] == "succeeded"


def test_a_run_that_fails_in_the_worker_is_recorded(worker, manager_client, tmp_path):
    path = write_video(tmp_path / "short.mp4", n_frames=20, size=(320, 240), fps=10)
    video = video_import(path=path, source="itest-fail").video
    splits_assign(seed=0, ratios={"train": 1})
    config = manager_client.post("/api/proposal-configs/", {
        "name": "itest", "backend": "hog-bytetrack", "categories": ["person"]}, format="json").json()
    video.abspath.unlink()  # the media disappears after import: the worker must say so
    r = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config["id"]}, format="json")
    run = _wait_for(r.json()["id"], worker)
    assert run.status == ProposalRun.Status.FAILED and "not a readable video" in run.error
    assert run.job.status == "failed" and run.job.error
    assert Trajectory.objects.count() == 0


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_a_killed_worker_process_loses_nothing(worker, manager_client, tmp_path):
    # given a run in progress in the worker's pool process
    path = write_video(tmp_path / "long.mp4", n_frames=400, size=(320, 240), fps=10)
    video = video_import(path=path, source="itest-kill").video
    splits_assign(seed=0, ratios={"train": 1})
    config = manager_client.post("/api/proposal-configs/", {
        "name": "itest", "backend": "hog-bytetrack", "categories": ["person", "moving object"]}, format="json").json()
    run_id = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config["id"]},
                                 format="json").json()["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = ProposalRun.objects.select_related("job").get(pk=run_id).job
        if job.status == "running" and job.progress > 0.05:
            break
        time.sleep(0.2)
    else:
        pytest.fail(f"the run never started:\n{worker.log_path.read_text()[-3000:]}")
    # when the process executing it is killed (as the kernel's OOM killer would)
    children = _children(worker.pid)
    assert children, "the worker has no pool process"
    for child in children:
        os.kill(child, signal.SIGKILL)
    # then the task is delivered again, runs to the end once, and nothing is duplicated
    run = _wait_for(run_id, worker, timeout=240)
    assert run.status == ProposalRun.Status.SUCCEEDED, (run.error, worker.log_path.read_text()[-3000:])
    assert run.job.attempts == 2
    assert Trajectory.objects.filter(run=run).count() == run.trajectory_count >= 1
    assert len(set(Trajectory.objects.filter(run=run).values_list("track_id", flat=True))) == run.trajectory_count


def test_a_large_upload_is_imported_by_the_worker(worker, manager_client, tmp_path, settings):
    from common.models import Job
    from trajectories.models import Video

    settings.TRAJLAB_SYNC_IMPORT_BYTES = 1000
    path = write_video(tmp_path / "big.mp4", n_frames=40, size=(320, 240), fps=10)
    with open(path, "rb") as fh:
        r = manager_client.post("/api/videos/", {"file": fh, "source": "itest-upload"}, format="multipart")
    assert r.status_code == 202, r.content
    job_id = r.json()["job"]["id"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and Job.objects.get(pk=job_id).status in ("queued", "running"):
        time.sleep(0.3)
    job = Job.objects.get(pk=job_id)
    assert job.status == "succeeded", (job.error, worker.log_path.read_text()[-3000:])
    video = Video.objects.get(pk=job.result["video"])
    assert video.frame_count == 40 and video.abspath.is_file()
