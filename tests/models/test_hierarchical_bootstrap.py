"""The hierarchical bootstrap over seeds, then queries (``models.training.metrics.hierarchical_bootstrap``)
and its place in the experiment table beside the query-only paired bootstrap: the plain-loop
oracle, a case checkable by hand, a comparison whose difference is training noise only, and one
seed refused rather than faked."""
from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from models.experiments.table import CSV_COLUMNS, INTERVALS, experiment_table, table_csv
from models.training.metrics import (
    hierarchical_bootstrap,
    hierarchical_bootstrap_loop,
    hierarchical_bootstrap_many,
    paired_bootstrap,
)


@pytest.mark.parametrize("shape", [(2, 1), (3, 7), (5, 30)])
def test_it_is_the_plain_loop_over_the_same_draws(shape):
    rng = np.random.default_rng(sum(shape))
    a, b = rng.random(shape), rng.random(shape)
    fast = hierarchical_bootstrap(a, b, n_resamples=400, seed=3)
    slow = hierarchical_bootstrap_loop(a, b, n_resamples=400, seed=3)
    assert fast["delta"] == pytest.approx(slow["delta"], abs=1e-12)
    assert (fast["low"], fast["high"]) == pytest.approx((slow["low"], slow["high"]), abs=1e-12)
    assert fast["n_seeds"] == shape[0] and fast["n"] == shape[1]
    assert hierarchical_bootstrap(a, b, n_resamples=400, seed=3) == fast          # deterministic for a seed


def test_several_measures_share_one_resampling_and_equal_their_own_calls():
    rng = np.random.default_rng(5)
    a, b = rng.random((3, 4, 25)), rng.random((3, 4, 25))
    many = hierarchical_bootstrap_many(a, b, n_resamples=700, seed=2)
    assert many == [hierarchical_bootstrap(a[k], b[k], n_resamples=700, seed=2) for k in range(3)]
    with pytest.raises(ValueError, match="3-D"):
        hierarchical_bootstrap_many(a[0], b[0])


def test_a_case_checkable_by_hand():
    # two seeds, one query: the variant gains 0 under seed 0 and 2 under seed 1. A resample draws
    # the seeds (0, 0), (0, 1), (1, 0) or (1, 1): means 0, 1, 1, 2 with chances 1/4, 1/2, 1/4
    a, b = np.zeros((2, 1)), np.array([[0.0], [2.0]])
    out = hierarchical_bootstrap(a, b, n_resamples=20000, seed=0)
    assert out["delta"] == 1.0 and (out["low"], out["high"]) == (0.0, 2.0)
    # p = 2 · min(P(mean <= 0), P(mean >= 0)) = 2 · 1/4
    assert out["p_value"] == pytest.approx(0.5, abs=0.02)
    # the query-only bootstrap of the seed-averaged values has one query and no spread at all
    single = paired_bootstrap(a.mean(axis=0), b.mean(axis=0), n_resamples=2000)
    assert single["low"] == single["high"] == 1.0
    # a difference that is the same under every seed and query has no spread either
    flat = hierarchical_bootstrap(np.zeros((3, 4)), np.full((3, 4), 0.25), n_resamples=500)
    assert flat["low"] == flat["high"] == 0.25 and flat["p_value"] == 0.0


def _seed_noise_values(n_queries: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Reference and variant ``[4, Q]``: the same per-query difficulty, each seed shifted by its own
    training luck (offsets whose differences are ±0.07..0.09, mean 0.005), small per-query noise."""
    rng = np.random.default_rng(11)
    difficulty = rng.uniform(0.2, 0.8, n_queries)                                 # [Q]
    ref_luck = np.array([0.04, -0.03, 0.05, -0.06])                               # [S]
    var_luck = np.array([-0.05, 0.06, -0.02, 0.03])                               # [S]
    a = difficulty[None, :] + ref_luck[:, None] + rng.normal(0, 0.02, (4, n_queries))
    b = difficulty[None, :] + var_luck[:, None] + rng.normal(0, 0.02, (4, n_queries))
    return a, b


def test_when_seeds_dominate_the_hierarchical_interval_holds_0_and_is_much_wider():
    a, b = _seed_noise_values()
    hier = hierarchical_bootstrap(a, b, n_resamples=4000)
    query = paired_bootstrap(a.mean(axis=0), b.mean(axis=0), n_resamples=4000)
    assert hier["low"] < 0 < hier["high"]
    # the query-only interval sees the seed-averaged offset (0.005) as a sure gain
    assert query["low"] > 0
    assert hier["high"] - hier["low"] > 20 * (query["high"] - query["low"])


def _cells(a: np.ndarray, b: np.ndarray, strata: list[str]) -> list[dict]:
    ids = list(range(500, 500 + a.shape[1]))

    def rows(values):
        task = {"id": ids, "stratum": strata, "R@1": list(values), "R@3": list(values), "AP": list(values)}
        return {"t2traj": task, "traj2t": task, "ocvr": task}

    return [{"variant": "full", "seed": s, "rows": rows(a[s])} for s in range(a.shape[0])] + \
           [{"variant": "ablated", "seed": s, "rows": rows(b[s])} for s in range(b.shape[0])]


def test_the_table_shows_both_intervals_and_names_them():
    a, b = _seed_noise_values(120)
    table = experiment_table(_cells(a, b, ["2"] * 120), variants=["full", "ablated"], reference="full",
                             n_resamples=1500)
    assert table["intervals"] == INTERVALS
    row = {r["variant"]: r for r in table["tables"][0]["rows"]}["ablated"]
    expected = hierarchical_bootstrap(a, b, n_resamples=1500)
    assert (row["hier_low"], row["hier_high"]) == pytest.approx((100 * expected["low"], 100 * expected["high"]))
    assert row["hier_low"] < 0 < row["hier_high"] and row["low"] > 0 and row["hier_note"] is None
    reference = {r["variant"]: r for r in table["tables"][0]["rows"]}["full"]
    assert reference["hier_low"] is None and reference["hier_note"] is None
    lines = list(csv.reader(io.StringIO(table_csv(table))))
    assert tuple(lines[0]) == CSV_COLUMNS and {"query_low", "hier_low", "hier_note"} <= set(lines[0])
    line = dict(zip(lines[0], next(x for x in lines if x[:4] == ["t2traj", "R@1", "all", "ablated"]), strict=True))
    assert float(line["hier_low"]) == pytest.approx(row["hier_low"], abs=1e-4)
    assert float(line["query_low"]) == pytest.approx(row["low"], abs=1e-4)


def test_one_seed_gets_no_hierarchical_interval_and_says_why():
    with pytest.raises(ValueError, match="needs at least 2 seeds, got 1"):
        hierarchical_bootstrap(np.zeros((1, 5)), np.ones((1, 5)))
    a, b = _seed_noise_values(30)
    table = experiment_table(_cells(a[:1], b[:1], ["2"] * 30), variants=["full", "ablated"], reference="full",
                             n_resamples=300)
    row = {r["variant"]: r for r in table["tables"][0]["rows"]}["ablated"]
    assert row["low"] is not None and row["paired_seeds"] == 1
    assert row["hier_low"] is None and row["hier_high"] is None and row["hier_p_value"] is None
    assert row["hier_note"] == "needs at least 2 paired seeds, has 1: no seed-level interval"
    lines = list(csv.reader(io.StringIO(table_csv(table))))
    line = dict(zip(lines[0], next(x for x in lines if x[:4] == ["t2traj", "R@1", "all", "ablated"]), strict=True))
    assert line["hier_low"] == line["hier_high"] == line["hier_p_value"] == ""
    assert "at least 2 paired seeds" in line["hier_note"] and line["query_low"] != ""


@pytest.mark.parametrize(("a", "b", "message"), [
    (np.zeros(5), np.zeros(5), "2-D"),
    (np.zeros((2, 3)), np.zeros((3, 3)), "same shape"),
    (np.zeros((2, 0)), np.zeros((2, 0)), "no queries"),
    (np.array([[0.0, np.nan], [0.0, 0.0]]), np.zeros((2, 2)), "finite"),
])
def test_bad_input_is_refused(a, b, message):
    with pytest.raises(ValueError, match=message):
        hierarchical_bootstrap(a, b)
    with pytest.raises(ValueError, match="positive integer"):
        hierarchical_bootstrap(np.zeros((2, 2)), np.zeros((2, 2)), n_resamples=0)
