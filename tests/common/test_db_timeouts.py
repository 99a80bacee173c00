"""Web requests wait for the database a bounded time (issue 27, finding 2): a request that meets a
lock held elsewhere answers 503 ``database_busy`` once ``TRAJLAB_WEB_LOCK_TIMEOUT_MS`` has passed
(it waited for the lock as long as its holder held it, and answered 500 after 30 s on SQLite), and
connections that no request opened keep no bound (workers' long jobs)."""
from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError, connection, transaction

from common.db_timeouts import is_busy
from tests.trajectories.factories import video_factory
from trajectories.models import ProposalRun, TrackImport

HELD_S = 20
ROWS = "track_id,frame,x1,y1,x2,y2\n" + "".join(f"1,{f},{10 + f},20,{50 + f},100\n" for f in range(10))


def _other_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"] or None,
                           host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432)


def _setting(name: str) -> str:
    return connection.connection.execute(f"SHOW {name}").fetchone()[0]


@pytest.fixture
def unbound_afterwards():
    """The test connection as a worker has it again afterwards (no web bounds)."""
    yield
    if connection.connection is not None:
        connection.connection.execute("RESET lock_timeout; RESET statement_timeout")
    connection.__dict__.pop("_trajlab_web_bounds", None)


def test_a_request_that_meets_a_held_lock_answers_503_after_the_lock_timeout(transactional_db, media_root, settings,
                                                                              manager_client, unbound_afterwards):
    settings.TRAJLAB_WEB_LOCK_TIMEOUT_MS = 300
    video = video_factory(split="train", frame_count=12)
    assert manager_client.get("/api/track-imports/").status_code == 200          # the views are loaded
    holder = _other_connection()
    release = threading.Timer(HELD_S, holder.rollback)                          # a long transaction elsewhere
    try:
        # given: another session holds the video's split group row for HELD_S seconds
        holder.execute("SELECT id FROM trajectories_splitgroup WHERE id = %s FOR UPDATE", [video.split_group_id])
        release.start()
        # when: an import needs that row
        start = time.monotonic()
        response = manager_client.post("/api/track-imports/", {
            "file": SimpleUploadedFile("t.csv", ROWS.encode()), "video": video.pk, "format": "csv",
            "source": "lab"}, format="multipart")
        waited = time.monotonic() - start
    finally:
        release.cancel()
        holder.rollback()
        holder.close()
    # then: it gave up after about the bound, said so, and stored nothing
    assert response.status_code == 503, response.content[:300]
    assert response.json()["code"] == "database_busy" and response["Retry-After"] == "2"
    assert 0.25 < waited < HELD_S / 2
    assert not ProposalRun.objects.exists() and not TrackImport.objects.exists()
    assert _setting("lock_timeout") == "300ms" and _setting("statement_timeout") == "30s"


def test_connections_no_request_opened_have_no_bounds(transactional_db, manager_client, unbound_afterwards):
    connection.close()
    connection.ensure_connection()                     # as a worker's or a command's connection opens
    assert _setting("lock_timeout") == "0" and _setting("statement_timeout") == "0"
    assert manager_client.get("/api/track-imports/").status_code == 200
    assert _setting("lock_timeout") == "10s"           # the request bounded the connection it used
    connection.close()
    assert manager_client.get("/api/track-imports/").status_code == 200   # one opened during a request
    assert _setting("lock_timeout") == "10s" and _setting("statement_timeout") == "30s"


def test_the_busy_errors_of_both_databases_are_recognised():
    class Cause(Exception):
        sqlstate = "55P03"

    lock = OperationalError("canceling statement due to lock timeout")
    lock.__cause__ = Cause()
    assert is_busy(lock) and is_busy(OperationalError("database is locked"))
    assert not is_busy(OperationalError("no such table: x")) and not is_busy(ValueError("database is locked"))


def test_a_web_request_on_sqlite_waits_for_the_write_lock_the_web_bound(settings):
    """SQLite has no statement timeout: the bound is its wait for the write lock (busy_timeout),
    which the settings set to 30 s for every connection and a request lowers for its own."""
    import sqlite3

    from common.db_timeouts import _bound

    class Wrapper:                                   # what the middleware reads of Django's wrapper
        vendor = "sqlite"

        def __init__(self):
            self.connection = sqlite3.connect(":memory:", timeout=30)

    settings.TRAJLAB_WEB_LOCK_TIMEOUT_MS = 1500
    wrapper = Wrapper()
    assert wrapper.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
    _bound(wrapper)
    assert wrapper.connection.execute("PRAGMA busy_timeout").fetchone()[0] == 1500


def test_bounds_set_inside_a_transaction_that_rolls_back_are_set_again(transactional_db, manager_client,
                                                                       unbound_afterwards):
    """``SET`` is undone by the rollback of the transaction it ran in: a connection first bound inside
    a transaction is bound again by the next request instead of keeping no bounds for its life."""
    connection.close()
    connection.ensure_connection()
    with pytest.raises(RuntimeError), transaction.atomic():
        assert manager_client.get("/api/track-imports/").status_code == 200
        assert _setting("lock_timeout") == "10s"
        raise RuntimeError("roll back")
    assert _setting("lock_timeout") == "0"                                   # the rollback undid it
    assert manager_client.get("/api/track-imports/").status_code == 200
    assert _setting("lock_timeout") == "10s" and _setting("statement_timeout") == "30s"
