"""Per-request server time, database time and query count, as response headers, for benchmarks.

Off unless ``TRAJLAB_SERVER_TIMING`` is set (the review load benchmark sets it for its server):
then every response carries ``Server-Timing: app;dur=<ms>`` (the time Django spent on the request,
middleware included), ``X-DB-Queries: <n>`` (the queries it sent on its connection), ``X-DB-Ms``
(the wall time those queries took, answers read) and ``X-CPU-Ms`` (the CPU time of the thread that
served it: the rest of ``app`` is waiting, for the database, the interpreter lock or a core)."""
from __future__ import annotations

import time

from django.db import connection


class ServerTimingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        queries = 0
        database_s = 0.0

        def count(execute, sql, params, many, context):
            nonlocal queries, database_s
            queries += 1
            sent = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                database_s += time.perf_counter() - sent

        start, cpu = time.perf_counter(), time.thread_time()
        with connection.execute_wrapper(count):
            response = self.get_response(request)
        response["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.2f}"
        response["X-DB-Queries"] = str(queries)
        response["X-DB-Ms"] = f"{database_s * 1000:.2f}"
        response["X-CPU-Ms"] = f"{(time.thread_time() - cpu) * 1000:.2f}"
        return response
