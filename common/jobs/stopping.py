"""Whether this worker process was asked to stop (a warm shutdown: SIGTERM to the Celery worker).

``common.observability.tasks`` sets the flag: in the worker's main process when it is told to shut
down, and in each prefork pool process when the main process passes the word on (``SIGUSR2``). A
running run's reporter reads it at each progress report (``common.jobs.runs``): the run is put back
to ``queued`` and its message back on the broker, so another worker takes it up, and training
resumes from its last checkpoint. The flag is never set outside a worker.
"""
from __future__ import annotations

import threading

_stopping = threading.Event()


class WorkerStopping(Exception):
    """Raised by a run's reporter once the worker is stopping: the run goes back to its queue."""


def worker_stopping_set() -> None:
    _stopping.set()


def worker_stopping_clear() -> None:
    _stopping.clear()


def worker_stopping() -> bool:
    return _stopping.is_set()
