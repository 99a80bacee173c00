"""``annotation.rules.decide``: the examples of DESIGN 2.3/2.4 and properties over all inputs."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.rules import ADJUDICATE, PENDING, UNRESOLVED, decide

USABILITY = {"usable", "unusable"}
LABELS = ["usable", "unusable", "uncertain"]


@pytest.mark.parametrize("votes, expected", [
    ([], PENDING),
    (["usable", "usable"], PENDING),                                   # two of three are not a panel
    (["usable", "usable", "unusable"], "usable"),
    (["unusable", "uncertain", "unusable"], "unusable"),
    (["usable", "unusable", "uncertain"], ADJUDICATE),                 # no majority
    (["uncertain", "uncertain", "usable"], ADJUDICATE),                # a majority of uncertain
    (["usable", "unusable", "uncertain", "usable"], "usable"),         # adjudicated: 2 usable in all
    (["usable", "unusable", "uncertain", "unusable"], "unusable"),
    (["usable", "unusable", "uncertain", "uncertain"], UNRESOLVED),    # the adjudicator is unsure too
    (["uncertain", "uncertain", "usable", "unusable"], UNRESOLVED),    # only one unusable in all
    (["uncertain", "uncertain", "usable", "usable"], "usable"),
    (["usable", "usable", "unusable", "unusable"], "usable"),          # a panel majority stands
])
def test_design_examples(votes, expected):
    assert decide(votes, USABILITY) == expected


def test_identity_labels_and_other_panels():
    assert decide(["same", "different", "same"], {"same", "different"}) == "same"
    assert decide(["same", "uncertain", "different"], {"same", "different"}) == ADJUDICATE
    assert decide(["a", "b", "a", "b", "c"], {"a", "b"}, required=2, panel=5) == ADJUDICATE  # a tie
    assert decide(["a", "b", "a", "b", "c", "c"], {"a", "b"}, required=2, panel=5) == UNRESOLVED
    assert decide(["a", "b", "a", "c", "a"], {"a", "b"}, required=2, panel=5) == "a"         # 3 beat 1
    assert decide(["a"], {"a"}, required=1, panel=1) == "a"


@pytest.mark.parametrize("kwargs", [
    dict(votes="usable", decisive=USABILITY),
    dict(votes=["usable"], decisive=set()),
    dict(votes=["usable"], decisive={"pending"}),
    dict(votes=["usable"], decisive=USABILITY, required=4, panel=3),
    dict(votes=["usable"], decisive=USABILITY, required=0),
    dict(votes=["usable", None, "usable"], decisive=USABILITY),
])
def test_bad_arguments_are_refused(kwargs):
    with pytest.raises(ValueError):
        decide(**kwargs)


votes_st = st.lists(st.sampled_from(LABELS), max_size=7)


@settings(max_examples=500, deadline=None)
@given(votes=votes_st)
def test_outcome_follows_the_counts(votes):
    result = decide(votes, USABILITY)
    panel = votes[:3]
    if len(votes) < 3:
        assert result == PENDING
    elif any(panel.count(label) >= 2 for label in USABILITY):
        assert result == next(label for label in USABILITY if panel.count(label) >= 2)
    elif len(votes) == 3:
        assert result == ADJUDICATE
    else:
        winners = [label for label in USABILITY if votes.count(label) >= 2]
        counts = sorted((votes.count(label) for label in winners), reverse=True)
        if not winners or (len(counts) > 1 and counts[0] == counts[1]):
            assert result == UNRESOLVED
        else:
            assert result == max(winners, key=votes.count)


@settings(max_examples=300, deadline=None)
@given(votes=st.lists(st.sampled_from(LABELS), min_size=3, max_size=3), data=st.data())
def test_panel_order_does_not_matter_and_a_decision_is_final(votes, data):
    shuffled = data.draw(st.permutations(votes))
    assert decide(votes, USABILITY) == decide(shuffled, USABILITY)
    result = decide(votes, USABILITY)
    if result in USABILITY:
        later = data.draw(st.lists(st.sampled_from(LABELS), max_size=3))
        assert decide(votes + later, USABILITY) == result  # adjudication never overturns a majority


@settings(max_examples=300, deadline=None)
@given(items=st.lists(st.tuples(st.lists(st.sampled_from(LABELS), max_size=3),
                                st.lists(st.sampled_from(LABELS), max_size=2)), min_size=1, max_size=20))
def test_decide_counts_equals_decide_item_by_item(items):
    import numpy as np

    from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, UNRESOLVED_CODE, decide_counts

    # panel votes come first; adjudication only follows a full panel
    items = [(p, a if len(p) == 3 else []) for p, a in items]
    panel_counts = np.array([[p.count(label) for label in LABELS] for p, _ in items])
    all_counts = np.array([[(p + a).count(label) for label in LABELS] for p, a in items])
    codes = decide_counts(panel_counts, all_counts, np.array([len(a) for _, a in items]),
                          np.array([label in USABILITY for label in LABELS]))
    names = {PENDING_CODE: PENDING, ADJUDICATE_CODE: ADJUDICATE, UNRESOLVED_CODE: UNRESOLVED}
    for (p, a), code in zip(items, codes):
        assert names.get(int(code), LABELS[int(code)] if code >= 0 else None) == decide(p + a, USABILITY)
