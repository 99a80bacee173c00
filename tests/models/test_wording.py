"""Articles and counts in generated text: "an orange top", "a uniform", "1 item"; and the query
writer says them so."""
from __future__ import annotations

import pytest

from models.backends.llm.base import GenerationBudget
from models.backends.llm.template import TemplateLLM, TemplateLLMConfig
from models.facts import Fact
from models.wording import count, indefinite_article, plural, with_article


@pytest.mark.parametrize(("phrase", "article"), [
    ("orange top", "an"), ("red top", "a"), ("umbrella", "an"), ("uniform", "a"), ("hour", "an"),
    ("one-way street", "a"), ("elderly person", "an"), ("European tourist", "a"), ("Ivory coat", "an"),
    ("yellow top", "a"), ("honest answer", "an"), ("person", "a"),
])
def test_the_article_follows_the_sound_of_the_first_word(phrase, article):
    assert indefinite_article(phrase) == article
    assert with_article(phrase) == f"{article} {phrase}"
    assert with_article(phrase, capital=True) == f"{article.capitalize()} {phrase}"


def test_an_article_needs_a_word():
    with pytest.raises(ValueError):
        indefinite_article("  ")


def test_counts_are_singular_for_exactly_one():
    assert [count(n, "item") for n in (0, 1, 2)] == ["0 items", "1 item", "2 items"]
    assert [plural(w) for w in ("query", "box", "day", "person", "match", "trajectory")] == \
        ["queries", "boxes", "days", "people", "matches", "trajectories"]


def test_the_query_writer_says_an_orange_top():
    facts = [Fact("f1", "attribute", "upper_colour", "orange", 0, 60, [10]),
             Fact("f2", "attribute", "lower_colour", "indigo", 0, 60, [10]),
             Fact("f3", "attribute", "category", "elderly person", 0, 60, [5]),
             Fact("f4", "event", "walks", "left", 0, 60, [0, 30], "interval")]
    result = TemplateLLM(TemplateLLMConfig(synonym_encoder="")).generate_queries(facts, GenerationBudget(max_queries=3))
    texts = [q.text for q in result.queries]
    assert texts[0] == "An elderly person wearing an orange top and indigo trousers."
    assert all(" a orange" not in t and " a elderly" not in t and not t.startswith("A elderly") for t in texts)
