"""A web process's warm-up (``config.warmup``): gunicorn with ``config/gunicorn.conf.py`` opens
every serving thread's database connection before it serves, so the first requests open none;
the warm-up's statements change nothing."""
from __future__ import annotations

import http.client
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from accounts.services import token_for, user_create
from annotation.models import Assignment, SeatEvent, Vote
from config.warmup import warm_database
from tests.benchmarks.bench_review_load import (
    THREADS,
    WORKERS,
    free_port,
    gunicorn_start,
    gunicorn_stop,
)

pytestmark = pytest.mark.django_db(transaction=True)


def _server_backends() -> int:
    """The other sessions on the test database: the server's connections."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        return cursor.fetchone()[0]


def test_warm_up_writes_and_keeps_nothing(make_user, caplog):
    annotator = make_user("annotator")
    before = (Assignment.objects.count(), SeatEvent.objects.count(), Vote.objects.count())
    with caplog.at_level(logging.WARNING, logger="config.warmup"):
        warm_database()
    assert not caplog.records, caplog.text  # every statement ran (a failure is only logged)
    assert connection.connection is not None  # this thread's connection is open
    assert not connection.in_atomic_block
    assert (Assignment.objects.count(), SeatEvent.objects.count(), Vote.objects.count()) == before
    assert annotator.pk  # the annotator is untouched and still there
    assert type(annotator).objects.filter(pk=annotator.pk).exists()


def test_gunicorn_workers_serve_first_requests_on_open_connections(settings, media_root, tmp_path):
    """Each of the 2 x 4 serving threads has its connection before the first request; a burst of
    first claims, more than the threads, opens no other."""
    if connection.vendor != "postgresql":
        pytest.skip("counts the server's sessions on PostgreSQL")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    token = token_for(user=user_create(username="warm-client", password="warm-client-pw", roles=["annotator"]))
    port = free_port()
    server = gunicorn_start(port, tmp_path, media_root)  # answers once one worker has warmed
    try:
        deadline = time.monotonic() + 30
        while (opened := _server_backends()) < WORKERS * THREADS and time.monotonic() < deadline:
            time.sleep(0.2)
        assert opened == WORKERS * THREADS, opened

        def first_request(_):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            try:
                conn.request("POST", "/api/review/next/", body=b'{"stage": "usability"}',
                             headers={"Authorization": f"Token {token}", "Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                return response.status
            finally:
                conn.close()

        with ThreadPoolExecutor(3 * WORKERS * THREADS) as pool:
            statuses = list(pool.map(first_request, range(3 * WORKERS * THREADS)))
        assert set(statuses) == {204}, statuses  # claims: no review work in this database
        assert _server_backends() == WORKERS * THREADS
    finally:
        gunicorn_stop(server)
