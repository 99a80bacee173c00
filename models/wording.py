"""English wording the generated texts share: the indefinite article of a phrase and a count with
its noun ("an orange top", "a uniform", "1 item", "3 queries"). One rule, used by the query writer,
the query rewriter and the demo's query phrasing.
"""
from __future__ import annotations

import re

# Words whose spelling misleads: a vowel letter said with a consonant sound, or a silent h.
_A_BEFORE = ("uni", "use", "usu", "uti", "eu", "ewe", "one", "once", "ubiq", "ure")
_AN_BEFORE = ("hour", "honest", "honou", "honor", "heir")
_IRREGULAR = {"person": "people", "query": "queries", "trajectory": "trajectories", "box": "boxes", "child": "children"}


def indefinite_article(phrase: str) -> str:
    """``"a"`` or ``"an"`` for ``phrase`` by how its first word is said (``"an"`` before a vowel
    sound: "an orange", "an hour", "a uniform", "a one-way"); ValueError for an empty phrase."""
    word = phrase.strip().lower()
    if not word:
        raise ValueError("an article needs a word after it")
    if word.startswith(_AN_BEFORE):
        return "an"
    if word.startswith(_A_BEFORE):
        return "a"
    return "an" if word[0] in "aeiou" else "a"


def with_article(phrase: str, *, capital: bool = False) -> str:
    """``phrase`` after its indefinite article: "an orange top"; ``capital``: "An orange top"."""
    article = indefinite_article(phrase)
    return f"{article.capitalize() if capital else article} {phrase}"


def plural(noun: str) -> str:
    """The plural of a noun ("queries", "boxes", "people", "items")."""
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u"):
        return noun[:-1] + "ies"
    return noun + "s"


def count(n: int, noun: str) -> str:
    """``n`` with its noun, singular for exactly one: "1 item", "0 items", "2 queries"."""
    return f"{n} {noun if n == 1 else plural(noun)}"


def normalise_tag(tag: str) -> str:
    """A tag as vocabularies store it: lower case, single spaces, no surrounding punctuation
    (``" Walking,  slowly. "`` → ``"walking, slowly"``)."""
    return re.sub(r"\s+", " ", str(tag)).strip().strip(".;:!?\"'").strip().lower()
