"""Celery signal handlers (connected by ``config.celery``): the request id travels in each task's
message headers and is set for the task's log records; a worker told to stop (SIGTERM) tells its
running job to go back to its queue (``common.jobs.stopping``).

- ``before_task_publish``: the id of the request (or task) that queues the task goes in the
  ``trajlab_request_id`` header;
- ``task_prerun`` / ``task_postrun``: the worker sets it as ``request_id`` for the task's duration;
- ``after_setup_logger`` / ``after_setup_task_logger``: the worker's handlers get the request id
  filter, and the JSON formatter when ``TRAJLAB_LOG_FORMAT=json``;
- ``worker_process_init``: each prefork pool process takes ``SIGUSR2`` as "stop after this step";
- ``worker_shutting_down``: the main process sets the flag (solo and thread pools run tasks there)
  and sends ``SIGUSR2`` to its pool processes.
"""
from __future__ import annotations

import logging
import os
import signal

from celery import signals

from common.jobs.stopping import worker_stopping_set
from common.observability.context import RequestIdFilter, request_id, request_id_checked
from common.observability.logs import JsonFormatter

logger = logging.getLogger(__name__)
HEADER = "trajlab_request_id"
STOP_SIGNAL = signal.SIGUSR2
_tokens: dict[str, object] = {}
_worker = None   # the WorkController of this main process (worker_init)


def _on_publish(headers=None, **kwargs) -> None:
    rid = request_id.get()
    if rid and headers is not None and HEADER not in headers:
        headers[HEADER] = rid


def _on_prerun(task_id=None, task=None, **kwargs) -> None:
    rid = request_id_checked(getattr(task.request, HEADER, None)) if task is not None else None
    _tokens[task_id] = request_id.set(rid or "")


def _on_postrun(task_id=None, **kwargs) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        request_id.reset(token)


def _on_logger(logger=None, **kwargs) -> None:
    from django.conf import settings

    for handler in logger.handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
        if settings.TRAJLAB_LOG_FORMAT == "json":
            handler.setFormatter(JsonFormatter())


def _on_stop_signal(signum, frame) -> None:
    worker_stopping_set()


def _on_process_init(**kwargs) -> None:
    signal.signal(STOP_SIGNAL, _on_stop_signal)


def _on_shutting_down(**kwargs) -> None:
    worker_stopping_set()
    pool = getattr(_worker, "pool", None)
    pids = (getattr(pool, "info", None) or {}).get("processes", []) if pool is not None else []
    for pid in pids:
        if isinstance(pid, int) and pid != os.getpid():
            try:
                os.kill(pid, STOP_SIGNAL)
            except ProcessLookupError:
                pass


def _on_worker_init(sender=None, **kwargs) -> None:
    global _worker
    _worker = sender


def connect() -> None:
    signals.before_task_publish.connect(_on_publish, weak=False)
    signals.task_prerun.connect(_on_prerun, weak=False)
    signals.task_postrun.connect(_on_postrun, weak=False)
    signals.after_setup_logger.connect(_on_logger, weak=False)
    signals.after_setup_task_logger.connect(_on_logger, weak=False)
    signals.worker_process_init.connect(_on_process_init, weak=False)
    signals.worker_init.connect(_on_worker_init, weak=False)
    signals.worker_shutting_down.connect(_on_shutting_down, weak=False)
