"""Django's own HTTP server (``manage.py serve`` in the embedded mode, and the live test server)
with and without Nagle's algorithm (:mod:`common.dev_server`), in the same run.

One server thread per variant on a free loopback port, Django's ``ThreadedWSGIServer`` and
``WSGIRequestHandler`` as ``runserver`` starts them; the slow way is the handler as Django ships it
(Nagle on), the fast way the same handler with ``TCP_NODELAY`` on each connection. A client sends
``REQUESTS`` ``GET /accounts/login/`` (the sign-in page) in turn on one kept-alive connection per
variant, as a browser does (the server keeps a connection open after an answer of known length),
alternating between the variants so both see the same machine. Figures (client ms per request)
go to ``var/bench/dev_server.json``: ``requests``, ``path`` and under ``variants`` per variant
``p50_ms``, ``p95_ms``, ``max_ms``."""
from __future__ import annotations

import http.client
import json
import threading
import time
from pathlib import Path

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.servers import basehttp

from tests.benchmarks.round_trips import percentiles

pytestmark = pytest.mark.benchmark

BENCH_DIR = Path(__file__).resolve().parents[2] / "var" / "bench"
REQUESTS = 50
PATH = "/accounts/login/"


class _Quiet(basehttp.WSGIRequestHandler):
    disable_nagle_algorithm = False     # as Django ships it

    def log_message(self, format, *args):
        pass


class _NoDelay(_Quiet):
    disable_nagle_algorithm = True      # what common.dev_server.send_without_delay sets


def _serve(handler) -> tuple[basehttp.ThreadedWSGIServer, threading.Thread]:
    server = basehttp.ThreadedWSGIServer(("127.0.0.1", 0), handler, allow_reuse_address=False)
    server.set_app(WSGIHandler())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return server, thread


def _get(conn: http.client.HTTPConnection) -> float:
    start = time.perf_counter()
    conn.request("GET", PATH)
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200 and b"<form" in body, (response.status, body[:200])
    if response.will_close:
        conn.close()            # http.client opens the next one
    return time.perf_counter() - start


def test_dev_server_without_send_delay(settings):
    settings.ALLOWED_HOSTS = ["*"]
    servers = {name: _serve(handler) for name, handler in (("nagle", _Quiet), ("nodelay", _NoDelay))}
    try:
        conns = {name: http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
                 for name, (server, _) in servers.items()}
        for conn in conns.values():
            _get(conn)                  # the first request loads the URL configuration
        seconds: dict[str, list[float]] = {name: [] for name in servers}
        for _ in range(REQUESTS):
            for name, conn in conns.items():
                seconds[name].append(_get(conn))
        for conn in conns.values():
            conn.close()
    finally:
        for server, thread in servers.values():
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
    figures = {name: percentiles(values, 1000) for name, values in seconds.items()}
    report = {"requests": REQUESTS, "path": PATH,
              "variants": {name: {"p50_ms": f["p50"], "p95_ms": f["p95"], "max_ms": f["max"]}
                           for name, f in figures.items()}}
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "dev_server.json").write_text(json.dumps(report, indent=2) + "\n")
    v = report["variants"]
    print(f"\nDjango's server, GET {PATH} x {REQUESTS}: Nagle on p50 {v['nagle']['p50_ms']} / p95 "
          f"{v['nagle']['p95_ms']} ms; TCP_NODELAY p50 {v['nodelay']['p50_ms']} / p95 {v['nodelay']['p95_ms']} ms")
    assert v["nodelay"]["p50_ms"] < v["nagle"]["p50_ms"]
