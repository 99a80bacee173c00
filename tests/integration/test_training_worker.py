"""Training runs in real Celery workers on the gpu queue (PostgreSQL, Redis, worker processes).

The test that matters most: a worker killed with SIGKILL in the middle of a training run loses
nothing. The run's task is re-delivered to a new worker, the trainer resumes from its last
checkpoint and the run ends with the same number of steps, its step series whole.
"""
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

from tests.processes import database_url_for_subprocess, stop_process_group
from tests.workers.factories import TINY_BENCHMARK, register_snapshot, tiny_config
from workers.models import EvaluationRun, TrainingRun, TrainingStep

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
STEPS, CHECKPOINT_EVERY = 400, 50


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


class Workers:
    """Celery worker processes on the gpu queue only, each in its own session (process group)."""

    def __init__(self, tmp_path: Path, var_dir: Path):
        self.tmp_path, self.var_dir, self.started = tmp_path, var_dir, []

    def start(self, name: str, **env) -> subprocess.Popen:
        environ = dict(os.environ, DATABASE_URL=database_url_for_subprocess(), TRAJLAB_VAR_DIR=str(self.var_dir),
                       OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", **env)
        log_path = self.tmp_path / f"worker-{name}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "gpu", "-c", "1", "--loglevel", "INFO",
                 "-n", f"itrain-{name}-{os.getpid()}@%h", "--without-heartbeat", "--without-mingle",
                 "--without-gossip"],
                cwd=ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        proc.log_path = log_path
        self.started.append(proc)
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {p.log_path.name}\n{p.log_path.read_text()[-2500:]}" for p in self.started)

    def stop_all(self) -> None:
        for proc in self.started:
            stop_process_group(proc)


@pytest.fixture
def workers(tmp_path):
    _require_production_mode()
    _purge_queues()
    pool = Workers(tmp_path, tmp_path / "worker-var")
    yield pool
    pool.stop_all()
    _purge_queues()


@pytest.fixture
def snapshots(tmp_path):
    from models.demo.benchmark import build_demo_benchmark

    build_demo_benchmark(tmp_path / "benchmark", TINY_BENCHMARK)
    return {split: register_snapshot(tmp_path / "benchmark" / "snapshots" / split) for split in ("train", "dev")}


def _wait(predicate, workers: Workers, what: str, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"{what} did not happen within {timeout:.0f} s\n{workers.logs()}")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _queue_run(client, snapshots) -> int:
    r = client.post("/api/training-runs/", {
        "snapshot": snapshots["train"].pk, "eval_snapshot": snapshots["dev"].pk, "model_kind": "vtrajembed",
        "config": tiny_config(steps=STEPS, checkpoint_every=CHECKPOINT_EVERY)}, format="json")
    assert r.status_code == 202, r.content
    return r.json()["id"]


def _past_first_checkpoint(run_id: int, worker: subprocess.Popen, workers: Workers) -> TrainingRun:
    def check():
        run = TrainingRun.objects.select_related("job").get(pk=run_id)
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}):\n{workers.logs()}")
        return run if run.job.progress > (CHECKPOINT_EVERY + 5) / STEPS and run.status == "running" else None

    return _wait(check, workers, "progress past the first checkpoint", timeout=300)


def _finished(run_id: int, worker: subprocess.Popen, workers: Workers) -> TrainingRun:
    def check():
        run = TrainingRun.objects.select_related("job").get(pk=run_id)
        if worker.poll() is not None:
            pytest.fail(f"the worker exited ({worker.returncode}):\n{workers.logs()}")
        return run if run.status in ("succeeded", "failed", "cancelled") else None

    return _wait(check, workers, "the end of the run", timeout=900)


def _check_resumed(run: TrainingRun, killed_at: TrainingRun, workers: Workers) -> int:
    """The run finished with every step once; returns the step it resumed from."""
    assert run.status == "succeeded", (run.error, workers.logs())
    assert run.steps_done == STEPS and run.result["step"] == STEPS and run.result["steps"] == STEPS
    assert run.job.status == "succeeded" and run.job.attempts == 2 and run.job.progress == 1.0
    assert len(run.resumes) == 1 and run.resumes[0]["attempt"] == 2
    resumed_from = run.resumes[0]["from_step"]
    assert resumed_from % CHECKPOINT_EVERY == 0 and CHECKPOINT_EVERY <= resumed_from <= killed_at.steps_done
    assert run.result["resumed_from"] == resumed_from
    rows = list(TrainingStep.objects.filter(run_id=run.pk).order_by("step").values_list("step", "attempt"))
    assert [step for step, _ in rows] == list(range(1, STEPS + 1))
    assert all(attempt == (1 if step <= resumed_from else 2) for step, attempt in rows)
    assert "resumed from the checkpoint at step" in run.job.log_tail
    return resumed_from


def test_a_run_killed_with_its_worker_resumes_from_its_checkpoint(workers, snapshots, manager_client):
    # given a training run queued over the API, and a worker on the gpu queue training it
    run_id = _queue_run(manager_client, snapshots)
    first = workers.start("first")
    seen = _past_first_checkpoint(run_id, first, workers)
    # when the worker (its main process and the pool process that trains) is killed outright
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    killed_at = TrainingRun.objects.get(pk=run_id)
    assert killed_at.status == "running" and CHECKPOINT_EVERY <= killed_at.steps_done < STEPS, killed_at.steps_done
    assert seen.job.attempts == 1
    # and a new worker starts: Redis hands it the message nobody acknowledged
    second = workers.start("second", CELERY_VISIBILITY_TIMEOUT="1")
    run = _finished(run_id, second, workers)
    # then the run finished with the same number of steps, resumed at a checkpoint, its series whole
    _check_resumed(run, killed_at, workers)
    assert int(run.job.worker.rsplit(":", 1)[1]) in _children(second.pid)     # in the new worker's pool process
    # and the run ended with its evaluation on the dev snapshot
    evaluation = EvaluationRun.objects.get(training_run_id=run_id)
    assert evaluation.snapshot_id == snapshots["dev"].pk and evaluation.metrics["t2traj"]["n_queries"] > 0
    detail = manager_client.get(f"/api/training-runs/{run_id}/").json()
    assert detail["series"]["step"][-1] == STEPS and detail["evaluation"] == evaluation.pk



def test_a_run_whose_pool_process_is_killed_resumes_in_the_same_worker(workers, snapshots, manager_client):
    # given a run in progress in the worker's pool process
    run_id = _queue_run(manager_client, snapshots)
    worker = workers.start("only")
    _past_first_checkpoint(run_id, worker, workers)
    # when that process is killed (as the kernel's OOM killer would), the worker itself surviving
    children = _children(worker.pid)
    assert children, "the worker has no pool process"
    for child in children:
        os.kill(child, signal.SIGKILL)
    killed_at = TrainingRun.objects.get(pk=run_id)
    # then the task is rejected back to the queue (reject_on_worker_lost) and resumed at a checkpoint
    run = _finished(run_id, worker, workers)
    _check_resumed(run, killed_at, workers)
