"""The id of the request a piece of code runs for: in the web process, the request's (set by
``common.observability.requests``); in a worker, the id of the request that queued the task (set by
``common.observability.tasks``). No Django or DRF import here: ``config.celery`` loads it first."""
from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar

REQUEST_ID_MAX = 128
_VALID = re.compile(rf"[\x21-\x7e]{{1,{REQUEST_ID_MAX}}}")

#: The id of the request (or of the request that queued the task) this code runs for; "" outside.
request_id: ContextVar[str] = ContextVar("trajlab_request_id", default="")


def request_id_checked(value: str | None) -> str | None:
    """``value`` when it can serve as a request id (printable ASCII, no spaces, bounded), else None."""
    if value and _VALID.fullmatch(value):
        return value
    return None


def request_id_new() -> str:
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Sets ``record.request_id`` on every record (``""`` outside a request or a task)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id.get()
        return True
