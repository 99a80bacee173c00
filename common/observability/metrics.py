"""The platform's Prometheus metrics, and their exposition.

Counted in each process (``prometheus_client``; under gunicorn with several workers set
``PROMETHEUS_MULTIPROC_DIR`` to an empty folder, wiped at each start, and every process writes its
counts there and ``/metrics`` adds them up):

- ``trajlab_http_request_duration_seconds{route,method,status}``: each request's latency by its URL
  pattern's name (``unmatched`` for a 404 no pattern took), method and status class (``2xx``);
- ``trajlab_review_action_duration_seconds{action}``: the annotators' claim (``review-next``) and vote
  (``review-vote``) requests;
- ``trajlab_storage_errors_total{operation}``: object storage operations that failed; the storage
  layer calls :func:`storage_error`.

Read at scrape time, cached for :data:`SCRAPE_CACHE_S` seconds (:class:`DeploymentCollector`):

- ``trajlab_queue_depth{queue}``: messages waiting in the ``cpu`` and ``gpu`` queues, read from the
  broker (Redis list lengths); the queued Job rows when the broker cannot be read
  (``trajlab_queue_depth_source{source}`` says which);
- ``trajlab_jobs{kind,status}``: the Job rows by kind and status (``failed`` counts the failures);
- ``trajlab_job_duration_seconds{kind,status}``: a histogram of the finished jobs' durations, from
  their rows, so jobs run on any host are counted without scraping the workers.

The Job model is imported inside the functions that read it: ``config.celery`` imports this module
(through ``common.observability.tasks``) before Django's apps are loaded.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from datetime import timedelta

from celery import current_app
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

logger = logging.getLogger(__name__)

SCRAPE_CACHE_S = 5.0
QUEUES = ("cpu", "gpu")
#: The route names whose latency is also the annotators' claim and vote latency.
REVIEW_ACTIONS = {"review-next": "claim", "review-vote": "vote"}
JOB_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)

REQUEST_SECONDS = Histogram(
    "trajlab_http_request_duration_seconds", "Request latency by URL pattern name, method and status class.",
    ["route", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
REVIEW_SECONDS = Histogram(
    "trajlab_review_action_duration_seconds", "Latency of the annotators' claim and vote requests.", ["action"],
    buckets=(0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
STORAGE_ERRORS = Counter(
    "trajlab_storage_errors_total", "Object storage operations that failed, by operation.", ["operation"])
_STATUS_CLASS = {n: f"{n}xx" for n in range(1, 6)}
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def observe_request(*, route: str, method: str, status: int, seconds: float) -> None:
    """Record one request (``common.observability.requests``); a method outside HTTP's is ``other``."""
    REQUEST_SECONDS.labels(route, method if method in _METHODS else "other",
                           _STATUS_CLASS.get(status // 100, "other")).observe(seconds)
    action = REVIEW_ACTIONS.get(route)
    if action is not None and status < 400 and method == "POST":
        REVIEW_SECONDS.labels(action).observe(seconds)


def storage_error(operation: str) -> None:
    """Count one failed object storage operation (``put``, ``get``, ``range_get``, ``delete``, ``exists``…)."""
    STORAGE_ERRORS.labels(operation).inc()


def _broker_depths() -> dict[str, int]:

    with current_app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=1)
        channel = conn.default_channel
        depths = {}
        for queue in QUEUES:
            try:
                depths[queue] = channel.queue_declare(queue=queue, passive=True).message_count
            except Exception:    # never declared: nothing was ever queued there
                depths[queue] = 0
                channel = conn.channel()   # AMQP closes a channel after a failed passive declare
        return depths


def _job_depths() -> dict[str, int]:
    from django.db.models import Count

    from common.models import Job

    rows = Job.objects.filter(status=Job.Status.QUEUED).values("queue").annotate(n=Count("id")).order_by()
    return {queue: 0 for queue in QUEUES} | {row["queue"]: row["n"] for row in rows}


def _job_rows() -> tuple[list[dict], list[dict]]:
    from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
    from django.db.models.functions import Coalesce

    from common.models import Job

    counts = list(Job.objects.values("kind", "status").annotate(n=Count("id")).order_by())
    duration = ExpressionWrapper(F("finished_at") - Coalesce("started_at", "created_at"), output_field=DurationField())
    buckets = {f"le{i}": Count("id", filter=Q(d__lte=timedelta(seconds=b))) for i, b in enumerate(JOB_BUCKETS)}
    finished = list(Job.objects.filter(finished_at__isnull=False, status__in=[Job.Status.SUCCEEDED, Job.Status.FAILED])
                    .annotate(d=duration).values("kind", "status")
                    .annotate(n=Count("id"), total=Sum("d"), **buckets).order_by())
    return counts, finished


class DeploymentCollector:
    """Queue depths and job figures, read when scraped and kept :data:`SCRAPE_CACHE_S` seconds."""

    def __init__(self):
        self._lock = threading.Lock()
        self._at = -SCRAPE_CACHE_S
        self._families: list = []

    def _read(self) -> list:
        try:
            depths, source = _broker_depths(), "broker"
        except Exception as exc:
            logger.warning("queue depths from the Job rows: the broker cannot be read (%s)", exc)
            try:
                depths, source = _job_depths(), "jobs"
            except Exception:
                depths, source = {}, "none"
        depth = GaugeMetricFamily("trajlab_queue_depth", "Tasks waiting in each Celery queue.", labels=["queue"])
        for queue, n in sorted(depths.items()):
            depth.add_metric([queue], n)
        src = GaugeMetricFamily("trajlab_queue_depth_source", "Where the queue depths were read (1).",
                                labels=["source"])
        src.add_metric([source], 1)
        try:
            counts, finished = _job_rows()
        except Exception as exc:   # the database is away: the queue depths still go out
            logger.warning("job metrics left out: the Job rows cannot be read (%s)", exc)
            return [depth, src]
        jobs = GaugeMetricFamily("trajlab_jobs", "Jobs by kind and status.", labels=["kind", "status"])
        for row in counts:
            jobs.add_metric([row["kind"], row["status"]], row["n"])
        hist = HistogramMetricFamily("trajlab_job_duration_seconds", "Durations of finished jobs, by kind and status.",
                                     labels=["kind", "status"])
        for row in finished:
            cumulative = [(str(float(b)), row[f"le{i}"]) for i, b in enumerate(JOB_BUCKETS)]
            hist.add_metric([row["kind"], row["status"]], [*cumulative, ("+Inf", row["n"])],
                            (row["total"] or timedelta(0)).total_seconds())
        return [depth, src, jobs, hist]

    def collect(self):
        with self._lock:
            now = time.monotonic()
            if now - self._at >= SCRAPE_CACHE_S:
                self._families, self._at = self._read(), now
            return list(self._families)


_deployment = DeploymentCollector()


def exposition() -> bytes:
    """The text exposition of every metric: this process's (or, with ``PROMETHEUS_MULTIPROC_DIR``,
    every process's that writes there) and the deployment's."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for metric in (REQUEST_SECONDS, REVIEW_SECONDS, STORAGE_ERRORS):
            registry.register(metric)
    registry.register(_deployment)
    return generate_latest(registry)

