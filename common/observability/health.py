"""Readiness: can this web process reach the database, the broker and the storage?

Each check runs in a thread of its own, bounded by ``TRAJLAB_READY_TIMEOUT_MS``; the checks run at
the same time, so an answer takes at most that long. A check that does not answer in time is
reported as timed out (its thread is left to finish on its own, and closes its connection).
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import connections

from common.storage import store

_pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix="readyz")


@dataclass
class Check:
    ok: bool
    ms: float
    error: str = ""


def database_check() -> None:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connections.close_all()    # this thread's connection only


def broker_check() -> None:
    from kombu import Connection

    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
        if not os.access(folder, os.W_OK):
            raise OSError(f"the broker folder {folder} cannot be written")
        return
    timeout = settings.TRAJLAB_READY_TIMEOUT_MS / 1000
    options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS, "socket_timeout": timeout,
               "socket_connect_timeout": timeout}
    with Connection(url, connect_timeout=timeout, transport_options=options) as conn:
        conn.ensure_connection(max_retries=1, timeout=timeout)
        channel = conn.default_channel
        if hasattr(channel, "client"):    # Redis: one PING
            channel.client.ping()


def storage_check() -> None:
    """The var folder is writable, and the platform's store (``common.storage``: the media folder, or
    the bucket of ``TRAJLAB_STORAGE_URL``) answers an existence query for a name never written: on
    object storage, one HEAD request with the deployment's credentials."""
    if not os.access(settings.VAR_DIR, os.W_OK):
        raise OSError(f"the var folder {settings.VAR_DIR} cannot be written")
    store().exists(f"readyz/{uuid.uuid4().hex}")


CHECKS: dict[str, Callable[[], None]] = {
    "database": database_check, "broker": broker_check, "storage": storage_check}


def _timed(check: Callable[[], None]) -> Check:
    start = time.perf_counter()
    try:
        check()
    except Exception as exc:
        return Check(False, (time.perf_counter() - start) * 1000, f"{type(exc).__name__}: {exc}"[:300])
    return Check(True, (time.perf_counter() - start) * 1000)


def readiness(checks: dict[str, Callable[[], None]] | None = None) -> dict[str, Check]:
    """Every check's outcome and latency in milliseconds, by name."""
    checks = CHECKS if checks is None else checks
    timeout = settings.TRAJLAB_READY_TIMEOUT_MS / 1000
    start = time.perf_counter()
    futures = {name: _pool.submit(_timed, check) for name, check in checks.items()}
    out = {}
    for name, future in futures.items():
        try:
            out[name] = future.result(timeout=max(0.0, timeout - (time.perf_counter() - start)))
        except FutureTimeout:
            out[name] = Check(False, (time.perf_counter() - start) * 1000,
                              f"no answer within {settings.TRAJLAB_READY_TIMEOUT_MS} ms")
    return out
