"""Agreement statistics at scale: the vectorised ``agreement_report`` against the per-item Python
loop ``per_item_loop_report`` on the same votes, in the same run.

Full size (``TRAJLAB_BENCH_FULL=1``): about 1,000,000 votes. Quick size (default): about 100,000.
The votes are a usability stage: items with three panel votes from 190 panel annotators of
varying accuracy (1% of the items still pending with one or two votes), adjudicated by one of 10
adjudicators where ``annotation.rules.decide`` would send the item to adjudication (about 10% of
the items), times per vote from a log-normal with 1% not recorded. Votes arrive in random order.

The vectorised report is timed as the best of three runs. The loop is timed once on the whole
table, unless its time measured on a 100,000-vote subset (whole items) extrapolates linearly to
more than ``LOOP_BUDGET_S``: then the figure is that extrapolation, and the output says so. Both
reports must agree (on the whole table, or on the subset where the loop ran only there). Figures
go to ``var/bench/agreement.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest

from models.curation.agreement import agreement_report
from models.curation.agreement_reference import per_item_loop_report

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
N_VOTES = 1_000_000 if FULL else 100_000
SUBSET_VOTES = 100_000
LOOP_BUDGET_S = 60.0
MIN_SPEEDUP = 5.0
N_PANEL_RATERS, N_ADJUDICATORS = 190, 10
LABELS = ["usable", "unusable", "uncertain"]
SEED = 20


def usability_votes(n_votes: int, seed: int = SEED) -> dict[str, np.ndarray]:
    """About ``n_votes`` votes as described in the module docstring, built with array operations."""
    rng = np.random.default_rng(seed)
    n_items = int(n_votes / 3.08)
    truth = np.where(rng.random(n_items) < 0.7, 0, 1)                              # [I] usable/unusable
    accuracy = rng.uniform(0.62, 0.92, N_PANEL_RATERS)                             # [R]
    m = np.where(rng.random(n_items) < 0.01, rng.integers(1, 3, n_items), 3)       # [I] panel votes
    # three distinct panel raters per item: r0, r0 + d1, r0 + d2 (mod R) with d1 != d2 in 1..R-1
    r0 = rng.integers(0, N_PANEL_RATERS, n_items)
    d1 = rng.integers(1, N_PANEL_RATERS, n_items)
    d2 = rng.integers(1, N_PANEL_RATERS - 1, n_items)
    d2 = d2 + (d2 >= d1)
    panel = np.stack([r0, r0 + d1, r0 + d2], axis=1) % N_PANEL_RATERS             # [I, 3]
    right = rng.random((n_items, 3)) < accuracy[panel]                             # [I, 3]
    wrong = np.where(rng.random((n_items, 3)) < 0.5, 2, 1 - truth[:, None])        # [I, 3]
    votes = np.where(right, truth[:, None], wrong)                                 # [I, 3]
    cast = np.arange(3)[None, :] < m[:, None]                                      # [I, 3]
    # decide: a decisive label (usable/unusable) with >= 2 of 3 votes, else adjudication
    n_usable = ((votes == 0) & cast).sum(axis=1)
    n_unusable = ((votes == 1) & cast).sum(axis=1)
    to_adjudicate = (m == 3) & (n_usable < 2) & (n_unusable < 2)                   # [I]
    adj_items = np.flatnonzero(to_adjudicate)
    item = np.concatenate([np.broadcast_to(np.arange(n_items)[:, None], (n_items, 3))[cast], adj_items])
    rater = np.concatenate([panel[cast], N_PANEL_RATERS + rng.integers(0, N_ADJUDICATORS, adj_items.size)])
    label = np.concatenate([votes[cast], truth[adj_items]])
    is_adj = np.concatenate([np.zeros(int(cast.sum()), bool), np.ones(adj_items.size, bool)])
    speed = rng.uniform(0.6, 1.6, N_PANEL_RATERS + N_ADJUDICATORS)                 # per rater
    spent = rng.lognormal(2.2, 0.5, item.size) * speed[rater]
    spent[rng.random(item.size) < 0.01] = np.nan
    order = rng.permutation(item.size)
    return {"item": item[order], "rater": rater[order], "label": label[order],
            "is_adjudication": is_adj[order], "time_spent": spent[order], "n_items": n_items}


def subset(votes: dict, n_votes: int) -> dict:
    """The votes of the first items, whole items only, about ``n_votes`` of them."""
    n_items = max(1, int(votes["n_items"] * n_votes / votes["item"].size))
    keep = votes["item"] < n_items
    out = {k: v[keep] for k, v in votes.items() if isinstance(v, np.ndarray)}
    out["n_items"] = n_items
    return out


def run(report, votes: dict) -> dict:
    return report(votes["item"], votes["rater"], votes["label"], votes["is_adjudication"], len(LABELS),
                  LABELS, time_spent=votes["time_spent"])


def timed(report, votes: dict, repeats: int = 1) -> tuple[dict, float]:
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run(report, votes)
        best = min(best, time.perf_counter() - start)
    return result, best


def same_value(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def test_agreement_report_against_per_item_loop():
    votes = usability_votes(N_VOTES)
    n_votes = int(votes["item"].size)
    fast, fast_s = timed(agreement_report, votes, repeats=3)

    small = subset(votes, SUBSET_VOTES) if n_votes > SUBSET_VOTES else votes
    small_n = int(small["item"].size)
    if small is votes:
        slow, loop_s = timed(per_item_loop_report, votes)
        loop_votes, extrapolated = n_votes, False
        reference = fast
    else:
        small_slow, small_loop_s = timed(per_item_loop_report, small)
        estimate = small_loop_s * n_votes / small_n
        if estimate <= LOOP_BUDGET_S:
            slow, loop_s = timed(per_item_loop_report, votes)
            loop_votes, extrapolated, reference = n_votes, False, fast
        else:
            slow, loop_s = small_slow, estimate
            loop_votes, extrapolated = small_n, True
            reference = run(agreement_report, small)
    # then: the two implementations give the same report
    assert same_value(reference, slow), "vectorised and per-item reports differ"
    speedup = loop_s / fast_s

    result = {
        "mode": "full" if FULL else "quick",
        "n_votes": n_votes,
        "n_items": fast["n_items"],
        "n_raters": len(fast["per_rater"]),
        "adjudication_rate": round(fast["adjudication_rate"], 4),
        "vectorised_s": round(fast_s, 4),
        "loop_s": round(loop_s, 3),
        "loop_measured_on_votes": loop_votes,
        "loop_extrapolated": extrapolated,
        "speedup": round(speedup, 1),
        "statistics": {
            "raw_agreement": round(fast["raw_agreement"], 4),
            "fleiss_kappa": round(fast["fleiss_kappa"], 4),
            "krippendorff_alpha": round(fast["krippendorff_alpha"], 4),
            "patterns": fast["vote_distributions"]["patterns"],
        },
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
    }
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "agreement.json").write_text(json.dumps(result, indent=2) + "\n")

    loop_note = (f"extrapolated linearly from {loop_votes:,} votes" if extrapolated
                 else f"measured on all {loop_votes:,} votes")
    print(f"\nagreement statistics, {n_votes:,} votes on {fast['n_items']:,} items "
          f"({result['mode']} size), {result['n_raters']} raters, "
          f"adjudication rate {fast['adjudication_rate']:.3f}")
    print(f"{'implementation':<34}{'seconds':>10}{'votes/s':>14}")
    print(f"{'agreement_report (vectorised)':<34}{fast_s:>10.3f}{n_votes / fast_s:>14,.0f}")
    print(f"{'per_item_loop_report':<34}{loop_s:>10.3f}{n_votes / loop_s:>14,.0f}  ({loop_note})")
    print(f"speedup {speedup:.1f}x; raw agreement {fast['raw_agreement']:.3f}, "
          f"Fleiss' kappa {fast['fleiss_kappa']:.3f}, Krippendorff's alpha {fast['krippendorff_alpha']:.3f}")
    assert fast["n_votes"] == n_votes
    assert speedup >= MIN_SPEEDUP, f"vectorised report only {speedup:.1f}x faster than the loop"
