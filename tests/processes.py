"""Helpers for tests that start real server processes (workers, gunicorn) on the test database."""
from __future__ import annotations

import os
import signal
import subprocess
from urllib.parse import quote

from django.db import connection


def database_url_for_subprocess() -> str:
    """A DATABASE_URL that points another process at the database this test run uses."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def stop_process_group(proc: subprocess.Popen, *, timeout: float = 20.0) -> None:
    """Graceful stop (SIGTERM to its session's group), then kill whatever is left."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
