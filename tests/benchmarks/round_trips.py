"""The clients and figures of the round-trip benchmark in ``bench_review_load.py``: annotators
that either vote and then claim (two requests per item, the old path) or vote with ``"next":
true`` (one request), at people's pace or flat out. Plain stdlib: the client processes never
touch Django or the database."""
from __future__ import annotations

import http.client
import json
import random
import time
import uuid
from collections import defaultdict

import numpy as np

LABELS, WEIGHTS = ("usable", "unusable", "uncertain"), (0.60, 0.25, 0.15)
TIMEOUT_S = 30.0
# (figure, response header, type) of ``common.timing``, besides Server-Timing's ``app`` time
SERVER_HEADERS = (("queries", "X-DB-Queries", int), ("db_ms", "X-DB-Ms", float), ("cpu_ms", "X-CPU-Ms", float))


class TimedHttp:
    """One keep-alive connection; each answer with the server's own time, query count, database
    time and CPU time (the ``Server-Timing``, ``X-DB-Queries``, ``X-DB-Ms`` and ``X-CPU-Ms``
    headers of ``common.timing``)."""

    def __init__(self, port: int, token: str):
        self.port = port
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json",
                        "Accept": "application/json"}
        self.conn: http.client.HTTPConnection | None = None

    def post(self, path: str, payload: dict) -> tuple[int, dict | None, float, dict]:
        """``(status, body, client seconds, server figures)``: the figures ``server_ms``,
        ``queries``, ``db_ms`` and ``cpu_ms`` that the server's headers gave."""
        body = json.dumps(payload).encode()
        for _ in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=TIMEOUT_S)
            start = time.monotonic()
            try:
                self.conn.request("POST", path, body=body, headers=self.headers)
                response = self.conn.getresponse()
                data = response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                continue
            elapsed = time.monotonic() - start
            if response.will_close:
                self.conn.close()
                self.conn = None
            timing = response.getheader("Server-Timing") or ""
            figures = {"server_ms": float(timing.split("dur=")[1]) if "dur=" in timing else None,
                       **{key: (kind(value) if (value := response.getheader(header)) else None)
                          for key, header, kind in SERVER_HEADERS}}
            return response.status, (json.loads(data) if data else None), elapsed, figures
        raise ConnectionError(f"POST {path}: the server closed the connection three times")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def round_trip_client(index: int, port: int, token: str, username: str, mode: str, max_votes: int,
                      pause: tuple[float, float] | None, seconds: float, go, results, arrive: bool = False) -> None:
    """One annotator for ``seconds`` (or ``max_votes``): claim once, then per item wait
    ``pause`` (people's pace; none: flat out) and vote, either with ``"next"`` (``mode`` "one")
    or followed by a claim ("two"). With ``arrive`` the first claim comes at a random moment of
    the first ``pause`` (people open the page one by one) instead of with the other clients'.
    Reports per request kind the server ms, queries and client seconds, per item the client time
    from sending the vote to holding the next item, and every acknowledged vote."""
    rng = random.Random(7919 * index + (1 if mode == "one" else 2))
    client = TimedHttp(port, token)
    kinds: dict[str, dict[str, list]] = defaultdict(lambda: {"server_ms": [], "queries": [], "db_ms": [],
                                                             "cpu_ms": [], "client_s": []})
    steps: list[float] = []
    acks: list[dict] = []
    unexpected: list[str] = []
    no_work = 0

    def record(kind, answer):
        status, body, seconds_, figures = answer
        k = kinds[kind]
        k["client_s"].append(seconds_)
        for key, value in figures.items():
            if value is not None:
                k[key].append(value)
        return status, body

    go.wait(timeout=120)
    start = time.monotonic()
    if arrive and pause:
        time.sleep(rng.uniform(0.0, pause[1]))
    try:
        status, seat = record("next", client.post("/api/review/next/", {"stage": "usability"}))
        if status != 200:
            no_work += status == 204
            seat = None
        while seat is not None and len(acks) < max_votes and time.monotonic() - start < seconds:
            if pause:
                time.sleep(rng.uniform(*pause))
            vote = {"label": rng.choices(LABELS, WEIGHTS)[0], "reasons": [], "time_spent_ms": rng.randint(800, 9000),
                    "client_request_id": str(uuid.uuid4())}
            path = f"/api/review/items/{seat['item']}/votes/"
            # as the app does: the upcoming item (which it fetched ahead) is asked for first
            prefer = {"prefer": seat["upcoming"]["token"]} if seat.get("upcoming") else {}
            sent = time.monotonic()
            if mode == "one":
                status, body = record("vote+next", client.post(path, {**vote, "next": True, **prefer}))
                following = (body or {}).get("next") if status == 201 else None
            else:
                status, body = record("vote", client.post(path, vote))
                following = None
                if status == 201:
                    nstatus, following = record("next", client.post("/api/review/next/",
                                                                     {"stage": "usability", **prefer}))
                    if nstatus != 200:
                        no_work += nstatus == 204
                        following = None
            if status != 201:
                unexpected.append(f"vote: {status} {body}")
                break
            steps.append(time.monotonic() - sent)
            acks.append({"id": body["id"], "item": seat["item"], "request_id": vote["client_request_id"],
                         "label": vote["label"], "how": "created", "status": status})
            if following is None and mode == "one":
                no_work += 1
            seat = following
    except Exception as exc:  # reported to the test, which fails on it
        unexpected.append(f"{type(exc).__name__}: {exc}")
    finally:
        client.close()
        results.put({"index": index, "username": username, "kinds": {k: dict(v) for k, v in kinds.items()},
                     "steps": steps, "acks": acks, "unexpected": unexpected, "no_work": no_work,
                     "started": start, "finished": time.monotonic()})


def percentiles(values: list[float], scale: float = 1.0) -> dict:
    if not values:
        return {"n": 0, "p50": None, "p95": None, "max": None}
    a = np.asarray(values, dtype=float) * scale
    return {"n": len(values), "p50": round(float(np.percentile(a, 50)), 1), "p95": round(float(np.percentile(a, 95)), 1),
            "max": round(float(a.max()), 1)}


def phase_figures(results: list[dict]) -> dict:
    """One phase's figures: per request kind the server time (ms), the queries, the server's
    time in database statements and its CPU time (ms), and the client time (ms); the vote-to-next-item time per item (ms); votes per second over the phase."""
    merged: dict[str, dict[str, list]] = defaultdict(lambda: {"server_ms": [], "queries": [], "db_ms": [],
                                                              "cpu_ms": [], "client_s": []})
    for r in results:
        for kind, values in r["kinds"].items():
            for key, vals in values.items():
                merged[kind][key].extend(vals)
    votes = sum(len(r["acks"]) for r in results)
    wall = (max(r["finished"] for r in results) - min(r["started"] for r in results)) if results else 0.0
    return {
        "requests": {kind: {"server_ms": percentiles(v["server_ms"]),
                            "queries": {"max": max(v["queries"], default=None),
                                        "p50": percentiles(v["queries"])["p50"]},
                            "db_ms": percentiles(v["db_ms"]), "cpu_ms": percentiles(v["cpu_ms"]),
                            "client_ms": percentiles(v["client_s"], 1000)} for kind, v in merged.items()},
        "vote_to_next_item_ms": percentiles([s for r in results for s in r["steps"]], 1000),
        "votes": votes, "wall_s": round(wall, 2), "votes_per_s": round(votes / wall, 1) if wall else None,
        "no_work": sum(r["no_work"] for r in results),
    }
