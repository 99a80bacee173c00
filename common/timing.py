"""Per-request server time and database query count, as response headers, for benchmarks.

Off unless ``TRAJLAB_SERVER_TIMING`` is set (the review load benchmark sets it for its server):
then every response carries ``Server-Timing: app;dur=<ms>`` (the time Django spent on the request,
middleware included) and ``X-DB-Queries: <n>`` (the queries it sent on its connection)."""
from __future__ import annotations

import time

from django.db import connection


class ServerTimingMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        queries = 0

        def count(execute, sql, params, many, context):
            nonlocal queries
            queries += 1
            return execute(sql, params, many, context)

        start = time.perf_counter()
        with connection.execute_wrapper(count):
            response = self.get_response(request)
        response["Server-Timing"] = f"app;dur={(time.perf_counter() - start) * 1000:.2f}"
        response["X-DB-Queries"] = str(queries)
        return response
