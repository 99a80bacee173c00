"""Fact, description and query records: schemas, citations, interval fusion, automatic labels."""
from __future__ import annotations

import json

import pytest

from models.facts import (
    Fact,
    InvalidOutput,
    Predicate,
    QueryProposal,
    check_query,
    parse_description,
    parse_query,
    predicate_support,
    predicates_label,
)


def fact(fid, name, value, start=0, end=50, kind=None, known=True):
    kind = kind or ("attribute" if name in ("upper_colour", "lower_colour", "speed", "size", "position") else "event")
    return {"id": fid, "kind": kind, "name": name, "value": value, "start_frame": start, "end_frame": end,
            "evidence_frames": [start], "scope": "whole", "known": known}


def description(*facts):
    return {"appearance": "a person in red", "motion": "walks left", "facts": list(facts)}


def test_a_valid_description_parses_from_text_and_fenced_text():
    body = description(fact("f1", "upper_colour", "red"), fact("f2", "walks", "left", 10, 40))
    d = parse_description(json.dumps(body), n_frames=100)
    assert [f.id for f in d.facts] == ["f1", "f2"]
    fenced = "```json\n" + json.dumps(body) + "\n```"
    assert parse_description(fenced).content_hash() == d.content_hash()


@pytest.mark.parametrize("text, message", [
    ("not json at all", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"appearance": "x", "motion": "y"}), "schema violation"),
    (json.dumps(description(fact("f1", "hair", "red"))), "schema violation"),
    (json.dumps(description(fact("f1", "upper_colour", "red"), fact("f1", "lower_colour", "blue"))), "used twice"),
    (json.dumps(description(fact("f1", "upper_colour", "red", 10, 10))), "empty interval"),
    (json.dumps(description(fact("f1", "upper_colour", "red", 0, 500))), "after the video"),
    (json.dumps(description(fact("f1", "walks", "left", kind="attribute"))), "is not an attribute"),
    (json.dumps(description(fact("f1", "upper_colour", ""))), "needs a value"),
])
def test_bad_describer_output_is_refused_and_the_raw_text_kept(text, message):
    with pytest.raises(InvalidOutput, match=message) as refused:
        parse_description(text, n_frames=100)
    assert refused.value.raw == text


def test_content_hash_changes_with_any_edit():
    a = parse_description(description(fact("f1", "upper_colour", "red")))
    b = parse_description(description(fact("f1", "upper_colour", "orange")))
    assert a.content_hash() != b.content_hash()
    assert a.content_hash() == parse_description(description(fact("f1", "upper_colour", "red"))).content_hash()


FACTS = [Fact(**fact("f1", "upper_colour", "red")), Fact(**fact("f2", "walks", "left", 0, 20)),
         Fact(**fact("f3", "stands", "still", 30, 50)), Fact(**fact("f4", "lower_colour", "", known=False))]


def test_queries_must_cite_existing_known_matching_facts():
    ok = QueryProposal("a person in red walking left", [Predicate("upper_colour", "red", ["f1"]),
                                                        Predicate("walks", "left", ["f2"])])
    assert check_query(ok, FACTS) == []
    reasons = check_query(QueryProposal("x", [Predicate("upper_colour", "red", ["f9"]),
                                              Predicate("lower_colour", "blue", ["f4"]),
                                              Predicate("upper_colour", "blue", ["f1"])]), FACTS)
    assert len(reasons) == 3
    assert "not an approved fact" in reasons[0] and "unknown" in reasons[1] and "says upper_colour=red" in reasons[2]


def test_facts_from_different_intervals_are_never_fused():
    fused = QueryProposal("walks left while standing", [Predicate("walks", "left", ["f2", "f3"])])
    assert any("different intervals" in r for r in check_query(fused, [*FACTS, Fact(**fact("f3", "walks", "left", 30, 50))]))


def test_parse_query_refuses_with_reasons():
    text = json.dumps({"text": "a person in red", "predicates": [{"name": "upper_colour", "value": "red",
                                                                   "fact_ids": ["nope"]}]})
    with pytest.raises(InvalidOutput, match="not an approved fact"):
        parse_query(text, FACTS)
    with pytest.raises(InvalidOutput, match="schema violation"):
        parse_query(json.dumps({"text": "a person", "predicates": []}), FACTS)


def test_predicate_support_and_labels():
    assert predicate_support({"name": "upper_colour", "value": "red"}, FACTS) == 1
    assert predicate_support({"name": "upper_colour", "value": "blue"}, FACTS) == 0      # single-valued
    assert predicate_support({"name": "lower_colour", "value": "blue"}, FACTS) == -1     # unknown fact
    assert predicate_support({"name": "enters", "value": "from the left"}, FACTS) == -1   # absence proves nothing
    assert predicate_support({"name": "stands", "value": "still"}, FACTS) == 1
    assert predicates_label([{"name": "upper_colour", "value": "red"}, {"name": "walks", "value": "left"}], FACTS) == 1
    assert predicates_label([{"name": "upper_colour", "value": "red"}, {"name": "walks", "value": "right"}], FACTS) == 0
    assert predicates_label([{"name": "upper_colour", "value": "red"}, {"name": "enters", "value": "x"}], FACTS) == -1
    assert predicates_label([], FACTS) == -1


def _f(fid, name, value, start, end, scope="interval"):
    return Fact(**{**fact(fid, name, value, start, end), "scope": scope})


def test_a_changing_or_multicoloured_attribute_is_no_mismatch():
    changing = [_f("a", "upper_colour", "red", 0, 40), _f("b", "upper_colour", "blue", 40, 80)]
    assert predicate_support({"name": "upper_colour", "value": "green"}, changing, covered=(0, 80)) == -1
    assert predicate_support({"name": "upper_colour", "value": "blue"}, changing, covered=(0, 80)) == 1
    striped = [_f("a", "upper_colour", "red and white", 0, 80, "whole")]
    assert predicate_support({"name": "upper_colour", "value": "red"}, striped) == -1
    assert predicate_support({"name": "upper_colour", "value": "green"}, striped, covered=(0, 80)) == -1
    plain = [_f("a", "upper_colour", "white", 0, 80, "whole")]
    assert predicate_support({"name": "upper_colour", "value": "red"}, plain) == 0


def test_a_mismatch_needs_overlap_and_coverage_of_the_relevant_interval():
    walks = [_f("w", "walks", "left", 10, 40)]
    # observed walking left on [10, 40) only: walking right elsewhere is not refuted
    assert predicate_support({"name": "walks", "value": "right"}, walks, covered=(0, 100)) == -1
    assert predicate_support({"name": "walks", "value": "right"}, walks, covered=(10, 40)) == 0
    # a predicate scoped to [50, 80) is not refuted by a value seen on [0, 40)
    blue = [_f("c", "upper_colour", "blue", 0, 40)]
    assert predicate_support({"name": "upper_colour", "value": "red"}, blue, covered=(0, 100), interval=(50, 80)) == -1
    assert predicate_support({"name": "upper_colour", "value": "red"}, blue, covered=(0, 100), interval=(5, 30)) == 0
    # an absent event: the describer's facts of that kind must cover the observed interval
    crosses = [_f("x", "crosses", "the road", 0, 20)]
    assert predicate_support({"name": "crosses", "value": "the square"}, crosses, covered=(0, 100)) == -1
    full = [_f("x", "crosses", "the road", 0, 60), _f("y", "crosses", "the road", 60, 100)]
    assert predicate_support({"name": "crosses", "value": "the square"}, full, covered=(0, 100)) == 0
    # part of the predicate's interval was never observed
    assert predicate_support({"name": "crosses", "value": "the square"}, full, covered=(0, 100), interval=(90, 120)) == -1
    assert predicates_label([{"name": "walks", "value": "right"}], walks, covered=(0, 100)) == -1
