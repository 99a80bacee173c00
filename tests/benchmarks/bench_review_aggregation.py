"""Aggregation at scale: decisions and agreement over stored votes, in bulk against item by item.

Stores N votes (100,000 by default, 1,000,000 with ``TRAJLAB_BENCH_FULL=1``) on ~N/3 usability
items in PostgreSQL with COPY, committed and vacuumed as a database holds them, then times in the
same run:

- bulk: ``decisions_and_agreement`` (its time the median of three runs) (what the ``agreement --audit`` command runs: the decisions
  audit and the agreement figures from one reading of the items and their votes as integer arrays
  through ``COPY``, counted with ``bincount``, the rule and the statistics vectorised), and
  ``decisions_audit`` and ``agreement_stats(recompute=True)`` each on its own, which must give the
  same;
- the agreement tallies: every stored vote counted in at once (``agreement_tallies_refresh``, as
  after a bulk load), then the manager's agreement page (``GET /api/review/agreement/``), which
  answers from them, with the same figures as the recomputation;
- item by item: all votes read in order through the ORM, grouped per item in Python, ``decide``
  per item, and ``per_item_loop_report`` over the vote columns read one ORM row per vote.

Both must agree, and the stored states must match the rule. Figures go to
``var/bench/review_aggregation.json``, with the peak resident memory of each way and the bulk
time per million votes.
"""
from __future__ import annotations

import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Case, FloatField, IntegerField, Value, When
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from annotation.curation.services.agreement import (
    agreement_stats,
    decisions_and_agreement,
    decisions_audit,
)
from annotation.curation.services.agreement_tallies import agreement_tallies_refresh
from annotation.curation.stages import usability
from annotation.models import Vote, WorkItem
from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, decide, decide_counts
from models.curation.agreement_reference import per_item_loop_report
from tests.benchmarks.fill import copy_rows, next_id
from tests.trajectories.factories import run_factory

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
N_VOTES = 1_000_000 if FULL else 100_000
N_RATERS = 200
BULK_RUNS = 3           # the bulk way's time is the median of its runs (the first one's is kept too)
OUT = Path(__file__).resolve().parents[2] / "var" / "bench" / "review_aggregation.json"


def _populate(rng) -> dict:
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"bench-rater-{i}", password="!") for i in range(N_RATERS)])
    raters = np.array([u.pk for u in users])
    run = run_factory()
    n_items = N_VOTES // 3
    now = timezone.now()
    packed_frames = np.zeros(1, "<i4").tobytes()
    packed_boxes = np.array([[0, 0, 10, 10]], "<f4").tobytes()
    packed_scores = np.ones(1, "<f4").tobytes()
    first_traj = next_id("trajectories_trajectory")
    copy_rows("trajectories_trajectory",
          ["id", "run_id", "video_id", "track_id", "category", "n_obs", "first_frame", "last_frame", "frames", "boxes",
           "scores", "appearance", "temporal_coverage", "longest_run", "median_area", "abrupt_changes", "mean_score",
           "created_at"],
          ((first_traj + i, run.pk, run.video_id, i + 1, "person", 1, 0, 0, packed_frames, packed_boxes, packed_scores,
            b"", 1.0, 1, 100.0, 0, 1.0, now) for i in range(n_items)))
    # votes: three distinct panel raters per item, labels from rater accuracy; 1% of items pending
    truth = rng.integers(0, 2, n_items)                                            # usable / unusable
    panel_raters = np.stack([rng.choice(N_RATERS - 10, 3, replace=False) for _ in range(n_items)])
    correct = rng.random((n_items, 3)) < 0.8
    noise = rng.integers(0, 3, (n_items, 3))
    labels = np.where(correct, truth[:, None], noise)                              # [I, 3]
    n_cast = np.where(rng.random(n_items) < 0.01, rng.integers(1, 3, n_items), 3)
    label_names = np.array(usability.STAGE.label_values)
    panel_counts = np.zeros((n_items, 3), np.int64)
    for k in range(3):
        np.add.at(panel_counts, (np.arange(n_items)[n_cast > k], labels[n_cast > k, k]), 1)
    decisive = np.array([True, True, False])
    code = decide_counts(panel_counts, panel_counts, np.zeros(n_items), decisive)
    adjudicated = code == ADJUDICATE_CODE
    adj_label = np.where(rng.random(n_items) < 0.9, truth, 2)
    all_counts = panel_counts.copy()
    np.add.at(all_counts, (np.flatnonzero(adjudicated), adj_label[adjudicated]), 1)
    final = decide_counts(panel_counts, all_counts, adjudicated.astype(int), decisive)
    state = np.where(final >= 0, "decided", np.where(final == PENDING_CODE, "open",
                     np.where(final == ADJUDICATE_CODE, "adjudicate", "unresolved")))
    decision = np.where(final >= 0, label_names[np.clip(final, 0, 2)], "")
    first_item = next_id("annotation_workitem")
    copy_rows("annotation_workitem",
          ["id", "stage", "video_id", "trajectory_id", "panel_size", "required_votes", "state", "decision", "created_at",
           "prelabels", "disputed"],
          ((first_item + i, "usability", run.video_id, first_traj + i, 3, 2, state[i], decision[i], now, "{}", "[]")
           for i in range(n_items)))
    adjudicators = raters[-10:]
    seconds = rng.gamma(2.0, 3000, (n_items, 4)).astype(int)

    def votes():
        for i in range(n_items):
            for k in range(n_cast[i]):
                yield (first_item + i, raters[panel_raters[i, k]], label_names[labels[i, k]], "[]", "",
                       seconds[i, k], "f", now, "{}")
            if adjudicated[i]:
                yield (first_item + i, adjudicators[i % 10], label_names[adj_label[i]], "[]", "bench", seconds[i, 3],
                       "t", now, "{}")

    copy_rows("annotation_vote",
          ["item_id", "annotator_id", "label", "reasons", "comment", "time_spent_ms", "is_adjudication", "created_at",
           "payload"],
          votes())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_vote; ANALYZE annotation_workitem")
    return {"items": n_items, "votes": Vote.objects.count()}


def _orm_columns() -> dict[str, np.ndarray]:
    """The usability votes as columns read the obvious way: one ORM row per vote, in vote order."""
    labels = usability.STAGE.label_values
    index = Case(*[When(label=name, then=Value(i)) for i, name in enumerate(labels)], output_field=IntegerField())
    seconds = Coalesce(Cast("time_spent_ms", FloatField()) / 1000.0, Value(float("nan")), output_field=FloatField())
    rows = list(Vote.objects.filter(item__stage="usability").order_by("id")
                .values_list("item_id", "annotator_id", index, Cast("is_adjudication", IntegerField()), seconds))
    table = np.array(rows, dtype=np.float64).reshape(-1, 5)                                  # [V, 5]
    return {"item": table[:, 0].astype(np.int64), "rater": table[:, 1].astype(np.int64),
            "label": table[:, 2].astype(np.int64), "is_adjudication": table[:, 3].astype(bool),
            "time_spent": table[:, 4]}


def _item_by_item() -> tuple[list[int], dict]:
    """The obvious way: read the votes in order, group per item in Python, decide per item."""
    stored = dict(WorkItem.objects.filter(stage="usability").values_list("id", "state"))
    per_item = defaultdict(list)
    for item_id, label, _ in (Vote.objects.filter(item__stage="usability")
                              .order_by("item_id", "is_adjudication", "created_at", "id")
                              .values_list("item_id", "label", "is_adjudication")):
        per_item[item_id].append(label)
    mismatched = []
    for item_id, state in stored.items():
        outcome = decide(per_item.get(item_id, []), ("usable", "unusable"))
        expected = {"pending": "open", "adjudicate": "adjudicate", "unresolved": "unresolved"}.get(outcome, "decided")
        if expected != state:
            mismatched.append(item_id)
    columns = _orm_columns()
    _, index = np.unique(columns["item"], return_inverse=True)
    report = per_item_loop_report(index, columns["rater"], columns["label"], columns["is_adjudication"], 3,
                                  labels=list(usability.STAGE.label_values), time_spent=columns["time_spent"])
    return sorted(mismatched), report


def _reset_peak_rss() -> None:
    """Start this process's resident-memory high-water mark afresh (Linux; elsewhere it stays the
    process's own peak)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _rss_mb(field: str = "VmHWM") -> float:
    """This process's resident-memory high-water mark in MiB (since :func:`_reset_peak_rss`), or
    with ``field="VmRSS"`` its resident memory now (Linux; elsewhere the process's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.benchmark
@pytest.mark.django_db(transaction=True)
def test_bulk_aggregation_against_item_by_item(manager_client, settings):
    settings.TRAJLAB_WEB_STATEMENT_TIMEOUT_MS = 0
    rng = np.random.default_rng(7)
    t0 = time.perf_counter()
    sizes = _populate(rng)
    # the votes as a database holds them once they were cast: committed, their pages marked visible
    # (not rows of the test's own open transaction, which every read checks one by one)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {WorkItem._meta.db_table}, {Vote._meta.db_table}")
    populate_s = time.perf_counter() - t0

    rss_before_mb = _rss_mb("VmRSS")
    _reset_peak_rss()
    bulk_runs = []
    for _ in range(BULK_RUNS):
        t0 = time.perf_counter()
        both = decisions_and_agreement(stage="usability")       # one reading of the votes for both
        bulk_runs.append(time.perf_counter() - t0)
    bulk_s = float(np.median(bulk_runs))
    bulk_peak_mb = _rss_mb()
    _reset_peak_rss()
    t0 = time.perf_counter()
    audit = decisions_audit(stage="usability")
    audit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    stats = agreement_stats(stage="usability", recompute=True)  # every vote read (the page before the tallies)
    stats_s = time.perf_counter() - t0
    separate_peak_mb = _rss_mb()
    assert both == {"decisions": audit, "agreement": stats}
    # the tallies: every vote of the bulk load counted in at once (what a migration or the first
    # refresh after a COPY does), then the page reads them
    _reset_peak_rss()
    t0 = time.perf_counter()
    counted = agreement_tallies_refresh()
    tally_s = time.perf_counter() - t0
    tally_peak_mb = _rss_mb()
    assert counted == sizes["votes"]
    assert manager_client.get("/api/review/agreement/?stage=identity").status_code == 200  # URLs and views loaded
    t0 = time.perf_counter()
    page = manager_client.get("/api/review/agreement/?stage=usability")
    page_s = time.perf_counter() - t0
    tallied = agreement_stats(stage="usability")
    loop_rss_before_mb = _rss_mb("VmRSS")
    _reset_peak_rss()
    t0 = time.perf_counter()
    loop_mismatched, loop_report = _item_by_item()
    loop_s = time.perf_counter() - t0
    loop_peak_mb = _rss_mb()

    assert audit["mismatched"] == [] and loop_mismatched == []
    assert audit["n_items"] == sizes["items"]
    for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha", "adjudication_rate"):
        assert stats[key] == pytest.approx(loop_report[key], rel=1e-9, abs=1e-12), key
    assert page.status_code == 200 and page.json() == tallied
    for key in ("n_items", "n_votes", "fleiss_n_items", "alpha_n_items", "n_adjudicated_items", "label_counts",
                "panel_votes_per_item", "vote_distributions"):
        assert tallied[key] == stats[key], key
    for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha", "adjudication_rate"):
        assert tallied[key] == pytest.approx(stats[key], rel=1e-12, abs=1e-15), key
    separate_s = audit_s + stats_s
    per_million = 1e6 / sizes["votes"]
    figures = {"mode": "full" if FULL else "quick", **sizes, "populate_s": round(populate_s, 2),
               "bulk_decisions_s": round(audit_s, 3), "bulk_agreement_s": round(stats_s, 3),
               "bulk_total_s": round(bulk_s, 3), "bulk_runs_s": [round(t, 3) for t in bulk_runs],
               "item_by_item_s": round(loop_s, 3),
               "speedup": round(loop_s / bulk_s, 1), "bulk_way": "decisions_and_agreement (one reading)",
               "bulk_separate_total_s": round(separate_s, 3), "speedup_separate": round(loop_s / separate_s, 1),
               "separate_peak_rss_mb": round(separate_peak_mb, 1), "agreement_page_s": round(page_s, 3),
               "agreement_recomputed_s": round(stats_s, 3), "tally_count_in_s": round(tally_s, 3),
               "tally_count_in_peak_rss_mb": round(tally_peak_mb, 1),
               "bulk_s_per_million_votes": round(bulk_s * per_million, 3),
               "agreement_page_s_per_million_votes": round(page_s * per_million, 3),
               "peak_rss_mb": round(bulk_peak_mb, 1), "peak_rss_growth_mb": round(bulk_peak_mb - rss_before_mb, 1),
               "item_by_item_peak_rss_mb": round(loop_peak_mb, 1),
               "item_by_item_peak_rss_growth_mb": round(loop_peak_mb - loop_rss_before_mb, 1),
               "outcomes": audit["outcomes"],
               "raw_agreement": stats["raw_agreement"], "krippendorff_alpha": stats["krippendorff_alpha"]}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2))
    print(f"\n{sizes['votes']:,} votes on {sizes['items']:,} items (stored in {populate_s:.1f} s)")
    print(f"  bulk: decisions and agreement from one reading {bulk_s:.2f} s (median of "
          f"{', '.join(f'{t:.2f}' for t in bulk_runs)}) "
          f"(peak RSS {bulk_peak_mb:.0f} MiB, +{bulk_peak_mb - rss_before_mb:.0f}); each on its own: "
          f"decisions {audit_s:.2f} s + agreement {stats_s:.2f} s = {separate_s:.2f} s "
          f"({loop_s / separate_s:.1f}x; peak RSS {separate_peak_mb:.0f} MiB)")
    print(f"  tallies: every vote counted in {tally_s:.2f} s (peak RSS {tally_peak_mb:.0f} MiB); "
          f"agreement page from them {page_s * 1000:.1f} ms (recomputed from every vote: {stats_s:.2f} s)")
    print(f"  item by item: {loop_s:.2f} s   ({loop_s / bulk_s:.1f}x slower; peak RSS {loop_peak_mb:.0f} MiB, "
          f"+{loop_peak_mb - loop_rss_before_mb:.0f})")
    assert loop_s > 1.5 * bulk_s
