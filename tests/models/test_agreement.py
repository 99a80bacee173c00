"""Agreement statistics against independent implementations: statsmodels' Fleiss' kappa, the
``krippendorff`` package, plain loops, the slow per-item report, and textbook examples."""
from __future__ import annotations

import math
import warnings

import krippendorff
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from models.curation.agreement import (
    agreement_report,
    coincidence_matrix,
    count_matrix,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    raw_agreement,
    vote_distributions,
)
from models.curation.agreement_reference import per_item_loop_report

USABILITY = ["usable", "unusable", "uncertain"]
PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Fleiss (1971) as reproduced on Wikipedia ("Fleiss' kappa", worked example): 10 subjects,
# 14 raters, 5 categories; kappa = 0.210.
FLEISS_EXAMPLE = np.array([
    [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
])
# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 observers,
# 12 units, values 1..5 with missing data; nominal alpha = 0.743.
NAN = np.nan
KRIPPENDORFF_EXAMPLE = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])


# -- helpers ---------------------------------------------------------------------------------------
def counts_from_lists(votes: list[list[int]], k: int) -> np.ndarray:
    """[I, K] counts from per-item label lists, by a plain loop."""
    out = np.zeros((len(votes), k), dtype=np.int64)
    for i, labels in enumerate(votes):
        for lab in labels:
            out[i, lab] += 1
    return out


def reliability_data(counts: np.ndarray) -> np.ndarray:
    """[raters, items] with np.nan for missing: item u's m votes go to coders 0..m-1."""
    n = counts.sum(axis=1)
    data = np.full((max(int(n.max()), 1), len(counts)), np.nan)
    for u, row in enumerate(counts):
        labels = [k for k, c in enumerate(row) for _ in range(c)]
        data[: len(labels), u] = labels
    return data


def reference_alpha(counts: np.ndarray) -> float:
    """``krippendorff.alpha`` on the same votes; nan where it refuses (fewer than two values in
    the data, or no unit with two votes)."""
    try:
        with np.errstate(all="ignore"):
            return float(krippendorff.alpha(reliability_data=reliability_data(counts),
                                            level_of_measurement="nominal"))
    except ValueError:
        return math.nan


def loop_raw_agreement(votes: list[list[int]]) -> float:
    shares = []
    for labels in votes:
        if len(labels) < 2:
            continue
        pairs = [(a, b) for i, a in enumerate(labels) for j, b in enumerate(labels) if i != j]
        shares.append(sum(a == b for a, b in pairs) / len(pairs))
    return sum(shares) / len(shares) if shares else math.nan


def same(a: float, b: float, tol: float = 1e-9) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def assert_same_report(a, b, path: str = "report") -> None:
    """Recursive equality; floats up to rounding, nan equal to nan."""
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert set(a) == set(b), f"{path}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for key in a:
            assert_same_report(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert same(float(a), float(b)), f"{path}: {a!r} != {b!r}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@st.composite
def equal_tables(draw):
    """Per-item label lists with the same number of votes on every item."""
    k = draw(st.integers(2, 5))
    m = draw(st.integers(2, 6))
    n_items = draw(st.integers(1, 25))
    votes = draw(st.lists(st.lists(st.integers(0, k - 1), min_size=m, max_size=m),
                          min_size=n_items, max_size=n_items))
    return votes, k


@st.composite
def ragged_tables(draw):
    """Per-item label lists with 0..5 votes per item."""
    k = draw(st.integers(2, 4))
    votes = draw(st.lists(st.lists(st.integers(0, k - 1), max_size=5), min_size=1, max_size=30))
    return votes, k


@st.composite
def vote_tables(draw):
    """A vote table as the report takes it: 1-4 panel votes per item from distinct raters, an
    adjudication vote on some items (by a rater outside the panel), times with gaps."""
    k = draw(st.integers(2, 4))
    n_items = draw(st.integers(0, 20))
    n_raters = 6
    rows = []
    for i in range(n_items):
        m = draw(st.integers(1, 4))
        panel = draw(st.permutations(range(n_raters)))[:m]
        for r in panel:
            rows.append((i, r, draw(st.integers(0, k - 1)), False))
        if draw(st.booleans()):
            rows.append((i, draw(st.integers(n_raters, n_raters + 2)), draw(st.integers(0, k - 1)), True))
    times = draw(st.lists(st.one_of(st.just(math.nan), st.floats(0, 600)),
                          min_size=len(rows), max_size=len(rows)))
    decided = draw(st.lists(st.booleans(), min_size=n_items, max_size=n_items))
    cols = list(zip(*rows)) if rows else [[], [], [], []]
    item = np.array(cols[0], dtype=np.int64)
    rater = np.array(cols[1], dtype=np.int64)
    label = np.array(cols[2], dtype=np.int64)
    adj = np.array(cols[3], dtype=bool)
    return item, rater, label, adj, k, np.array(times, dtype=np.float64), np.array(decided, dtype=bool)


def random_vote_table(rng: np.random.Generator, n_items: int, k: int = 3):
    """Realistic-ish votes: a true label per item, raters of varying accuracy, 1-4 panel votes
    per item, adjudication on about 15% of the items, times with 5% missing."""
    truth = rng.integers(0, k, n_items)
    accuracy = rng.uniform(0.5, 0.95, 40)
    m = rng.choice([1, 2, 3, 4], n_items, p=[0.1, 0.1, 0.7, 0.1])
    item = np.repeat(np.arange(n_items), m)
    offset = np.arange(item.size) - np.repeat(np.cumsum(m) - m, m)
    rater = (np.repeat(rng.integers(0, 40, n_items), m) + 7 * offset) % 40      # distinct per item
    correct = rng.random(item.size) < accuracy[rater]
    label = np.where(correct, truth[item], rng.integers(0, k, item.size))
    adj_items = np.flatnonzero(rng.random(n_items) < 0.15)
    item = np.concatenate([item, adj_items])
    rater = np.concatenate([rater, rng.integers(40, 45, adj_items.size)])
    label = np.concatenate([label, truth[adj_items]])
    adj = np.concatenate([np.zeros(m.sum(), bool), np.ones(adj_items.size, bool)])
    order = rng.permutation(item.size)
    time = rng.lognormal(2.0, 0.6, item.size)
    time[rng.random(item.size) < 0.05] = np.nan
    return item[order], rater[order], label[order], adj[order], time[order]


# -- count table ----------------------------------------------------------------------------------
@PROPERTY
@given(ragged_tables())
def test_count_matrix_matches_a_loop(table):
    votes, k = table
    item = np.array([i for i, labels in enumerate(votes) for _ in labels], dtype=np.int64)
    label = np.array([lab for labels in votes for lab in labels], dtype=np.int64)
    counts = count_matrix(item, label, len(votes), k)
    assert counts.shape == (len(votes), k)
    np.testing.assert_array_equal(counts, counts_from_lists(votes, k))


@pytest.mark.parametrize(("item", "label", "n_items", "message"), [
    ([0, 1], [0, 3], 2, "label must lie in 0..2"),
    ([0, 2], [0, 1], 2, "item must lie in 0..1"),
    ([0, -1], [0, 1], 2, "item must lie in 0..1"),
    ([0, 1], [0], 2, "one length"),
    ([0.0, 1.0], [0, 1], 2, "must hold integers"),
    ([[0, 1]], [[0, 1]], 2, "1-D"),
])
def test_count_matrix_refuses_bad_input(item, label, n_items, message):
    with pytest.raises(ValueError, match=message):
        count_matrix(item, label, n_items, 3)


# -- vote distributions -----------------------------------------------------------------------------
def test_vote_distributions_on_a_hand_made_table():
    votes = [[0, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 2], [2, 2, 1], [1, 1, 1], [0, 1], [0, 0, 1, 2]]
    dist = vote_distributions(counts_from_lists(votes, 3), USABILITY)
    assert dist["n_items"] == 6                       # the 2- and 4-vote items are left out
    assert dist["patterns"] == {"3-0": 2, "2-1": 3, "1-1-1": 1}
    assert dist["detail"] == {
        "usable,usable,unusable": 2, "uncertain,uncertain,unusable": 1,
        "unusable,unusable,unusable": 1, "usable,usable,usable": 1, "usable,unusable,uncertain": 1,
    }
    assert dist["combinations"][(("usable", 2), ("unusable", 1))] == 2
    assert dist["combinations"][(("usable", 1), ("unusable", 1), ("uncertain", 1))] == 1
    assert list(dist["detail"].values()) == sorted(dist["detail"].values(), reverse=True)


def test_vote_distributions_default_names_and_two_categories():
    dist = vote_distributions(np.array([[3, 0], [1, 2], [2, 1]]))
    assert dist["patterns"] == {"3-0": 1, "2-1": 2}   # "1-1-1" cannot happen with two labels
    assert dist["detail"] == {"0,0,1": 1, "1,1,0": 1, "0,0,0": 1}


@PROPERTY
@given(ragged_tables())
def test_vote_distributions_add_up(table):
    votes, k = table
    dist = vote_distributions(counts_from_lists(votes, k))
    n_full = sum(len(v) == 3 for v in votes)
    assert dist["n_items"] == n_full
    assert sum(dist["patterns"].values()) == n_full == sum(dist["detail"].values())
    assert dist["patterns"]["3-0"] == sum(len(v) == 3 and len(set(v)) == 1 for v in votes)
    assert dist["patterns"].get("1-1-1", 0) == sum(len(v) == 3 and len(set(v)) == 3 for v in votes)


# -- raw agreement -------------------------------------------------------------------------------------
@PROPERTY
@given(ragged_tables())
def test_raw_agreement_matches_a_loop(table):
    votes, k = table
    assert same(raw_agreement(counts_from_lists(votes, k)), loop_raw_agreement(votes))


def test_raw_agreement_small_cases():
    assert raw_agreement([[3, 0, 0], [2, 1, 0], [1, 1, 1]]) == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert raw_agreement([[1, 1, 0], [0, 4, 0]]) == pytest.approx(0.5)


# -- Fleiss' kappa -------------------------------------------------------------------------------------
def test_fleiss_kappa_textbook_example():
    assert round(fleiss_kappa(FLEISS_EXAMPLE), 3) == 0.210
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(
        statsmodels_fleiss_kappa(FLEISS_EXAMPLE, method="fleiss"), abs=1e-12)


@PROPERTY
@given(equal_tables())
def test_fleiss_kappa_matches_statsmodels(table):
    votes, k = table
    counts = counts_from_lists(votes, k)
    with np.errstate(all="ignore"):
        expected = float(statsmodels_fleiss_kappa(counts, method="fleiss"))
    assert same(fleiss_kappa(counts), expected, tol=1e-10)


def test_fleiss_kappa_matches_statsmodels_on_large_random_tables():
    rng = np.random.default_rng(3)
    for k, m, n_items in [(3, 3, 2000), (2, 5, 500), (4, 10, 300)]:
        truth = rng.integers(0, k, n_items)
        labels = np.where(rng.random((n_items, m)) < 0.7, truth[:, None], rng.integers(0, k, (n_items, m)))
        counts = np.stack([(labels == c).sum(axis=1) for c in range(k)], axis=1)
        expected = statsmodels_fleiss_kappa(counts, method="fleiss")
        assert fleiss_kappa(counts) == pytest.approx(expected, abs=1e-12)
        assert 0.3 < fleiss_kappa(counts) < 0.9


@PROPERTY
@given(ragged_tables())
def test_fleiss_kappa_on_unequal_counts_uses_the_modal_number_of_votes(table):
    votes, k = table
    counts = counts_from_lists(votes, k)
    n = counts.sum(axis=1)
    eligible = [m for m in n.tolist() if m >= 2]
    if not eligible:
        assert math.isnan(fleiss_kappa(counts))
        return
    modal = max(set(eligible), key=lambda m: (eligible.count(m), m))
    subset = counts[n == modal]
    with np.errstate(all="ignore"):
        expected = float(statsmodels_fleiss_kappa(subset, method="fleiss"))
    assert same(fleiss_kappa(counts), expected, tol=1e-10)
    assert same(fleiss_kappa(counts, n_raters=modal), expected, tol=1e-10)


def test_fleiss_kappa_explicit_number_of_raters():
    counts = np.array([[3, 0], [2, 1], [1, 1], [0, 2], [2, 0]])
    assert fleiss_kappa(counts, n_raters=3) == pytest.approx(
        statsmodels_fleiss_kappa(counts[:2], method="fleiss"))
    assert fleiss_kappa(counts, n_raters=2) == pytest.approx(
        statsmodels_fleiss_kappa(counts[2:], method="fleiss"))
    assert math.isnan(fleiss_kappa(counts, n_raters=4))           # no such item
    with pytest.raises(ValueError, match="n_raters"):
        fleiss_kappa(counts, n_raters=1)


# -- Krippendorff's alpha ------------------------------------------------------------------------------
def test_krippendorff_alpha_textbook_example():
    counts = np.stack([(KRIPPENDORFF_EXAMPLE == v).sum(axis=0) for v in range(1, 6)], axis=1)
    assert round(krippendorff_alpha_nominal(counts), 3) == 0.743
    expected = krippendorff.alpha(reliability_data=KRIPPENDORFF_EXAMPLE, level_of_measurement="nominal")
    assert krippendorff_alpha_nominal(counts) == pytest.approx(expected, abs=1e-12)
    # Krippendorff's published coincidence matrix for this example (values 1..5, n = 40)
    o = coincidence_matrix(counts)
    np.testing.assert_allclose(3 * o, [
        [21, 4, 1, 1, 0], [4, 30, 4, 1, 0], [1, 4, 24, 1, 0], [1, 1, 1, 12, 0], [0, 0, 0, 0, 9]],
        atol=1e-12)
    np.testing.assert_allclose(o.sum(axis=1), [9, 13, 10, 5, 3])


@PROPERTY
@given(ragged_tables())
def test_krippendorff_alpha_matches_the_package(table):
    votes, k = table
    counts = counts_from_lists(votes, k)
    assert same(krippendorff_alpha_nominal(counts), reference_alpha(counts), tol=1e-10)


def test_krippendorff_alpha_matches_the_package_with_real_raters():
    """Reliability data with real annotators (each rates a random subset of the items)."""
    rng = np.random.default_rng(5)
    for k, n_raters, n_items, p_missing in [(3, 8, 400, 0.6), (2, 3, 1000, 0.2), (5, 20, 150, 0.85)]:
        truth = rng.integers(0, k, n_items)
        data = np.where(rng.random((n_raters, n_items)) < 0.75, truth, rng.integers(0, k, (n_raters, n_items)))
        data = np.where(rng.random((n_raters, n_items)) < p_missing, np.nan, data.astype(float))
        counts = np.stack([(data == c).sum(axis=0) for c in range(k)], axis=1)
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert krippendorff_alpha_nominal(counts) == pytest.approx(expected, abs=1e-10)


def test_kappa_and_alpha_agree_closely_on_complete_large_tables():
    """On complete data, alpha = kappa-like with a small-sample correction: they differ by O(1/N)."""
    rng = np.random.default_rng(11)
    labels = np.where(rng.random((20000, 3)) < 0.6, 0, rng.integers(0, 3, (20000, 3)))
    counts = np.stack([(labels == c).sum(axis=1) for c in range(3)], axis=1)
    assert krippendorff_alpha_nominal(counts) == pytest.approx(fleiss_kappa(counts), abs=1e-3)


# -- degenerate cases ------------------------------------------------------------------------------
def test_all_votes_identical_gives_nan_kappa_and_alpha_without_warnings():
    counts = np.array([[3, 0, 0]] * 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert raw_agreement(counts) == 1.0
        assert math.isnan(fleiss_kappa(counts))
        assert math.isnan(krippendorff_alpha_nominal(counts))
        report = agreement_report(np.repeat(np.arange(5), 3), np.tile([0, 1, 2], 5), np.zeros(15, int),
                                  np.zeros(15, bool), 3, USABILITY)
    assert report["raw_agreement"] == 1.0
    assert math.isnan(report["fleiss_kappa"]) and math.isnan(report["krippendorff_alpha"])
    assert report["vote_distributions"]["patterns"] == {"3-0": 5, "2-1": 0, "1-1-1": 0}
    assert all(r["agreement_with_majority"] == 1.0 for r in report["per_rater"].values())
    with pytest.raises(ValueError):      # the reference refuses the same table
        krippendorff.alpha(reliability_data=reliability_data(counts), level_of_measurement="nominal")


def test_perfect_agreement_over_several_categories_gives_one():
    counts = np.array([[3, 0, 0], [0, 3, 0], [0, 0, 3], [3, 0, 0]])
    assert fleiss_kappa(counts) == pytest.approx(1.0)
    assert krippendorff_alpha_nominal(counts) == pytest.approx(1.0)


def test_empty_and_single_vote_input_never_crash_or_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = np.zeros((0, 3), dtype=np.int64)
        assert count_matrix([], [], 0, 3).shape == (0, 3)
        assert math.isnan(raw_agreement(empty))
        assert math.isnan(fleiss_kappa(empty))
        assert math.isnan(krippendorff_alpha_nominal(empty))
        assert vote_distributions(empty)["patterns"] == {"3-0": 0, "2-1": 0, "1-1-1": 0}
        singles = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0]])
        assert math.isnan(raw_agreement(singles))
        assert math.isnan(fleiss_kappa(singles))
        assert math.isnan(krippendorff_alpha_nominal(singles))
        report = agreement_report([], [], [], [], 3, USABILITY, time_spent=[])
        slow = per_item_loop_report([], [], [], [], 3, USABILITY, time_spent=[])
        one = agreement_report([0, 1], [4, 4], [0, 1], [False, True], 3, time_spent=[np.nan, np.nan])
    assert report["n_items"] == report["n_votes"] == 0
    assert math.isnan(report["adjudication_rate"]) and math.isnan(report["raw_agreement"])
    assert report["time_per_vote"]["n"] == 0 and math.isnan(report["time_per_vote"]["mean"])
    assert report["per_rater"] == {}
    assert_same_report(report, slow)
    assert one["n_items"] == 2 and one["adjudication_rate"] == 0.5
    assert one["panel_votes_per_item"] == {0: 1, 1: 1}
    assert one["per_rater"][4]["n_scored"] == 0
    assert math.isnan(one["per_rater"][4]["agreement_with_majority"])
    assert math.isnan(one["per_rater"][4]["mean_time"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"label": [0, 3]}, "label must lie in 0..2"),
    ({"rater": [1]}, "rater has 1 entries"),
    ({"is_adjudication": [0, 2]}, "is_adjudication"),
    ({"time_spent": [1.0, -2.0]}, "time_spent"),
    ({"time_spent": [1.0, np.inf]}, "time_spent"),
    ({"decided": [True]}, "item must lie in 0..0"),
    ({"labels": ["usable", "unusable"]}, "labels names 2"),
    ({"n_categories": 0}, "n_categories"),
])
def test_report_refuses_bad_input(kwargs, message):
    args = {"item": [0, 1], "rater": [1, 2], "label": [0, 1], "is_adjudication": [False, False],
            "n_categories": 3} | kwargs
    for report in (agreement_report, per_item_loop_report):
        with pytest.raises(ValueError, match=message):
            report(**args)


# -- the report ----------------------------------------------------------------------------------------
def test_report_on_a_hand_made_table():
    # item 0: usable x3; item 1: usable, usable, unusable + adjudication; item 2: one of each
    # + adjudication; item 3: two votes (pending), unusable x2.
    item = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3]
    rater = [1, 2, 3, 1, 2, 3, 9, 2, 3, 4, 9, 1, 4]
    label = [0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 1, 1, 1]
    adj = [False] * 6 + [True] + [False] * 3 + [True] + [False] * 2
    time = [10, 20, 30, 5, 5, 5, 60, 1, 2, 3, np.nan, 8, 8]
    rep = agreement_report(item, rater, label, adj, 3, USABILITY, time_spent=time)
    assert rep["n_items"] == 4 and rep["n_votes"] == 13
    assert rep["n_panel_votes"] == 11 and rep["n_adjudication_votes"] == 2
    assert rep["panel_votes_per_item"] == {2: 1, 3: 3}
    assert rep["label_counts"] == {"usable": 6, "unusable": 4, "uncertain": 1}
    assert rep["vote_distributions"]["patterns"] == {"3-0": 1, "2-1": 1, "1-1-1": 1}
    assert rep["raw_agreement"] == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    counts3 = np.array([[3, 0, 0], [2, 1, 0], [1, 1, 1]])
    assert rep["fleiss_kappa"] == pytest.approx(statsmodels_fleiss_kappa(counts3, method="fleiss"))
    assert rep["fleiss_n_items"] == 3 and rep["alpha_n_items"] == 4
    counts = np.array([[3, 0, 0], [2, 1, 0], [1, 1, 1], [0, 2, 0]])
    assert rep["krippendorff_alpha"] == pytest.approx(reference_alpha(counts))
    assert rep["n_adjudicated_items"] == 2 and rep["adjudication_rate"] == 0.5
    assert rep["time_per_vote"] == {"n": 12, "mean": pytest.approx(157 / 12), "median": 6.5}
    # per item (sums of recorded times): 60, 75, 6, 16
    assert rep["time_per_item"] == {"n": 4, "mean": pytest.approx(157 / 4), "median": 38.0}
    # rater 1: item 0 (others usable,usable -> agrees), item 1 (others usable,unusable -> not
    # scored), item 3 (other: unusable -> agrees)
    assert rep["per_rater"][1] == {"n_votes": 3, "n_panel_votes": 3, "n_adjudication_votes": 0,
                                   "n_scored": 2, "agreement_with_majority": 1.0,
                                   "mean_time": pytest.approx(23 / 3)}
    # rater 3: item 0 agrees, item 1 (others usable x2, own unusable) disagrees, item 2 not scored
    assert rep["per_rater"][3]["n_scored"] == 2
    assert rep["per_rater"][3]["agreement_with_majority"] == 0.5
    # the adjudicator: never scored, one timed vote
    assert rep["per_rater"][9]["n_adjudication_votes"] == 2 and rep["per_rater"][9]["n_scored"] == 0
    assert rep["per_rater"][9]["mean_time"] == 60.0
    assert_same_report(rep, per_item_loop_report(item, rater, label, adj, 3, USABILITY, time_spent=time))


def test_adjudication_votes_do_not_change_agreement():
    rng = np.random.default_rng(1)
    item, rater, label, adj, _ = random_vote_table(rng, 500)
    full = agreement_report(item, rater, label, adj, 3)
    panel_only = agreement_report(item[~adj], rater[~adj], label[~adj], adj[~adj], 3)
    for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha", "vote_distributions"):
        assert_same_report(full[key], panel_only[key], key)
    assert full["n_adjudicated_items"] > 0 and panel_only["n_adjudicated_items"] == 0


def test_decided_mask_restricts_every_figure():
    rng = np.random.default_rng(2)
    item, rater, label, adj, time = random_vote_table(rng, 300)
    decided = rng.random(300) < 0.5
    restricted = agreement_report(item, rater, label, adj, 3, decided=decided, time_spent=time)
    keep = decided[item]
    direct = agreement_report(item[keep], rater[keep], label[keep], adj[keep], 3,
                              decided=np.ones(300, bool), time_spent=time[keep])
    assert_same_report(restricted, direct)
    assert restricted["n_items"] == int(np.isin(np.arange(300), item[keep]).sum())


@PROPERTY
@given(vote_tables(), st.booleans(), st.booleans())
def test_report_matches_the_per_item_loop(table, use_decided, use_time):
    item, rater, label, adj, k, time, decided = table
    kwargs = {"labels": ["abcd"[c] for c in range(k)],
              "decided": decided if use_decided else None,
              "time_spent": time if use_time else None}
    fast = agreement_report(item, rater, label, adj, k, **kwargs)
    slow = per_item_loop_report(item, rater, label, adj, k, **kwargs)
    assert_same_report(fast, slow)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_report_matches_the_per_item_loop_on_random_tables(seed):
    rng = np.random.default_rng(seed)
    item, rater, label, adj, time = random_vote_table(rng, 3000)
    fast = agreement_report(item, rater, label, adj, 3, USABILITY, time_spent=time)
    slow = per_item_loop_report(item, rater, label, adj, 3, USABILITY, time_spent=time)
    assert_same_report(fast, slow)
    assert set(fast["panel_votes_per_item"]) == {1, 2, 3, 4}
    assert 0.3 < fast["krippendorff_alpha"] < 0.9 and 0.3 < fast["fleiss_kappa"] < 0.9
    # cross-check the report's statistics against the reference packages
    panel = ~adj
    counts = count_matrix(item[panel], label[panel], 3000, 3)
    assert fast["krippendorff_alpha"] == pytest.approx(reference_alpha(counts), abs=1e-10)
    three = counts[counts.sum(axis=1) == 3]
    assert fast["fleiss_kappa"] == pytest.approx(statsmodels_fleiss_kappa(three, method="fleiss"), abs=1e-12)


def test_report_with_a_panel_of_five():
    rng = np.random.default_rng(4)
    n_items = 400
    item = np.repeat(np.arange(n_items), 5)
    rater = (np.repeat(rng.integers(0, 30, n_items), 5) + np.tile(np.arange(5), n_items)) % 30
    label = np.where(rng.random(item.size) < 0.7, 0, rng.integers(0, 3, item.size))
    adj = np.zeros(item.size, bool)
    fast = agreement_report(item, rater, label, adj, 3, panel=5)
    assert_same_report(fast, per_item_loop_report(item, rater, label, adj, 3, panel=5))
    assert fast["fleiss_n_items"] == n_items
    assert set(fast["vote_distributions"]["patterns"]) == {"5-0", "4-1", "3-2", "3-1-1", "2-2-1"}
    counts = count_matrix(item, label, n_items, 3)
    assert fast["fleiss_kappa"] == pytest.approx(statsmodels_fleiss_kappa(counts, method="fleiss"))


@pytest.mark.parametrize("twice", [True, False], ids=["a-rater-votes-twice-on-an-item", "one-vote-per-rater"])
def test_the_report_does_not_depend_on_the_order_the_votes_come_in(twice):
    """The same votes in another order give the same report, float for float (a release written
    twice from the same records has the same statistics, whatever order the database returns)."""
    rng = np.random.default_rng(5)
    n = 3000
    item = np.repeat(np.arange(n // 3), 3)
    rater = rng.integers(0, 40, n) if twice else np.tile([0, 1, 2], n // 3) + 3 * rng.integers(0, 10, n)
    label, adj = rng.integers(0, 3, n), rng.random(n) < 0.05
    time = np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 37.3 + 0.001)
    first = agreement_report(item, rater, label, adj, 3, USABILITY, time_spent=time)
    for _ in range(3):
        order = rng.permutation(n)
        again = agreement_report(item[order], rater[order], label[order], adj[order], 3, USABILITY,
                                 time_spent=time[order])
        assert repr(again) == repr(first)
