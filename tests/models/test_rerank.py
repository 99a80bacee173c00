"""Pivot-promote against a literal transcription of ActPair's Algorithm 1, CombSUM and the SCOUT
rerank blend against loops and hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.retrievers.rerank import (
    BlendConfig,
    attribute_vlm_score,
    combsum,
    fuse_and_rerank,
    minmax_rows,
    pair_vlm_value,
    pivot_promote,
    rerank_blend,
    shortlist,
    top_positions,
)


def algorithm_1(query, ranked: list, compare, calls: list) -> list:
    """PivotPromote(Q, R) as printed in the paper, recursion and all."""
    if len(ranked) <= 1:
        return ranked
    pivot, better, worse = ranked[0], [], []
    for other in ranked[1:]:
        calls.append(1)
        if compare(pivot, other) == "b":
            better.append(other)
        else:
            worse.append(other)
    return [*algorithm_1(query, better, compare, calls), pivot, *worse]


def table_comparator(seed: int, p_tie: float):
    """A fixed random answer for every ordered pair: intransitive and even inconsistent between
    (a, b) and (b, a), as a model can be."""
    rng = np.random.default_rng(seed)
    answers = {}

    def compare(a, b):
        if (a, b) not in answers:
            u = rng.random()
            answers[(a, b)] = "tie" if u < p_tie else ("a" if u < (1 + p_tie) / 2 else "b")
        return answers[(a, b)]
    return compare


def utility_comparator(seed: int, levels: int):
    """A consistent comparator from a random utility with ``levels`` values (ties when equal)."""
    rng = np.random.default_rng(seed)
    utility = {}

    def compare(a, b):
        ua = utility.setdefault(a, int(rng.integers(levels)))
        ub = utility.setdefault(b, int(rng.integers(levels)))
        return "tie" if ua == ub else ("a" if ua > ub else "b")
    return compare, utility


@settings(max_examples=300, deadline=None)
@given(m=st.integers(0, 14), seed=st.integers(0, 2**31), kind=st.sampled_from(["table", "utility"]),
       p_tie=st.sampled_from([0.0, 0.3, 0.9]), levels=st.sampled_from([2, 4, 1000]))
def test_pivot_promote_equals_literal_algorithm_1(m, seed, kind, p_tie, levels):
    candidates = [f"img{i}" for i in np.random.default_rng(seed).permutation(m)]
    make = (lambda: table_comparator(seed, p_tie)) if kind == "table" else \
        (lambda: utility_comparator(seed, levels)[0])
    # the same answers for both runs: each gets a fresh comparator built from the same seed, and
    # both ask the pairs in the same order
    ranked, n_calls = pivot_promote(candidates, make())
    calls: list = []
    expected = algorithm_1("query", list(candidates), make(), calls)
    assert ranked == expected
    assert n_calls == len(calls)
    assert sorted(ranked) == sorted(candidates)
    assert (m - 1 if m else 0) <= n_calls <= m * (m - 1) // 2


@settings(max_examples=100, deadline=None)
@given(m=st.integers(1, 14), seed=st.integers(0, 2**31))
def test_a_strict_consistent_comparator_puts_the_best_first(m, seed):
    utility = dict(enumerate(np.random.default_rng(seed).permutation(m).tolist()))
    candidates = list(range(m))

    def compare(a, b):
        return "a" if utility[a] > utility[b] else "b"
    ranked, _ = pivot_promote(candidates, compare)
    assert utility[ranked[0]] == max(utility[c] for c in candidates)


def test_confirmed_prior_order_and_the_quadratic_worst_case():
    candidates = list("abcdefg")
    assert pivot_promote(candidates, lambda a, b: "a") == (candidates, 6)
    assert pivot_promote(candidates, lambda a, b: "tie") == (candidates, 6)
    # every challenger wins: the order reverses after M(M-1)/2 calls
    assert pivot_promote(candidates, lambda a, b: "b") == (candidates[::-1], 21)
    assert pivot_promote([], lambda a, b: "a") == ([], 0)
    assert pivot_promote(["x"], lambda a, b: "a") == (["x"], 0)


def test_worse_candidates_keep_their_prior_order():
    # pivot 1 loses to 4 and 2; 3 and 5 stay after the pivot in their prior order
    better = {(1, 4), (1, 2), (4, 2)}
    ranked, n = pivot_promote([1, 3, 4, 5, 2], lambda a, b: "b" if (a, b) in better else "a")
    assert ranked == [2, 4, 1, 3, 5] and n == 4 + 1


def test_bad_comparator_answers_are_rejected():
    with pytest.raises(ValueError, match="expected one of"):
        pivot_promote([1, 2, 3], lambda a, b: "B")
    with pytest.raises(ValueError, match="callable"):
        pivot_promote([1, 2], "a")


# -- CombSUM, shortlist ---------------------------------------------------------------------------
def test_combsum_by_hand_and_constant_rows():
    a = np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 5.0]])
    b = np.array([[10.0, 0.0, 5.0], [0.0, 1.0, 4.0]])
    fused = combsum([a, torch.tensor(b)])
    assert np.allclose(fused, [[0.0 + 1.0, 1.0 + 0.0, 0.5 + 0.5], [0.0, 0.25, 1.0]])
    assert np.allclose(combsum(np.stack([a, b])), fused)
    assert np.array_equal(minmax_rows(np.full((2, 4), 7.0)), np.zeros((2, 4)))


def test_combsum_equals_a_loop_on_random_lists():
    rng = np.random.default_rng(0)
    lists = [rng.normal(size=(5, 30)) * rng.uniform(0.1, 10) for _ in range(4)]
    lists[2][3] = 1.5                                            # one constant row
    expected = np.zeros((5, 30))
    for s in lists:
        for q in range(5):
            lo, hi = min(s[q]), max(s[q])
            expected[q] += [(x - lo) / (hi - lo) if hi > lo else 0.0 for x in s[q]]
    assert np.allclose(combsum(lists), expected, rtol=1e-12, atol=1e-12)


def test_combsum_rejects_bad_lists():
    with pytest.raises(ValueError, match="at least one"):
        combsum([])
    with pytest.raises(ValueError, match="shape"):
        combsum([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(ValueError, match="NaN"):
        combsum([np.array([[0.0, np.nan]])])
    with pytest.raises(ValueError, match="2-D"):
        combsum([np.zeros(3)])


def test_shortlist_takes_the_top_k_with_ties_to_the_lower_index():
    s = np.array([[0.1, 0.9, 0.5, 0.9, 0.2]])
    assert shortlist(s, 3).tolist() == [[1, 3, 2]]
    assert shortlist(s, 20).shape == (1, 5)
    with pytest.raises(ValueError, match="positive"):
        shortlist(s, 0)


def random_rows(rng, q: int, n: int) -> np.ndarray:
    """Score rows of one of the shapes that break a top-k: few distinct values (ties), all equal
    (signed zeros included), sorted either way, a plateau above the rest, or plain noise."""
    kind = rng.integers(0, 6)
    if kind == 0:
        return rng.integers(0, rng.integers(1, 20), (q, n)).astype(float)
    if kind == 1:
        rows = np.zeros((q, n))
        rows[:, ::3] = -0.0
        return rows
    if kind == 2:
        return np.sort(rng.normal(size=(q, n)), axis=1)
    if kind == 3:
        return -np.sort(rng.normal(size=(q, n)), axis=1)
    rows = rng.normal(size=(q, n))
    if kind == 4:
        rows[:, : n // 2] = 5.0
    return rows


def test_shortlist_equals_the_first_k_of_a_stable_sort_on_random_rows():
    rng = np.random.default_rng(11)
    for case in range(3000):
        q, n, k = int(rng.integers(0, 4)), int(rng.integers(0, 4000 if case % 5 else 30)), int(rng.integers(1, 90))
        s = random_rows(rng, q, n)
        want = np.argsort(-s, axis=1, kind="stable")[:, :k]                  # the obvious way
        got = shortlist(s, k)
        assert got.shape == want.shape and np.array_equal(got, want), (case, q, n, k)
        for row in s:
            assert np.array_equal(top_positions(row, k), np.argsort(-row, kind="stable")[:k])
    with pytest.raises(ValueError, match="NaN"):
        shortlist(np.array([[0.0, np.nan]]), 1)


# -- rerank blend ---------------------------------------------------------------------------------
def test_attribute_vlm_score_by_hand():
    # log P(yes) of 0.9, 0.2 and 1.0; each half min-max normalised over the shortlist, then halved
    log_p = np.log([0.9, 0.2, 1.0])
    got = attribute_vlm_score(log_p, np.array([80.0, 100.0, 0.0]), np.array([10.0, 100.0, 90.0]),
                              np.array([100.0, 100.0, 90.0]))
    holistic = (log_p - math.log(0.2)) / (0.0 - math.log(0.2))             # [0.9346, 0, 1]
    geometric = np.array([math.cbrt(80 * 10 * 100), 100.0, 0.0]) / 100      # [0.4309, 1, 0]
    assert np.allclose(got, 0.5 * holistic + 0.5 * geometric)
    assert np.allclose(got, [0.5 * 0.93459 + 0.5 * 0.43089, 0.5, 0.5], atol=1e-4)
    # on the log scale, not the probability scale: P(yes) would give the first 0.5 * 0.875 + ...
    assert not np.isclose(got[0], 0.5 * (0.9 - 0.2) / 0.8 + 0.5 * geometric[0])
    rows = attribute_vlm_score(np.stack([log_p, log_p[::-1]]), *(np.full((2, 3), 50.0),) * 3)
    assert np.allclose(rows, [0.5 * holistic, 0.5 * holistic[::-1]])      # per query, constant half: zeros
    with pytest.raises(ValueError, match="log-probabilities"):
        attribute_vlm_score(np.array([0.5, 0.9]), np.full(2, 50.0), np.full(2, 50.0), np.full(2, 50.0))
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        attribute_vlm_score(np.log([0.5]), np.array([50.0]), np.array([150.0]), np.array([50.0]))
    with pytest.raises(ValueError, match="one shape"):
        attribute_vlm_score(np.zeros(2), np.zeros(3), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match="shortlists"):
        attribute_vlm_score(-0.1, 50.0, 50.0, 50.0)


def test_pair_vlm_value_by_hand():
    assert pair_vlm_value(math.log(0.9), 80.0, 10.0, 100.0) == pytest.approx(
        0.45 + 0.5 * math.cbrt(80 * 10 * 100) / 100)
    with pytest.raises(ValueError, match="log-probabilities"):
        pair_vlm_value(0.3, 50.0, 50.0, 50.0)


def test_rerank_blend_by_hand():
    fused = np.array([[3.0, 2.0, 1.0]])
    vlm = np.array([[0.2, 0.6, 1.0]])
    itm = np.array([[0.5, 0.5, 0.5]])                            # constant: contributes nothing
    got = rerank_blend(fused, vlm, itm)
    assert np.allclose(got, [[0.2 * 1 + 0.6 * 0, 0.2 * 0.5 + 0.6 * 0.5, 0.2 * 0 + 0.6 * 1]])
    only_fused = rerank_blend(fused, vlm, itm, BlendConfig(w_fused=1.0, w_vlm=0.0, w_itm=0.0))
    assert np.allclose(only_fused, [[1.0, 0.5, 0.0]])
    with pytest.raises(ValueError, match="one shape"):
        rerank_blend(fused, vlm[:, :2], itm)
    with pytest.raises(ValueError, match="w_vlm"):
        BlendConfig(w_vlm=-1.0)


def test_fuse_and_rerank_promotes_what_the_rerankers_prefer():
    rng = np.random.default_rng(3)
    n_queries, n_items = 4, 60
    truth = rng.integers(0, n_items, n_queries)
    lists = [rng.normal(size=(n_queries, n_items)) for _ in range(2)]
    for s in lists:
        s[np.arange(n_queries), truth] += 2.0                    # the truth is in the shortlist

    def rerank_scores(ids):
        hit = (ids == truth[:, None]).astype(float)               # [Q, M]
        vlm = attribute_vlm_score(np.log(0.3 + 0.6 * hit), 50 + 40 * hit, 60 + 0 * hit, 70 + 0 * hit)
        return vlm, 0.5 + 0.1 * hit

    ids, scores = fuse_and_rerank(lists, rerank_scores)
    assert ids.shape == (n_queries, 20)
    assert (ids[:, 0] == truth).all()
    assert (np.diff(scores, axis=1) <= 0).all()
