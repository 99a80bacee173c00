"""Issue 27, finding 8, end to end: a run whose whole worker died (a lost machine: no re-delivery
until the broker's visibility timeout) stayed "running" forever, and a retry answered 409. With real
worker processes: a live worker's job beats through its own sweeps and the web's, and once the worker
is killed, another worker's sweep fails the run with the reason; a retry then runs it to the end."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from common.jobs.heartbeat import job_timeout
from tests.conftest import write_video
from tests.integration.test_worker import (
    _purge_queues,
    _require_production_mode,
    _wait_for,
    start_worker,
)
from tests.processes import stop_process_group
from trajectories.models import ProposalRun
from trajectories.services.ingestion import video_import
from trajectories.services.splits import splits_assign

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
TIMEOUT_S = 3


@pytest.fixture(autouse=True)
def quick_heartbeats(settings, monkeypatch):
    """Workers beat and sweep every second; a job not heard from for 3 s is taken for abandoned."""
    for name, value in {"TRAJLAB_JOB_HEARTBEAT_S": "1", "TRAJLAB_JOB_SWEEP_S": "1",
                        "TRAJLAB_JOB_TIMEOUTS": json.dumps({"default": TIMEOUT_S})}.items():
        monkeypatch.setenv(name, value)
    settings.TRAJLAB_JOB_HEARTBEAT_S, settings.TRAJLAB_JOB_TIMEOUTS = 1, {"default": TIMEOUT_S}


def _until(condition, timeout: float, what: str, worker):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"{what} within {timeout} s:\n{worker.log_path.read_text()[-3000:]}")


def test_a_run_whose_worker_died_is_failed_by_another_worker_and_runs_again(media_root, manager_client, tmp_path):
    _require_production_mode()
    _purge_queues()
    path = write_video(tmp_path / "long.mp4", n_frames=400, size=(320, 240), fps=10)
    video = video_import(path=path, source="itest-stranded").video
    splits_assign(seed=0, ratios={"train": 1})
    config = manager_client.post("/api/proposal-configs/", {
        "name": "itest", "backend": "hog-bytetrack", "categories": ["person", "moving object"],
        # the detectors on every frame, HOG over the whole frame: slow enough that the run is still
        # going when its worker is killed (the default skips frames and scans around motion)
        "anchor_policy": {"anchor_stride": 1}, "detector_settings": {"person": {"regions": "frame"}}},
        format="json").json()
    first = start_worker(media_root, tmp_path, "first")
    second = None
    try:
        run_id = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config["id"]},
                                     format="json").json()["id"]
        job_id = ProposalRun.objects.get(pk=run_id).job_id

        def started():
            job = ProposalRun.objects.select_related("job").get(pk=run_id).job
            return job.status == "running" and job.progress > 0.02

        _until(started, 120, "the run did not start", first)
        assert job_timeout("proposal_run") == TIMEOUT_S
        # while its worker lives, the job beats: past the timeout, neither sweep ends it
        time.sleep(TIMEOUT_S + 1.5)
        listed = {j["id"]: j for j in manager_client.get("/api/jobs/?limit=50").json()["results"]}
        assert listed[job_id]["status"] in ("running", "succeeded"), listed[job_id]
        assert ProposalRun.objects.get(pk=run_id).status in ("running", "succeeded")
        if listed[job_id]["status"] == "succeeded":
            pytest.fail("the run finished before its worker could be killed: make the video longer")
        # when the whole worker dies (its main process and its pool, as with a lost machine)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        # then another worker's own sweep (nobody reads the job list) fails the run with the reason
        second = start_worker(media_root, tmp_path, "second")
        run = _until(lambda: (r := ProposalRun.objects.get(pk=run_id)).status != "running" and r, 60,
                     "no sweep ended the run", second)
        assert run.status == "failed" and run.error.startswith("no heartbeat for"), run.error
        assert "the worker died" in run.job.error and run.job.status == "failed"
        # and a retry runs it to the end on the live worker
        r = manager_client.post(f"/api/jobs/{job_id}/retry/")
        assert r.status_code == 202, r.content
        run = _wait_for(run_id, second, timeout=240)
        assert run.status == ProposalRun.Status.SUCCEEDED, (run.error, second.log_path.read_text()[-3000:])
        assert run.retries == 1 and run.job_id != job_id and run.trajectory_count >= 1
    finally:
        for proc in (first, second):
            if proc is not None:
                stop_process_group(proc)
