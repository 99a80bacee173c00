"""What the operations layer adds to each request: ``RequestObservabilityMiddleware`` (the request
id, its context variable, the latency histograms by route and the claim / vote histogram) around a
view that does nothing, against the same view called bare.

Quick size (default): 20,000 requests per side, best of 5 rounds; full size
(``TRAJLAB_BENCH_FULL=1``): 200,000. Each request is a vote (``POST`` routed to ``review-vote``), so
both histograms are written. Measured in this process (counters in memory) and in a child process
with ``PROMETHEUS_MULTIPROC_DIR`` set (counters in memory-mapped files, as under gunicorn with
several workers). Figures go to ``var/bench/ops_overhead.json``; run with ``-s`` to see them.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark
FULL = os.environ.get("TRAJLAB_BENCH_FULL") == "1"
N = 200_000 if FULL else 20_000
ROUNDS = 5
OUT = Path(__file__).resolve().parents[2] / "var" / "bench" / "ops_overhead.json"


def overhead_us(n: int = N, rounds: int = ROUNDS) -> dict:
    """Per-request microseconds of the view bare and behind the middleware (best round of each)."""
    from django.http import HttpResponse
    from django.test import RequestFactory
    from django.urls import resolve

    from common.observability.requests import RequestObservabilityMiddleware

    match = resolve("/api/review/items/1/votes/")
    response = HttpResponse(b"", status=201)

    def view(request):
        request.resolver_match = match
        return response

    middleware = RequestObservabilityMiddleware(view)
    requests = [RequestFactory().post("/api/review/items/1/votes/", HTTP_X_REQUEST_ID=f"bench-{i}")
                for i in range(1000)]

    def timed(call) -> float:
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for i in range(n):
                call(requests[i % 1000])
            best = min(best, time.perf_counter() - start)
        return best / n * 1e6

    bare, wrapped = timed(view), timed(middleware)
    return {"bare_us": round(bare, 2), "middleware_us": round(wrapped, 2), "overhead_us": round(wrapped - bare, 2)}


def _multiprocess() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        code = ("import django, json; django.setup(); "
                "from tests.benchmarks.bench_ops_overhead import overhead_us; "
                f"print(json.dumps(overhead_us({N}, {ROUNDS})))")
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=folder, DJANGO_SETTINGS_MODULE="config.settings")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                             cwd=Path(__file__).resolve().parents[2])
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_operations_middleware_adds_well_under_a_millisecond():
    single = overhead_us()
    multi = _multiprocess()
    result = {"size": "full" if FULL else "quick", "requests": N, "rounds": ROUNDS,
              "machine": f"{platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}",
              "in_memory": single, "multiprocess_dir": multi}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(f"\noperations middleware per request ({N:,} votes, best of {ROUNDS}):")
    for label, row in (("counters in memory", single), ("PROMETHEUS_MULTIPROC_DIR", multi)):
        print(f"  {label:<26} bare {row['bare_us']:7.2f} µs  with middleware {row['middleware_us']:7.2f} µs  "
              f"overhead {row['overhead_us']:7.2f} µs")
    assert single["overhead_us"] < 1000 and multi["overhead_us"] < 1000
