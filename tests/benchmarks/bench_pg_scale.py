"""PostgreSQL at scale (opt-in, full size only): claims, votes, the manager's pages and a release
export over a database of a million review items.

Runs only with ``TRAJLAB_BENCH_SCALE=1`` (a fraction such as ``0.01`` runs a smaller copy to try the
benchmark; its figures are not the benchmark's). At full size the database takes about 6 GB.

The fill (``COPY``, :mod:`tests.benchmarks.fill`, with the big tables' indexes and constraints set
aside and built again afterwards, then ``VACUUM ANALYZE``):

- the released train split of ``bench_release.py``: 1,000 videos, 100,000 pooled trajectories
  of 20 observations, 10,000 accepted queries with 1,000,000 relations;
- usability review of 1,000,000 items: one per pooled trajectory, and one per trajectory of a
  second proposal run per video (900 per video, one observation each, never pooled); panels of
  10 seats (6 votes decide), 200 annotators and 10 adjudicators: about 10,000,000 votes, each
  panel vote with its completed seat; about 1% of the items open with partial panels.

Then, with the lock file ``TRAJLAB_BENCH_LOCK`` held when set (the fill runs before it), against
gunicorn as ``bench_review_load.py`` starts it (2 workers x 4 threads, persistent connections):

- 30 annotator processes (annotators of the fill, about 50,000 votes each) claim and vote as
  ``round_trips.py``'s clients do: at people's pace (2-5 s per item; vote then claim, and the
  vote that answers with the next item), the clients arriving one by one over the first 5 s as
  people open the page; then all 30 starting in the same instant (the worst first minute, its
  figures reported beside the target's); then flat out. Target claim and vote p95 < 20 ms;
- the manager's progress page (``GET /api/ui/progress/``, what ``manage/progress`` polls): < 200 ms;
- the agreement page (``GET /api/review/agreement/?stage=usability``): < 1 s;
- a release export of the train split (``release_create``, in this process): >= 100,000 records/s.

Peak memory: each gunicorn worker's resident high-water mark (``VmHWM``, reset through
``/proc/<pid>/clear_refs`` before each phase) and this process's during the export. Then the
``EXPLAIN (ANALYZE, BUFFERS)`` plans of the hot statements (:mod:`tests.benchmarks.plans`): a
claim and a vote through the whole request (generic plans too), the two pages' reads and the
export's reads. Figures go to ``var/bench/pg_scale.json``, the plans to
``var/bench/pg_scale_plans.txt``.
"""
from __future__ import annotations

import fcntl
import http.client
import json
import multiprocessing
import os
import platform
import queue
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import Client, override_settings

from accounts.services import token_for, user_create
from annotation.curation.services.agreement_tallies import agreement_tallies_refresh
from annotation.models import Assignment, Relation, ReviewPolicy, Vote, WorkItem
from annotation.releases.services.release_io import reading as release_reading
from annotation.releases.services.releases import release_create
from tests.benchmarks import fill
from tests.benchmarks.bench_review_load import free_port, gunicorn_start, gunicorn_stop
from tests.benchmarks.plans import explain_recorded, explained, recorded
from tests.benchmarks.round_trips import percentiles, phase_figures, round_trip_client
from trajectories.models import Trajectory

SCALE = float(os.environ.get("TRAJLAB_BENCH_SCALE", "0") or 0)
pytestmark = [pytest.mark.benchmark, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(SCALE <= 0, reason="PostgreSQL at scale runs only with TRAJLAB_BENCH_SCALE=1")]

REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "var" / "bench"
N_VIDEOS = max(2, round(1_000 * SCALE))
POOLED, EXTRA = 100, 900                          # usability items per video: pooled, second run
PANEL, REQUIRED = 10, 6
N_RATERS, N_ADJUDICATORS, N_CLIENTS = 200, 10, 30
OPEN_FRACTION = 0.01
# (phase, pause between items in seconds or None, paths, seconds, whether the clients arrive over the
# first pause rather than together)
PHASES = [("30 clients, 2-5 s pauses", (2.0, 5.0), ("two", "one"), 45.0, True),
          ("30 clients starting together", (2.0, 5.0), ("two",), 45.0, False),
          ("saturation, 30 clients", None, ("two",), 30.0, False)]
PROGRESS_REQUESTS, AGREEMENT_REQUESTS, AGREEMENT_BUDGET_S = 20, 3, 240.0
TARGETS = {"claim_p95_ms": 20.0, "vote_p95_ms": 20.0, "progress_p95_ms": 200.0, "agreement_p95_ms": 1000.0,
           "export_records_per_s": 100_000}
EXPORT_PLAN_MIN_MS = 20.0                         # export reads shown with their whole plan from here


# -- memory ---------------------------------------------------------------------------------------
def _status_bytes(field: str, pid: int | str = "self") -> int:
    """``VmRSS``, ``VmHWM``… of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} not in /proc/{pid}/status")


def _reset_peak(pid: int | str = "self") -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def _workers(server) -> list[int]:
    """The gunicorn master's child processes (its workers), from ``/proc/<pid>/stat``."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # a process that ended meanwhile
        if int(fields[1]) == server.pid:
            children.append(int(stat.parent.name))
    return children


def _workers_reset(server) -> None:
    for pid in _workers(server):
        _reset_peak(pid)


def _workers_peak_mb(server) -> float:
    return round(max((_status_bytes("VmHWM", pid) for pid in _workers(server)), default=0) / 2**20, 1)


@contextmanager
def _bench_lock():
    """Hold the lock file ``TRAJLAB_BENCH_LOCK`` (when set), so timed runs on a shared machine take turns."""
    path = os.environ.get("TRAJLAB_BENCH_LOCK")
    if not path:
        yield 0.0
        return
    start = time.perf_counter()
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - start
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# -- the fill -------------------------------------------------------------------------------------
def _fill() -> dict:
    ReviewPolicy.objects.update_or_create(name="default", defaults={"panel_size": PANEL, "required_votes": REQUIRED})
    raters, adjudicators = fill.review_users(n_raters=N_RATERS, n_adjudicators=N_ADJUDICATORS, prefix="scale")
    timings = {}
    with fill.bulk_load(Trajectory, Relation, WorkItem, Vote, Assignment):
        start = time.perf_counter()
        release = fill.release_records(n_videos=N_VIDEOS, traj_per_video=POOLED)
        timings["release_records_s"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        review = fill.usability_review(n_videos=N_VIDEOS, pooled_per_video=POOLED, extra_per_video=EXTRA,
                                       raters=raters, adjudicators=adjudicators, panel=PANEL, required=REQUIRED,
                                       open_fraction=OPEN_FRACTION)
        timings["review_records_s"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
    timings["indexes_and_vacuum_s"] = round(time.perf_counter() - start, 1)
    fill.sequences_reset(Vote, Assignment)
    start = time.perf_counter()
    agreement_tallies_refresh()  # every loaded vote counted into the agreement tallies at once
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE annotation_agreementpending")  # its dead rows, as autovacuum would
    timings["agreement_tallies_s"] = round(time.perf_counter() - start, 1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the small tables too, as autovacuum would have by now
    return {"release": release, "review": review, "timings": timings, "raters": raters.tolist()}


def _database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        size = cursor.fetchone()[0]
        cursor.execute("SELECT c.relname, pg_total_relation_size(c.oid), pg_indexes_size(c.oid), c.reltuples "
                       "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                       "AND c.relkind = 'r' ORDER BY 2 DESC LIMIT 8")
        tables = {name: {"total_mb": round(total / 2**20), "indexes_mb": round(idx / 2**20), "rows": int(rows)}
                  for name, total, idx, rows in cursor.fetchall()}
        cursor.execute("SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'work_mem', "
                       "'effective_cache_size', 'max_parallel_workers_per_gather', 'random_page_cost', 'jit', "
                       "'synchronous_commit')")
        settings = {name: f"{value}{unit or ''}" for name, value, unit in cursor.fetchall()}
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
    return {"size_mb": round(size / 2**20), "tables": tables, "settings": settings, "server_version": version}


# -- the HTTP phases ------------------------------------------------------------------------------
def _get(port: int, token: str, path: str, timeout: float) -> tuple[int, float, float | None, int]:
    """``(status, client seconds, server ms, bytes)`` of one GET on a fresh connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start = time.monotonic()
    try:
        conn.request("GET", path, headers={"Authorization": f"Token {token}", "Accept": "application/json"})
        response = conn.getresponse()
        body = response.read()
    except (http.client.HTTPException, OSError):
        return 0, time.monotonic() - start, None, 0
    finally:
        conn.close()
    timing = response.getheader("Server-Timing") or ""
    return response.status, time.monotonic() - start, float(timing.split("dur=")[1]) if "dur=" in timing else None, len(body)


def _page(port: int, token: str, path: str, *, n: int, budget_s: float, timeout: float, warmup: int) -> dict:
    first = [_get(port, token, path, timeout) for _ in range(warmup)]
    runs, start = [], time.monotonic()
    while len(runs) < n and time.monotonic() - start < budget_s:
        runs.append(_get(port, token, path, timeout))
    ok = [r for r in runs if r[0] == 200]
    return {"path": path, "statuses": sorted({r[0] for r in first + runs}), "warmup_ms": [round(r[1] * 1000, 1) for r in first],
            "client_ms": percentiles([r[1] for r in ok], 1000), "server_ms": percentiles([r[2] for r in ok if r[2]]),
            "bytes": ok[0][3] if ok else None, "failed": len(runs) - len(ok)}


def _phase(port: int, users: list, tokens: list[str], mode: str, pause, seconds: float,
           arrive: bool) -> tuple[dict, list]:
    ctx = multiprocessing.get_context("fork")
    connections.close_all()
    go, results_queue = ctx.Event(), ctx.Queue()
    processes = [ctx.Process(target=round_trip_client, daemon=True, args=(
        i, port, tokens[i], users[i].username, mode, 100_000, pause, seconds, go, results_queue, arrive))
        for i in range(len(users))]
    for p in processes:
        p.start()
    go.set()
    results = []
    for _ in processes:
        try:
            results.append(results_queue.get(timeout=seconds + 120))
        except queue.Empty:
            break
    for p in processes:
        p.join(timeout=10)
        if p.is_alive():
            p.kill()
    assert len(results) == len(users), f"{mode}: {len(users) - len(results)} client(s) never reported"
    figures = phase_figures(results)
    # where the clients start together, each one's first request of a kind waits behind the others':
    # the same figures without it
    kinds = {kind for r in results for kind in r["kinds"]}
    figures["after_start"] = {kind: {
        "client_ms": percentiles([v for r in results for v in r["kinds"].get(kind, {}).get("client_s", [])[1:]], 1000),
        "server_ms": percentiles([v for r in results for v in r["kinds"].get(kind, {}).get("server_ms", [])[1:]])}
        for kind in sorted(kinds)}
    return figures, [u for r in results for u in r["unexpected"]]


# -- the plans ------------------------------------------------------------------------------------
def _request_plans(token: str) -> dict:
    """A claim and a vote through the whole request (token check, service, answer), explained."""
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    with explained(generic=True) as claim:
        answer = client.post("/api/review/next/", {"stage": "usability"}, content_type="application/json")
    if answer.status_code == 204:
        return {"claim (POST /api/review/next/): no work left": claim.plans}
    assert answer.status_code == 200, answer.content[:300]
    vote_body = {"label": "usable", "reasons": [], "time_spent_ms": 2100, "client_request_id": str(uuid.uuid4())}
    with explained(generic=True) as vote:
        answer = client.post(f"/api/review/items/{answer.json()['item']}/votes/", vote_body,
                             content_type="application/json")
    assert answer.status_code == 201, answer.content[:300]
    return {"claim (POST /api/review/next/)": claim.plans, "vote (POST /api/review/items/<id>/votes/)": vote.plans}


def _page_plans(manager_token: str) -> dict:
    client = Client(HTTP_AUTHORIZATION=f"Token {manager_token}")
    out = {}
    for name, path in (("progress (GET /api/ui/progress/)", "/api/ui/progress/"),
                       ("agreement (GET /api/review/agreement/?stage=usability)",
                        "/api/review/agreement/?stage=usability")):
        with explained() as plans:
            assert client.get(path).status_code == 200
        out[name] = plans.plans
    return out


def _write_plans(sections: dict, path: Path) -> list[dict]:
    """The plans file, and per statement its path, execution time and first plan line."""
    summary, lines = [], []
    for name, plans in sections.items():
        lines += ["=" * 100, f"== {name}: {len(plans)} statement(s)", "=" * 100]
        for p in plans:
            summary.append({"path": name, "execution_ms": p.execution_ms, "sql": p.sql[:160],
                            "plan": (p.custom.splitlines() or [p.error])[0][:160]})
            if name.startswith("export") and (p.execution_ms or 0) < EXPORT_PLAN_MIN_MS and not p.error:
                lines.append(f"-- {p.execution_ms} ms (run {p.runs}x): {p.sql[:300]}")
                continue
            lines += [p.text(), ""]
    path.write_text("\n".join(lines) + "\n")
    return summary


# -- the benchmark ---------------------------------------------------------------------------------
def test_postgresql_at_scale(settings, media_root, tmp_path):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    start = time.perf_counter()
    filled = _fill()
    fill_s = time.perf_counter() - start
    database = _database()
    User = get_user_model()
    by_id = User.objects.in_bulk(filled["raters"][:N_CLIENTS + 1])
    clients = [by_id[pk] for pk in filled["raters"][:N_CLIENTS]]
    tokens = [token_for(user=u) for u in clients]
    explained_annotator = token_for(user=by_id[filled["raters"][N_CLIENTS]])  # holds no seat when explained
    manager = user_create(username="scale-manager", password="scale-manager-pw", roles=["manager"])
    manager_token = token_for(user=manager)
    report: dict = {"scale": SCALE, "mode": "full" if SCALE == 1 else f"scale {SCALE}",
                    "sizes": {**filled["release"], **filled["review"]}, "fill_s": round(fill_s, 1),
                    "fill": filled["timings"], "database": database, "clients": N_CLIENTS,
                    "cpu_count": os.cpu_count(), "python": platform.python_version(), "peak_rss_mb": {}}
    unexpected: list[str] = []
    with _bench_lock() as waited_s:
        report["lock_wait_s"] = round(waited_s, 1)
        port = free_port()
        server = gunicorn_start(port, tmp_path, media_root)
        try:
            report["claim_vote"] = {}
            for name, pause, modes, seconds, arrive in PHASES:
                for mode in modes:
                    _workers_reset(server)
                    figures, problems = _phase(port, clients, tokens, mode, pause, seconds, arrive)
                    report["claim_vote"].setdefault(name, {})[mode] = figures
                    report["peak_rss_mb"][f"server worker, {name}, {mode}"] = _workers_peak_mb(server)
                    unexpected += problems
            _workers_reset(server)
            report["progress"] = _page(port, manager_token, "/api/ui/progress/", n=PROGRESS_REQUESTS, budget_s=120,
                                       timeout=60, warmup=2)
            report["peak_rss_mb"]["server worker, progress"] = _workers_peak_mb(server)
            _workers_reset(server)
            report["agreement"] = _page(port, manager_token, "/api/review/agreement/?stage=usability",
                                        n=AGREEMENT_REQUESTS, budget_s=AGREEMENT_BUDGET_S, timeout=300, warmup=0)
            report["peak_rss_mb"]["server worker, agreement"] = _workers_peak_mb(server)
        finally:
            gunicorn_stop(server)

        # the export starts its COPY reads on libpq, beneath psycopg's cursors: recorded where it does
        with override_settings(VAR_DIR=tmp_path / "var", MEDIA_ROOT=tmp_path / "release-media"), \
                recorded(copy_commands=[(release_reading, "_copy_start")]) as reads:
            baseline = _status_bytes("VmRSS")
            _reset_peak()
            start = time.perf_counter()
            release = release_create(name="scale", version="1.0.0", splits=["train"])
            export_s = time.perf_counter() - start
            peak = _status_bytes("VmHWM")
        records = sum(release.counts.values())
        report["export"] = {"seconds": round(export_s, 2), "records": records,
                            "records_per_s": round(records / export_s), "counts": release.counts,
                            "rss_before_mb": round(baseline / 2**20, 1), "peak_rss_mb": round(peak / 2**20, 1),
                            "peak_above_baseline_mb": round((peak - baseline) / 2**20, 1)}
        report["peak_rss_mb"]["export (this process)"] = round(peak / 2**20, 1)

        start = time.perf_counter()
        sections = {**_request_plans(explained_annotator), **_page_plans(manager_token),
                    "export reads (release_create, train split)": explain_recorded(reads)}
        report["plans_s"] = round(time.perf_counter() - start, 1)
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    report["plans"] = _write_plans(sections, BENCH_DIR / "pg_scale_plans.txt")
    report["targets"] = _targets(report)
    (BENCH_DIR / "pg_scale.json").write_text(json.dumps(report, indent=2) + "\n")
    _print(report)
    assert not unexpected, unexpected[:10]
    assert report["progress"]["failed"] == 0 and report["progress"]["client_ms"]["n"] > 0
    assert release.counts["relations"] == filled["release"]["relations"]


def _targets(r: dict) -> dict:
    """Each target against every request of its kind (``measured``, which decides ``met``; claims and
    votes at people's pace, the clients arriving over the first pause); claims and votes also where
    the 30 clients start together (``together``) and the same without each one's first request
    (``after_start``)."""
    paced = r["claim_vote"][PHASES[0][0]]["two"]
    herd = r["claim_vote"][PHASES[1][0]]["two"]

    def p95(figures: dict, kind: str) -> float | None:
        return figures.get(kind, {}).get("client_ms", {}).get("p95")

    together = {"claim_p95_ms": p95(herd["requests"], "next"), "vote_p95_ms": p95(herd["requests"], "vote")}
    after_start = {"claim_p95_ms": p95(herd["after_start"], "next"), "vote_p95_ms": p95(herd["after_start"], "vote")}
    measured = {"claim_p95_ms": paced["requests"].get("next", {}).get("client_ms", {}).get("p95"),
                "vote_p95_ms": paced["requests"].get("vote", {}).get("client_ms", {}).get("p95"),
                "progress_p95_ms": r["progress"]["client_ms"]["p95"],
                "agreement_p95_ms": r["agreement"]["client_ms"]["p95"],
                "export_records_per_s": r["export"]["records_per_s"]}
    out = {}
    for key, target in TARGETS.items():
        value = measured[key]
        met = value is not None and (value >= target if key.endswith("_per_s") else value < target)
        out[key] = {"target": target, "measured": value, "met": met,
                    **({"together": together[key], "after_start": after_start[key]} if key in together else {})}
    return out


def _print(r: dict) -> None:
    s = r["sizes"]
    print(f"\nPostgreSQL at scale ({r['mode']}): {s['items']:,} items, {s['votes']:,} votes, "
          f"{s['assignments']:,} seats, {s['relations']:,} relations, {s['trajectories']:,} pooled trajectories "
          f"(+{s['second_run_trajectories']:,}); filled in {r['fill_s']:.0f} s {r['fill']}, "
          f"database {r['database']['size_mb']:,} MB; {r['cpu_count']} CPUs")
    print(f"{'phase':<28}{'path':<6}{'request':<11}{'n':>6}{'client p50':>11}{'p95 ms':>8}{'server p50':>11}"
          f"{'p95 ms':>8}{'votes/s':>9}")
    for name, modes in r["claim_vote"].items():
        for mode, f in modes.items():
            for kind, q in f["requests"].items():
                c, s_ = q["client_ms"], q["server_ms"]
                print(f"{name:<28}{mode:<6}{kind:<11}{c['n']:>6}{c['p50'] or 0:>11.1f}{c['p95'] or 0:>8.1f}"
                      f"{s_['p50'] or 0:>11.1f}{s_['p95'] or 0:>8.1f}{f['votes_per_s'] or 0:>9.1f}")
                a = f["after_start"].get(kind, {}).get("client_ms", {})
                print(f"{'':<28}{'':<6}{'  no start':<11}{a.get('n') or 0:>6}{a.get('p50') or 0:>11.1f}"
                      f"{a.get('p95') or 0:>8.1f}")
    for page in ("progress", "agreement"):
        p = r[page]
        print(f"{page} page: client p50 {p['client_ms']['p50']} / p95 {p['client_ms']['p95']} ms, server p50 "
              f"{p['server_ms']['p50']} ms (n {p['client_ms']['n']}, failed {p['failed']}, warm-up {p['warmup_ms']})")
    e = r["export"]
    print(f"export: {e['records']:,} records in {e['seconds']:.1f} s = {e['records_per_s']:,}/s, peak RSS "
          f"{e['peak_rss_mb']} MB ({e['peak_above_baseline_mb']} above start)")
    print("peak RSS MB: " + ", ".join(f"{k} {v}" for k, v in r["peak_rss_mb"].items()))
    print("targets: " + ", ".join(f"{k} {v['measured']} ({'met' if v['met'] else 'missed'} {v['target']})"
                                  for k, v in r["targets"].items()))
    for p in sorted(r["plans"], key=lambda p: -(p["execution_ms"] or 0))[:8]:
        print(f"  {p['execution_ms']} ms  {p['path'][:30]:<30} {p['plan'][:90]}")
