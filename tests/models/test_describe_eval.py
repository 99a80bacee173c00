"""Fact-level precision and recall of a describer against rendered ground truth."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.vlm import DescribeRequest
from models.backends.vlm.heuristic import HeuristicDescriber
from models.demo.describe_eval import FACT_TYPES, FactCounts, compare_facts, truth_track
from models.facts import Fact
from models.world.scene import Fact as TruthFact


def pred(name, value, a, b, known=True, kind="attribute"):
    return Fact(f"{name}{a}{value}", kind, name, value if known else "", a, b, known=known)


def truth(name, value, a, b, kind="attribute"):
    return TruthFact(kind, name, value, a, b)


def test_matching_needs_same_value_and_overlapping_half_open_intervals():
    gold = [truth("upper_colour", "red", 0, 50), truth("walks", "left", 0, 20, "event"),
            truth("walks", "left", 40, 50, "event"), truth("stands", "still", 20, 40, "event")]
    predicted = [pred("upper_colour", "red", 5, 45),
                 pred("walks", "left", 0, 19, kind="event"),
                 pred("walks", "left", 20, 40, kind="event"),       # touches both walks, overlaps neither
                 pred("stands", "still", 19, 21, kind="event"),
                 pred("lower_colour", "", 0, 50, known=False)]
    report = compare_facts(predicted, gold).report()
    assert report["upper_colour"] == {"precision": 1.0, "recall": 1.0, "n_pred": 1, "n_pred_matched": 1,
                                      "n_truth": 1, "n_truth_matched": 1, "n_unknown": 0}
    assert (report["walks"]["precision"], report["walks"]["recall"]) == (0.5, 0.5)
    assert report["stands"]["precision"] == 1.0
    # an unknown fact is neither right nor wrong; no truth and no prediction give no rate
    assert report["lower_colour"]["n_unknown"] == 1 and report["lower_colour"]["precision"] is None
    assert report["lower_colour"]["recall"] is None and report["enters"]["n_truth"] == 0
    # a wrong value is a miss both ways
    wrong = compare_facts([pred("upper_colour", "blue", 0, 50)], gold).types["upper_colour"]
    assert (wrong.precision, wrong.recall) == (0.0, 0.0)


def test_slack_widens_the_truth_interval():
    gold = [truth("enters", "from the left", 2, 3, "event")]
    late = [pred("enters", "from the left", 6, 7, kind="event")]
    assert compare_facts(late, gold).types["enters"].precision == 0.0
    assert compare_facts(late, gold, slack=3).types["enters"].precision == 0.0
    assert compare_facts(late, gold, slack=4).types["enters"].precision == 1.0
    with pytest.raises(ValueError, match="slack"):
        compare_facts(late, gold, slack=-1)
    with pytest.raises(ValueError, match="models.facts.Fact"):
        compare_facts([gold[0]], gold)


def test_counts_add_up_over_trajectories():
    a = compare_facts([pred("upper_colour", "red", 0, 5)], [truth("upper_colour", "red", 0, 5)])
    b = compare_facts([pred("upper_colour", "red", 0, 5)], [truth("upper_colour", "grey", 0, 5)])
    total = a + b + FactCounts()
    c = total.types["upper_colour"]
    assert (c.n_pred, c.n_pred_matched, c.n_truth, c.n_truth_matched) == (2, 1, 2, 1)
    assert c.precision == 0.5 and set(total.types) == set(FACT_TYPES)
    assert math.isnan(FactCounts().types["walks"].precision)


names = st.sampled_from(["upper_colour", "walks", "stands"])
values = st.sampled_from(["a", "b"])
spans = st.tuples(st.integers(0, 30), st.integers(1, 10)).map(lambda t: (t[0], t[0] + t[1]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, values, spans, st.booleans()), max_size=8),
       st.lists(st.tuples(names, values, spans), max_size=8), st.integers(0, 3))
def test_against_a_frame_by_frame_reference(raw_pred, raw_truth, slack):
    predicted = [pred(n, v, a, b, known=k) for n, v, (a, b), k in raw_pred]
    gold = [truth(n, v, a, b) for n, v, (a, b) in raw_truth]
    counts = compare_facts(predicted, gold, slack=slack)
    for name in ("upper_colour", "walks", "stands"):
        # reference: two facts match when some frame lies in both (the truth widened by slack)
        def shares_a_frame(p, g):
            return any(p.start_frame <= f < p.end_frame for f in range(g.start_frame - slack, g.end_frame + slack))

        known = [p for p in predicted if p.name == name and p.known]
        golds = [g for g in gold if g.name == name]
        hits_p = sum(any(p.value == g.value and shares_a_frame(p, g) for g in golds) for p in known)
        hits_g = sum(any(p.value == g.value and shares_a_frame(p, g) for p in known) for g in golds)
        c = counts.types[name]
        assert (c.n_pred, c.n_pred_matched, c.n_truth, c.n_truth_matched) == (len(known), hits_p, len(golds), hits_g)


def test_truth_track_keeps_frames_with_a_visible_box(rendered_small):
    person = rendered_small.gt.people[2]
    frames, boxes = truth_track(person)
    assert boxes.shape == (len(frames), 4) and (np.diff(frames) > 0).all()
    assert all(person.boxes[f] is not None for f in frames)
    visible, _ = truth_track(person, min_visible=0.5)
    assert set(visible) <= set(frames)
    assert all(person.visible[f] > 0.5 for f in visible)


def test_heuristic_describer_on_the_small_scene(rendered_small):
    describer = HeuristicDescriber()
    total = FactCounts()
    for person in rendered_small.gt.people:
        frames, boxes = truth_track(person)
        result = describer.describe(DescribeRequest(str(rendered_small.path), frames, boxes))
        total = total + compare_facts(result.description.facts, person.facts)
    report = total.report()
    # floors, not targets: the describer names colours and paces with its own models (basic colour
    # terms, walking norms), not the renderer's tables, so it gets some of the world wrong
    floors = {"upper_colour": 0.8, "lower_colour": 0.6, "walks": 0.8, "speed": 0.6, "stands": 0.8}
    for name, floor in floors.items():
        assert report[name]["precision"] >= floor and report[name]["recall"] >= floor, (name, report[name])
