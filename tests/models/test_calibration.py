"""The pseudo-label gate: the Clopper–Pearson bound against statsmodels and closed forms, the
acceptance decision, uncertain outcomes as errors, and the refusals of apply_rule."""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from models.curation.calibration import (
    Calibration,
    EasyNegativeRule,
    apply_rule,
    calibrate,
    clopper_pearson_upper,
    min_audit_size,
    rule_select,
    sample_for_audit,
)
from models.facts import Fact, Predicate

RULE = EasyNegativeRule(name="low-sim contradiction v1", s_max=0.2, encoder="all-MiniLM-L6-v2")


# -- Clopper–Pearson -----------------------------------------------------------------------------
@given(n=st.integers(1, 2000), data=st.data())
def test_upper_bound_equals_statsmodels_two_sided_90(n, data):
    errors = data.draw(st.integers(0, n))
    # the upper end of the two-sided 90% interval is the one-sided 95% upper bound
    _, upper = proportion_confint(errors, n, alpha=0.1, method="beta")
    assert clopper_pearson_upper(errors, n) == pytest.approx(upper, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n", [1, 2, 10, 59, 300, 10_000])
def test_zero_errors_has_the_closed_form(n):
    assert clopper_pearson_upper(0, n) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-12)
    assert clopper_pearson_upper(0, n, confidence=0.99) == pytest.approx(1 - 0.01 ** (1 / n), rel=1e-12)


def test_bound_edges_and_monotonicity():
    assert clopper_pearson_upper(0, 0) == 1.0
    assert clopper_pearson_upper(7, 7) == 1.0
    bounds = [clopper_pearson_upper(e, 100) for e in range(101)]
    assert all(a < b for a, b in itertools.pairwise(bounds))
    assert clopper_pearson_upper(3, 100, 0.99) > clopper_pearson_upper(3, 100, 0.95)
    # a one-sided upper bound is above the point estimate
    assert clopper_pearson_upper(5, 100) > 0.05


@pytest.mark.parametrize("errors, n, confidence", [(-1, 10, 0.95), (11, 10, 0.95), (1, -2, 0.95),
                                                   (1, 10, 1.0), (1, 10, 0.0), (1.5, 10, 0.95), (True, 10, 0.95)])
def test_bad_bound_arguments(errors, n, confidence):
    with pytest.raises(ValueError):
        clopper_pearson_upper(errors, n, confidence)


@pytest.mark.parametrize("bound", [0.01, 0.02, 0.05, 0.1, 0.3])
def test_min_audit_size_is_the_smallest_accepting_zero_error_audit(bound):
    n = min_audit_size(bound)
    assert n > 1
    assert clopper_pearson_upper(0, n) <= bound < clopper_pearson_upper(0, n - 1)
    assert n == math.ceil(math.log(0.05) / math.log(1 - bound))


def test_min_audit_size_for_a_five_percent_bound_is_59():
    assert min_audit_size(0.05) == 59
    assert min_audit_size(0.05, confidence=0.99) == 90


# -- the rule ------------------------------------------------------------------------------------
def test_rule_hash_is_stable_and_changes_with_every_field():
    same = EasyNegativeRule(name="low-sim contradiction v1", s_max=0.2, encoder="all-MiniLM-L6-v2")
    assert same.rule_hash() == RULE.rule_hash()
    assert EasyNegativeRule.from_dict(RULE.to_dict()).rule_hash() == RULE.rule_hash()
    changes = [dict(name="v2"), dict(s_max=0.25), dict(encoder="other"), dict(min_contradicted=2),
               dict(strata=("easy_negative", "random")), dict(event_absence=True)]
    hashes = {replace(RULE, **c).rule_hash() for c in changes}
    assert RULE.rule_hash() not in hashes and len(hashes) == len(changes)


@pytest.mark.parametrize("kwargs, message", [
    (dict(s_max=float("nan")), "s_max"), (dict(s_max=2.0), "s_max"), (dict(min_contradicted=0), "min_contradicted"),
    (dict(strata=("within",)), "strata"), (dict(strata=()), "strata"), (dict(name=" "), "name"),
    (dict(encoder=""), "encoder"),
])
def test_bad_rules_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        replace(RULE, **kwargs)


def fact(fid, name, value, start=0, end=50, known=True, kind=None):
    kind = kind or ("event" if name in ("walks", "enters", "leaves", "crosses", "stands") else "attribute")
    return Fact(id=fid, kind=kind, name=name, value=value, start_frame=start, end_frame=end, known=known)


# query 1 wants a red top and blue trousers; query 2 wants someone entering from the left
PREDICATES = {
    1: [Predicate("upper_colour", "red", ["f1"]), {"name": "lower_colour", "value": "blue", "fact_ids": ["f2"]}],
    2: [Predicate("enters", "from the left", ["f9"])],
}
FACTS = {
    10: [fact("a", "upper_colour", "green"), fact("b", "lower_colour", "black")],       # two contradictions
    11: [fact("a", "upper_colour", "red"), fact("b", "lower_colour", "black")],         # one
    12: [fact("a", "upper_colour", "red"), fact("b", "lower_colour", "blue")],          # none: a match
    13: [fact("a", "upper_colour", "green", known=False)],                             # unknown: nothing
    14: [{"id": "a", "kind": "event", "name": "enters", "value": "from the right", "start_frame": 0, "end_frame": 9}],
}
COVERED = {14: (0, 9)}   # the describer's 'enters' fact covers all of the observed interval
#          query  traj  similarity  stratum
PAIRS = [(1, 10, 0.05, "easy_negative"),
         (1, 11, 0.10, "easy_negative"),
         (1, 12, 0.10, "easy_negative"),
         (1, 13, 0.00, "easy_negative"),
         (1, 10, 0.30, "easy_negative"),      # similarity too high
         (1, 10, 0.05, "hard_negative"),      # not a stratum the rule labels
         (1, 99, 0.05, "easy_negative"),      # a trajectory without approved facts
         (2, 14, 0.05, "easy_negative")]      # an event absent: only with event_absence


def columns(pairs=PAIRS):
    q, t, s, st_ = zip(*pairs)
    return dict(query_ids=np.array(q), trajectory_ids=np.array(t), similarity=np.array(s), strata=np.array(st_),
                query_predicates=PREDICATES, trajectory_facts=FACTS, trajectory_covered=COVERED)


def test_rule_selects_low_similarity_pairs_with_a_contradicted_predicate():
    assert rule_select(RULE, **columns()).tolist() == [True, True, False, False, False, False, False, False]
    two = replace(RULE, min_contradicted=2)
    assert rule_select(two, **columns()).tolist() == [True] + [False] * 7
    events = replace(RULE, event_absence=True)
    assert rule_select(events, **columns())[-1]
    both = replace(RULE, strata=("easy_negative", "hard_negative"))
    assert rule_select(both, **columns())[5]


# -- calibration and application -----------------------------------------------------------------
def test_calibration_accepts_when_the_upper_bound_is_within_the_declared_bound():
    cal = calibrate(RULE, ["correct"] * 59, 0.05, n_considered=1000, n_selected=400)
    assert cal.accepted and cal.n == 59 and cal.errors == 0
    assert cal.upper_bound == pytest.approx(1 - 0.05 ** (1 / 59))
    assert cal.rule_hash == RULE.rule_hash() and cal.coverage == pytest.approx(0.4)
    refused = calibrate(RULE, ["correct"] * 58, 0.05)
    assert not refused.accepted and refused.upper_bound > 0.05
    assert Calibration.from_dict(cal.to_dict()) == cal


def test_uncertain_outcomes_count_as_errors():
    outcomes = ["correct"] * 150
    with_error = calibrate(RULE, [*outcomes, "error", "error"], 0.04)
    with_uncertain = calibrate(RULE, [*outcomes, "uncertain", "error"], 0.04)
    with_correct = calibrate(RULE, [*outcomes, "correct", "error"], 0.04)
    assert with_uncertain.errors == with_error.errors == 2 and with_uncertain.n_uncertain == 1
    assert with_uncertain.upper_bound == with_error.upper_bound
    assert with_correct.upper_bound < with_uncertain.upper_bound
    # the one uncertain outcome is what refuses the rule here
    assert with_correct.accepted and not with_uncertain.accepted


@pytest.mark.parametrize("outcomes, bound, kwargs, message", [
    (["correct", "wrong"], 0.05, {}, "outcomes"),
    ("correct", 0.05, {}, "sequence"),
    (["correct"], 0.0, {}, "declared_bound"),
    (["correct"], 1.0, {}, "declared_bound"),
    (["correct"], 0.05, {"split": "test"}, "dev"),
    (["correct"], 0.05, {"n_considered": 10}, "both"),
    (["correct"] * 5, 0.05, {"n_considered": 10, "n_selected": 3}, "selected"),
])
def test_bad_calibrations_are_refused(outcomes, bound, kwargs, message):
    with pytest.raises(ValueError, match=message):
        calibrate(RULE, outcomes, bound, **kwargs)


def test_apply_rule_tags_pseudo_negatives_and_reports_coverage():
    cal = calibrate(RULE, ["correct"] * 100, 0.05, n_considered=500, n_selected=100, blinded=True)
    result = apply_rule(RULE, cal, **columns())
    assert [(p.query_id, p.trajectory_id) for p in result.labels] == [(1, 10), (1, 11)]
    for p in result.labels:
        assert p.pseudo is True and p.label == 0 and p.source == "pseudo" and p.rule_hash == RULE.rule_hash()
        assert p.similarity < RULE.s_max and p.stratum == "easy_negative"
    assert result.labels[0].contradicted == ({"name": "upper_colour", "value": "red"},
                                             {"name": "lower_colour", "value": "blue"})
    assert result.labels[1].contradicted == ({"name": "lower_colour", "value": "blue"},)
    assert result.n_considered == len(PAIRS) and result.coverage == pytest.approx(2 / 8)
    assert result.coverage_drift == pytest.approx(2 / 8 - 0.2)


def test_apply_rule_refuses_a_rule_changed_after_calibration():
    cal = calibrate(RULE, ["correct"] * 100, 0.05, blinded=True)
    for changed in (replace(RULE, s_max=0.3), replace(RULE, min_contradicted=2), replace(RULE, encoder="x")):
        with pytest.raises(ValueError, match="rule changed after calibration"):
            apply_rule(changed, cal, **columns())


def test_apply_rule_refuses_an_unaccepted_calibration_and_other_splits():
    refused = calibrate(RULE, ["correct"] * 90 + ["uncertain"] * 5, 0.05)
    with pytest.raises(ValueError, match="not accepted"):
        apply_rule(RULE, refused, **columns())
    cal = calibrate(RULE, ["correct"] * 100, 0.05, blinded=True)
    for split in ("dev", "test"):
        with pytest.raises(ValueError, match="training-only"):
            apply_rule(RULE, cal, **columns(), split=split)
    bad = columns() | {"similarity": np.array([np.nan] * len(PAIRS))}
    with pytest.raises(ValueError, match="NaN"):
        apply_rule(RULE, cal, **bad)
    with pytest.raises(ValueError, match="strata"):
        apply_rule(RULE, cal, **columns() | {"strata": np.array(["easy"] * len(PAIRS))})
    with pytest.raises(ValueError, match="one entry per pair"):
        apply_rule(RULE, cal, **columns() | {"trajectory_ids": np.arange(3)})


def test_sample_for_audit_is_uniform_seeded_and_without_repeats():
    a = sample_for_audit(1000, 59, seed=3)
    assert np.array_equal(a, sample_for_audit(1000, 59, seed=3))
    assert a.size == 59 and np.unique(a).size == 59 and np.all(np.diff(a) > 0)
    assert not np.array_equal(a, sample_for_audit(1000, 59, seed=4))
    assert np.array_equal(sample_for_audit(5, 59, seed=0), np.arange(5))
    hits = np.bincount(np.concatenate([sample_for_audit(10, 3, seed=s) for s in range(2000)]), minlength=10)
    assert math.isclose(hits.min() / hits.max(), 1.0, abs_tol=0.15)


def test_only_a_blinded_calibration_lets_a_rule_label_and_the_record_says_how_many():
    sighted = calibrate(RULE, ["correct"] * 100, 0.05)
    assert sighted.accepted and sighted.n_blinded == 0
    with pytest.raises(ValueError, match="not blinded"):
        apply_rule(RULE, sighted, **columns())
    blind = calibrate(RULE, ["correct"] * 60, 0.05, n_considered=900, n_selected=300, blinded=True,
                      n_not_blinded=40, n_unreviewed=200)
    record = blind.as_dict()
    assert (record["n_blinded"], record["n_not_blinded"], record["n_unreviewed"]) == (60, 40, 200)
    assert Calibration.from_dict(record) == blind
    assert len(apply_rule(RULE, blind, **columns()).labels) == 2
    with pytest.raises(ValueError, match="exceed selected"):
        calibrate(RULE, ["correct"] * 60, 0.05, n_considered=900, n_selected=100, blinded=True, n_not_blinded=41)
