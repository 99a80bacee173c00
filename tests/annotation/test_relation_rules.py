"""The rules of description review (DESIGN 2.6) and of relation reviews (2.8, 2.9)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation.rules import (
    consolidate_corrections,
    description_outcome,
    relation_disputed,
    relation_final,
)

V0 = "h0"
MINOR = "usable_after_minor_correction"


@pytest.mark.parametrize("votes, expected", [
    ([("usable", None), ("usable", None)], ("pending", None)),
    ([("usable", None), ("usable", None), ("unusable", None)], ("approved", V0)),
    ([("unusable", None), ("unusable", None), ("usable", None)], ("rejected", None)),
    # two reviewers make the same correction: that exact version is approved
    ([("usable", None), (MINOR, "h1"), (MINOR, "h1")], ("approved", "h1")),
    # one approves the original, one a correction: neither version has two approvals
    ([("usable", None), (MINOR, "h1"), ("unusable", None)], ("consolidate", None)),
    # different edits approved separately never approve their union
    ([(MINOR, "h1"), (MINOR, "h2"), ("uncertain", None)], ("consolidate", None)),
    ([("uncertain", None), ("uncertain", None), ("usable", None)], ("adjudicate", None)),
    ([("uncertain", None), ("uncertain", None), ("usable", None), ("usable", None)], ("approved", V0)),
    ([("uncertain", None), ("uncertain", None), ("usable", None), ("unusable", None)], ("unresolved", None)),
])
def test_description_outcome(votes, expected):
    assert description_outcome(votes, V0) == expected


def test_a_second_round_is_not_consolidated_again():
    votes = [(MINOR, "h1"), (MINOR, "h2"), ("usable", None)]
    assert description_outcome(votes, V0, may_consolidate=False) == ("adjudicate", None)


@given(st.lists(st.sampled_from(["usable", "unusable", "uncertain", "c1", "c2", "c3"]), min_size=3, max_size=3))
def test_an_approval_counts_only_for_the_version_it_names(labels):
    # given three panel votes, corrections named c1..c3 (each its own content hash)
    votes = [(MINOR, label) if label.startswith("c") else (label, None) for label in labels]
    outcome, sha = description_outcome(votes, V0)
    if outcome == "approved":
        # then the approved version has at least two votes naming exactly it
        backing = sum(1 for label, h in votes if (label == "usable" and sha == V0) or h == sha)
        assert backing >= 2
    else:
        assert all(sum(1 for label, h in votes if (h or (V0 if label == "usable" else None)) == x) < 2
                   for x in {V0, "c1", "c2", "c3"})


def _fact(fid, value, known=True, name="upper_colour"):
    return {"id": fid, "kind": "attribute", "name": name, "value": value, "start_frame": 0, "end_frame": 10,
            "evidence_frames": [3], "scope": "whole", "known": known}


def test_consolidation_keeps_agreements_and_makes_disagreements_unknown():
    base = {"appearance": "red top", "motion": "walks left",
            "facts": [_fact("f1", "red"), _fact("f2", "blue", name="lower_colour")]}
    c1 = {"appearance": "orange top", "motion": "walks left",
          "facts": [_fact("f1", "orange"), _fact("f2", "black", name="lower_colour")]}
    c2 = {"appearance": "orange top", "motion": "walks slowly left",
          "facts": [_fact("f1", "orange"), _fact("f2", "grey", name="lower_colour"), _fact("f9", "x", name="size")]}
    out = consolidate_corrections(base, [c1, c2])
    assert out["appearance"] == "orange top"
    assert out["motion"] == ""                                      # they disagree: unknown
    facts = {f["id"]: f for f in out["facts"]}
    assert facts["f1"]["value"] == "orange" and facts["f1"]["known"]
    assert facts["f2"]["known"] is False and facts["f2"]["value"] == ""
    assert "f9" not in facts                                       # added by one correction only


def test_consolidation_needs_corrections():
    with pytest.raises(ValueError):
        consolidate_corrections({"appearance": "", "motion": "", "facts": []}, [])


@pytest.mark.parametrize("first, prelabel, disputed", [
    (1, None, False), (0, 0, False), (1, 1, False), (-1, None, True), (-1, 1, True), (0, 1, True), (1, 0, True),
    (1, -1, False),
])
def test_disputed(first, prelabel, disputed):
    assert relation_disputed(first, prelabel) is disputed


@pytest.mark.parametrize("labels, final", [
    ([1], 1), ([0], 0), ([-1], -1), ([-1, 1], 1), ([-1, 0], 0), ([0, 0], 0), ([1, 0], -1), ([0, 1], -1),
    ([1, -1], -1), ([-1, -1], -1),
])
def test_relation_final(labels, final):
    assert relation_final(labels) == final


def test_relation_final_refuses_bad_labels():
    with pytest.raises(ValueError):
        relation_final([])
    with pytest.raises(ValueError):
        relation_final([2])
