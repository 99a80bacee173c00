"""Health, readiness, metrics, request ids and JSON logs (common.observability), against the real
PostgreSQL and Redis of the test run."""
from __future__ import annotations

import json
import logging
import re
import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from common.jobs.stopping import WorkerStopping, worker_stopping_clear, worker_stopping_set
from common.models import Job
from common.observability import health, metrics
from common.observability.context import (
    REQUEST_ID_MAX,
    RequestIdFilter,
    request_id,
    request_id_checked,
)
from common.observability.logs import JsonFormatter
from common.observability.requests import RequestObservabilityMiddleware

pytestmark = pytest.mark.django_db(transaction=True)


def sample(text: str, name: str, **labels) -> float | None:
    """The value of one sample in a text exposition, or None."""
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            got = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
            if all(got.get(k) == v for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return None


def test_healthz_answers_without_a_session_or_an_allowed_host(settings):
    settings.ALLOWED_HOSTS = ["trajlab.example"]
    response = Client().get("/healthz", HTTP_HOST="10.0.0.7:8000")   # a load balancer's probe
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert "Set-Cookie" not in response.headers and len(response["X-Request-ID"]) == 32


def test_readyz_names_each_check_and_its_latency():
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready" and body["failed"] == []
    assert set(body["checks"]) == {"database", "broker", "storage"}
    assert all(c["ok"] and c["ms"] >= 0 and c["error"] == "" for c in body["checks"].values())


def test_readyz_is_503_naming_what_failed_and_what_timed_out(monkeypatch, settings):
    settings.TRAJLAB_READY_TIMEOUT_MS = 300

    def broken():
        raise ConnectionError("broker at 10.0.0.9 refused")

    monkeypatch.setitem(health.CHECKS, "broker", broken)
    monkeypatch.setitem(health.CHECKS, "storage", lambda: time.sleep(2))
    start = time.monotonic()
    response = Client().get("/readyz")
    assert time.monotonic() - start < 1.5
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and sorted(body["failed"]) == ["broker", "storage"]
    assert body["checks"]["database"]["ok"] is True
    assert "refused" in body["checks"]["broker"]["error"]
    assert "no answer within 300 ms" in body["checks"]["storage"]["error"]


def test_readyz_fails_on_a_broker_nobody_listens_on(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    checks = health.readiness({"broker": health.broker_check})
    assert not checks["broker"].ok and checks["broker"].error


def test_metrics_are_off_without_a_token_and_need_it(settings):
    settings.TRAJLAB_METRICS_TOKEN = ""
    assert Client().get("/metrics").status_code == 404
    settings.TRAJLAB_METRICS_TOKEN = "s3cret"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401


def test_metrics_after_a_few_requests(settings, manager_client):
    from celery import current_app

    settings.TRAJLAB_METRICS_TOKEN = "s3cret"
    metrics._deployment._at = -metrics.SCRAPE_CACHE_S     # no cached scrape from another test
    client = Client()
    before = sample(metrics.exposition().decode(), "trajlab_http_request_duration_seconds_count",
                    route="healthz", method="GET", status="2xx") or 0
    for _ in range(3):
        client.get("/healthz")
    client.get("/api/no/such/")
    manager_client.get("/api/jobs/")
    now = timezone.now()
    Job.objects.create(kind="proposal_run", status=Job.Status.FAILED, started_at=now - timedelta(seconds=30),
                       finished_at=now, queue="cpu")
    Job.objects.create(kind="proposal_run", status=Job.Status.SUCCEEDED, started_at=now - timedelta(seconds=3),
                       finished_at=now, queue="cpu")
    with current_app.connection_for_write() as conn:
        conn.default_channel.queue_purge("gpu")
    current_app.send_task("trajlab.no_such_task", args=[1], queue="gpu")   # waits: no worker here
    metrics.storage_error("put")
    metrics._deployment._at = -metrics.SCRAPE_CACHE_S     # the first exposition above was cached
    try:
        text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret").content.decode()
    finally:
        with current_app.connection_for_write() as conn:
            conn.default_channel.queue_purge("gpu")
    assert sample(text, "trajlab_http_request_duration_seconds_count",
                  route="healthz", method="GET", status="2xx") == before + 3
    assert (sample(text, "trajlab_http_request_duration_seconds_count", route="unmatched", status="4xx") or 0) >= 1, \
        [line for line in text.splitlines() if "_count" in line]
    assert sample(text, "trajlab_http_request_duration_seconds_count", route="job-list", status="2xx") >= 1
    assert sample(text, "trajlab_queue_depth", queue="gpu") == 1
    assert sample(text, "trajlab_queue_depth_source", source="broker") == 1
    assert sample(text, "trajlab_jobs", kind="proposal_run", status="failed") == 1
    assert sample(text, "trajlab_job_duration_seconds_bucket", kind="proposal_run", status="failed", le="15.0") == 0
    assert sample(text, "trajlab_job_duration_seconds_bucket", kind="proposal_run", status="failed", le="60.0") == 1
    assert sample(text, "trajlab_job_duration_seconds_sum", kind="proposal_run", status="succeeded") == 3
    assert sample(text, "trajlab_storage_errors_total", operation="put") >= 1


def test_queue_depths_come_from_the_job_rows_when_the_broker_is_away(monkeypatch):
    Job.objects.create(kind="training_run", queue="gpu")
    Job.objects.create(kind="proposal_run", queue="cpu", status=Job.Status.RUNNING)

    def away():
        raise ConnectionError("no broker")

    monkeypatch.setattr(metrics, "_broker_depths", away)
    metrics._deployment._at = -metrics.SCRAPE_CACHE_S
    text = metrics.exposition().decode()
    assert sample(text, "trajlab_queue_depth", queue="gpu") == 1
    assert sample(text, "trajlab_queue_depth", queue="cpu") == 0
    assert sample(text, "trajlab_queue_depth_source", source="jobs") == 1


def test_a_request_keeps_a_valid_id_and_replaces_a_bad_one():
    client = Client()
    assert client.get("/healthz", HTTP_X_REQUEST_ID="lb-1234/abc").headers["X-Request-ID"] == "lb-1234/abc"
    for bad in ("has space", "x" * (REQUEST_ID_MAX + 1), "tab\there", "é"):
        got = client.get("/healthz", HTTP_X_REQUEST_ID=bad).headers["X-Request-ID"]
        assert got != bad and re.fullmatch(r"[0-9a-f]{32}", got)
    assert request_id_checked("x" * REQUEST_ID_MAX) and not request_id_checked("")


def test_every_log_record_of_a_request_carries_its_id(rf):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    handler.addFilter(RequestIdFilter())
    log = logging.getLogger("tests.observability")
    log.addHandler(handler)
    try:
        def view(request):
            log.warning("inside the request")
            from django.http import HttpResponse
            return HttpResponse("ok")

        response = RequestObservabilityMiddleware(view)(rf.get("/x", HTTP_X_REQUEST_ID="req-42"))
        log.warning("after it")
    finally:
        log.removeHandler(handler)
    assert response["X-Request-ID"] == "req-42"
    assert [r.request_id for r in records] == ["req-42", ""]
    assert request_id.get() == ""


def test_the_json_formatter_writes_one_object_a_line():
    record = logging.LogRecord("trajlab.x", logging.ERROR, __file__, 1, "run %s failed", (7,), None)
    record.request_id, record.run = "req-9", 7
    try:
        raise ValueError("bad frame")
    except ValueError:
        import sys
        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    assert "\n" not in line.split('"exception"')[0]
    out = json.loads(line)
    assert out["message"] == "run 7 failed" and out["level"] == "ERROR" and out["logger"] == "trajlab.x"
    assert out["request_id"] == "req-9" and out["run"] == 7 and "ValueError: bad frame" in out["exception"]
    assert out["time"].endswith("+00:00")


def test_a_stopping_worker_puts_a_running_run_back_on_its_queue(monkeypatch):
    from celery.exceptions import Reject

    from common.jobs.runs import RunReporter, run_execute
    from trajectories.models import ProposalRun

    run = _a_queued_run()

    def body(run, report: RunReporter):
        report(0.1, "first step")
        worker_stopping_set()
        report(0.2, "second step")
        raise AssertionError("the reporter should have stopped the body")

    try:
        with pytest.raises(Reject) as raised:
            run_execute(run, body)
    finally:
        worker_stopping_clear()
    assert raised.value.requeue is True
    run = ProposalRun.objects.select_related("job").get(pk=run.pk)
    assert run.status == "queued" and run.job.status == Job.Status.QUEUED
    assert run.job.attempts == 0 and "requeued" in run.job.message
    assert issubclass(WorkerStopping, Exception)


def _a_queued_run():
    from common.jobs.services import job_create
    from tests.trajectories.factories import run_factory

    return run_factory(job=job_create(kind="proposal_run", params={}), status="queued")
