"""A deployment's operations with a real Celery worker: the request id travels from the request into
the task's log records (JSON logs), and a worker stopped with SIGTERM puts its running run back on
its queue, where another worker finishes it."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from common.models import Job
from tests.conftest import write_video
from tests.integration.test_worker import (
    _purge_queues,
    _require_production_mode,
    _wait_for,
    start_worker,
)
from tests.processes import stop_process_group
from trajectories.models import ProposalRun, Trajectory
from trajectories.services.ingestion import video_import
from trajectories.services.splits import splits_assign

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _json_lines(path) -> list[dict]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def test_a_stopped_worker_requeues_its_run_with_the_request_id_in_its_logs(media_root, tmp_path, manager_client,
                                                                          monkeypatch):
    _require_production_mode()
    _purge_queues()
    monkeypatch.setenv("TRAJLAB_LOG_FORMAT", "json")
    first = start_worker(media_root, tmp_path, name="first")
    second = None
    try:
        # given a run queued by a request that named its id, in progress in the first worker
        path = write_video(tmp_path / "long.mp4", n_frames=400, size=(320, 240), fps=10)
        video = video_import(path=path, source="itest-stop").video
        splits_assign(seed=0, ratios={"train": 1})
        config = manager_client.post("/api/proposal-configs/", {
            "name": "itest", "backend": "hog-bytetrack", "categories": ["person", "moving object"]},
            format="json").json()
        response = manager_client.post("/api/proposal-runs/", {"video": video.pk, "config": config["id"]},
                                       format="json", HTTP_X_REQUEST_ID="itest-stop-1")
        assert response.status_code == 202 and response["X-Request-ID"] == "itest-stop-1"
        run_id = response.json()["id"]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            job = ProposalRun.objects.select_related("job").get(pk=run_id).job
            if job.status == "running" and job.progress > 0.05:
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the run never started:\n{first.log_path.read_text()[-3000:]}")
        # when the worker's main process gets SIGTERM (systemd's KillMode=mixed, docker stop)
        os.kill(first.pid, signal.SIGTERM)
        try:
            first.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the worker did not stop:\n{first.log_path.read_text()[-3000:]}")
        # then the run and its job are queued again, the delivery not counted as an attempt
        run = ProposalRun.objects.select_related("job").get(pk=run_id)
        assert run.status == ProposalRun.Status.QUEUED, (run.status, first.log_path.read_text()[-3000:])
        assert run.job.status == Job.Status.QUEUED and run.job.attempts == 0 and "requeued" in run.job.message
        # and the worker's log records of that task carry the request's id
        lines = _json_lines(first.log_path)
        mine = [r for r in lines if r.get("request_id") == "itest-stop-1"]
        assert any("goes back to its queue" in r["message"] for r in mine), lines[-20:]
        # and another worker takes the message up and finishes the run once
        second = start_worker(media_root, tmp_path, name="second")
        run = _wait_for(run_id, second, timeout=240)
        assert run.status == ProposalRun.Status.SUCCEEDED, (run.error, second.log_path.read_text()[-3000:])
        assert run.job.attempts == 1
        assert Trajectory.objects.filter(run=run).count() == run.trajectory_count >= 1
        assert any(r.get("request_id") == "itest-stop-1" for r in _json_lines(second.log_path))
    finally:
        stop_process_group(first)
        if second is not None:
            stop_process_group(second)
