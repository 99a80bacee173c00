"""A web request waits for the database a bounded time, and is told so when it cannot.

One slow writer must not hold every other request: a request that waits longer than
``TRAJLAB_WEB_LOCK_TIMEOUT_MS`` for a lock, or runs one statement longer than
``TRAJLAB_WEB_STATEMENT_TIMEOUT_MS``, is answered 503 ``database_busy`` with ``Retry-After``, its
transaction rolled back, instead of a 500 after the database's own wait. On PostgreSQL the
bounds are the session's ``lock_timeout`` and ``statement_timeout``; on SQLite, the wait for the
write lock (``PRAGMA busy_timeout``; SQLite has no statement timeout). 0 turns a bound off.

Only web requests are bound: the bounds are set on a connection the first time a request uses it
(when it opens during a request, or at the start of a request that finds it open), and only this
middleware sets them, so workers and management commands (long jobs, migrations) keep their
connections unbounded. They are set on the driver's connection itself, beneath Django's cursors,
so a request's query count does not change. Behind a pooler in transaction mode, set them on the
web role instead (``ALTER ROLE … SET lock_timeout = …``) and turn them off here.
"""
from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.db.backends.signals import connection_created
from django.http import HttpResponse, JsonResponse
from psycopg.pq import TransactionStatus

logger = logging.getLogger(__name__)
RETRY_AFTER_S = 2
# PostgreSQL: lock_not_available (lock_timeout), query_canceled (statement_timeout).
BUSY_SQLSTATES = {"55P03", "57014"}

_request = threading.local()


def _bound(wrapper) -> None:
    """Set the web bounds on ``wrapper``'s open connection, once per driver connection.

    A ``SET`` inside a transaction is undone when the transaction rolls back, so bounds set there
    apply to that transaction and are set again by the next request; only bounds set outside a
    transaction are remembered."""
    raw = wrapper.connection
    if raw is None or getattr(wrapper, "_trajlab_web_bounds", None) is raw:
        return
    lock_ms = int(settings.TRAJLAB_WEB_LOCK_TIMEOUT_MS)
    statement_ms = int(settings.TRAJLAB_WEB_STATEMENT_TIMEOUT_MS)
    try:
        if wrapper.vendor == "postgresql":
            raw.execute(f"SET lock_timeout = {lock_ms}; SET statement_timeout = {statement_ms}")
            if raw.info.transaction_status != TransactionStatus.IDLE:
                return
        elif wrapper.vendor == "sqlite" and lock_ms:
            # 0 would mean "never wait" to SQLite: unbounded is the settings' own busy timeout.
            raw.execute(f"PRAGMA busy_timeout = {lock_ms}")
    except Exception:  # a broken connection: the request meets it and reports it as usual
        logger.warning("could not bound the web request's database waits", exc_info=True)
        return
    wrapper._trajlab_web_bounds = raw


def _on_connection_created(sender, connection, **kwargs) -> None:
    if getattr(_request, "active", False):
        _bound(connection)


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is the database giving up a wait: a lock or statement timeout (PostgreSQL) or
    a write lock held past the busy timeout (SQLite)."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in BUSY_SQLSTATES:
        return True
    return "database is locked" in str(exc)


class WebDatabaseTimeoutsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        connection_created.connect(_on_connection_created, dispatch_uid="trajlab-web-database-timeouts")

    def __call__(self, request):
        _request.active = True
        try:
            _bound(connections[DEFAULT_DB_ALIAS])
            return self.get_response(request)
        finally:
            _request.active = False

    def process_exception(self, request, exception):
        if not is_busy(exception):
            return None
        logger.warning("%s %s: the database was busy (%s)", request.method, request.path, exception)
        message = ("The database is busy with other work and this request waited as long as it may; nothing was "
                   f"changed. Try again in {RETRY_AFTER_S} seconds.")
        if request.path_info.startswith("/api/"):
            response = JsonResponse({"code": "database_busy", "message": message,
                                     "extra": {"retry_after_s": RETRY_AFTER_S}}, status=503)
        else:
            response = HttpResponse(message, status=503, content_type="text/plain")
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
