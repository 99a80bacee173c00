"""A web process's warm-up before it serves: each serving thread's database connection opened and
the request path's first statements run once, so the first requests do not pay for them.

Django keeps one connection per thread (persistent with ``DATABASE_CONN_MAX_AGE``), opened by the
thread's first query. Without a warm-up, a web process's first requests each open one (a new
PostgreSQL backend: a process forked, authenticated and configured) and then meet that backend's
cold caches: the first statements on a table load its catalog entries (the table, its indexes,
their statistics) and the process's own first use of a code path builds its statements' text and
Python objects. When 30 annotators start together, 30 first claims queue behind those costs on
a few threads.

:func:`warm_database` is run in each thread that will serve: by ``config/gunicorn.conf.py``'s
``post_worker_init`` in each of a worker's threads (gthread) or in its one thread (sync), and by
``config.wsgi`` once under any WSGI server (the code paths; that connection is closed again, as
the process may fork next). It changes nothing in the database: the statements run in a
transaction that is rolled back, for a user and a token that do not exist."""
from __future__ import annotations

import logging
import threading

from django.db import connection, transaction

logger = logging.getLogger(__name__)

WARM_TIMEOUT_S = 30.0
_NO_USER_ID = 0                     # no user has id 0 (ids start at 1)
_NO_ITEM_ID = 0                     # nor a review item
_NO_TOKEN = "0" * 40                # nor this key (DRF's keys are random hex)


def warm_database() -> None:
    """Open this thread's connection and run the token check's and the claim's statements once
    (their reads; no row is locked or written). A database that cannot be reached is logged,
    not raised: the requests meet it and report it as usual."""
    from django.contrib.auth import get_user_model
    from rest_framework.exceptions import AuthenticationFailed

    from accounts.authentication import ExpiringTokenAuthentication
    from annotation.curation.services import claims
    from annotation.models import WorkItem

    try:
        connection.ensure_connection()
        with transaction.atomic():
            try:
                ExpiringTokenAuthentication().authenticate_credentials(_NO_TOKEN)
            except AuthenticationFailed:
                pass
            nobody = get_user_model()(pk=_NO_USER_ID)
            stage = WorkItem.Stage.values[0]
            claims._lock_annotator(nobody, with_last_video=True, quick_commit=True)
            claims._active_seat(nobody, stage)
            # the claim's own statements, as a first claim runs them: the candidate read locks
            # the first claimable item until the rollback, as any claim does (others skip it);
            # the seat insert asks for a panel of 0 seats on an item that does not exist: no row
            claims._next_candidates(nobody, stage, None, [], skip_locked=True)
            claims._preferred_candidate(nobody, stage, _NO_ITEM_ID)
            claims._take_free_seat(WorkItem(pk=_NO_ITEM_ID, panel_size=0), nobody, 60)
            transaction.set_rollback(True)
    except Exception:
        logger.warning("web warm-up: the database's first statements did not run", exc_info=True)


def warm_worker_threads(worker) -> None:
    """gunicorn's ``post_worker_init``: :func:`warm_database` in each thread of a gthread
    worker's pool (all at once, held at a barrier until every one has its own thread), or in the
    worker's own thread (sync workers serve there)."""
    pool = getattr(worker, "tpool", None)
    if pool is None:
        warm_database()
        return
    n = worker.cfg.threads
    barrier = threading.Barrier(n)

    def warm() -> None:
        try:
            barrier.wait(WARM_TIMEOUT_S)   # n tasks on n distinct threads: none runs two
        except threading.BrokenBarrierError:
            pass
        warm_database()

    for future in [pool.submit(warm) for _ in range(n)]:
        future.result(timeout=2 * WARM_TIMEOUT_S)
