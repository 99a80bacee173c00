"""Reading a query text: the deterministic parse of what a query asks for, against the shared
vocabularies (``models.vocabulary``: colour names, garments, walking directions, paces, scene
words and the scene facts' phrases; the event names of ``models.facts``), into predicates that
cite no fact.

It reads the text only, so it is a model-side input wherever it is used (DESIGN 4.4): ActPair's
rewrite (``models.retrievers.actpair.rewrite``) and its described-fact comparator, and the
heuristic pixel scorer (``models.backends.vlm.heuristic_scorer``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from models.facts import EVENTS, Predicate
from models.vocabulary import (
    COLOUR_ALIASES,
    GROUND_PHRASES,
    LIGHT_PHRASES,
    LOWER_GARMENTS,
    NEAR_OBJECTS,
    SCENE_WORDS,
    UPPER_GARMENTS,
    WEATHER_PHRASES,
    near_phrase,
    object_name,
)

# -- reading a query text -------------------------------------------------------------------------
# Words of the reading, beyond the shared vocabularies. A walk verb takes the first direction word
# within WALK_REACH tokens after it; an event verb its "from / to the <side>" or "person <n>".
WALK_VERBS = frozenset({"walk", "walks", "walking", "walked", "heads", "heading", "moves", "moving", "strolls",
                        "strolling"})
STAND_WORDS = frozenset({"stands", "standing", "stand", "stops", "stopping", "stopped", "stop", "pauses", "pausing",
                         "paused", "waits", "waiting"})
ENTER_VERBS = frozenset({"enters", "entering", "entered", "enter", "appears", "appearing"})
LEAVE_VERBS = frozenset({"leaves", "leaving", "leave", "exits", "exiting", "exit"})
CROSS_VERBS = frozenset({"crosses", "crossing", "cross", "crossed"})
NEGATIONS = frozenset({"not", "never", "without", "no"})
WEARING = frozenset({"in", "wearing", "wears", "dressed"})
SIDES = ("left", "right", "top", "bottom")
DIRECTION_WORDS = {"left": "left", "leftwards": "left", "right": "right", "rightwards": "right", "towards": "towards",
                   "toward": "towards", "away": "away"}
PACE_WORDS = {"slowly": "slow", "slow": "slow", "quickly": "fast", "quick": "fast", "fast": "fast", "briskly": "fast",
              "normal": "normal"}
SIZE_WORDS = ("small", "medium", "large")
CATEGORY_NOUNS = frozenset({"man", "woman", "child", "boy", "girl", "cyclist"})
PERSON_NOUNS = CATEGORY_NOUNS | {"person", "pedestrian", "figure", "one", "someone", "people"}
POSITIONS = {"left": "left", "right": "right", "centre": "centre", "center": "centre", "middle": "centre"}
WALK_REACH = 6
_TOKEN = re.compile(r"[a-z]+(?:-[a-z]+)*|\d+")


@dataclass
class QueryReading:
    """What :func:`read_query` found in a text: predicates (citing no fact) and a scene phrase."""

    predicates: list[Predicate] = field(default_factory=list)
    scene: str | None = None                     # the first scene word of the text, if any


def read_query(text: str) -> QueryReading:
    """The deterministic reading of a query text (model-side input only; DESIGN 4.4).

    Rules, over the lower-cased words of ``text``:

    - ``upper_colour`` / ``lower_colour``: a colour name (``models.vocabulary.COLOUR_ALIASES``)
      followed within three words by an upper or a lower garment (``UPPER_GARMENTS``,
      ``LOWER_GARMENTS``), before another colour, "and" or "with" ("a red top and blue
      trousers"); a colour with no garment after it, right after "in" / "wearing" /
      "dressed" (one word between at most), names the upper-body clothing first, then the lower
      ("the one in red" is the red top);
    - ``walks``: a walk verb and the first direction word within :data:`WALK_REACH` words after it
      ("walking slowly to the left", "heading towards the camera", "away");
    - ``speed``: "slow" / "slowly" / "quick" / "quickly" / "fast" / "briskly", or "normal pace";
    - ``stands`` ("still"): "stands", "stops", "pauses", "waits", ... unless negated ("never
      stops", "without stopping");
    - ``enters`` / ``leaves``: an enter / leave verb followed by "from the <side>" / "to the
      <side>" within four words;
    - ``crosses`` / ``occluded_by`` / ``passes_in_front_of``: "crosses person 2", "occluded by
      person 2", "passes in front of person 2";
    - ``size``: small / medium / large right before a person noun; ``position``: "on the left",
      "in the centre", ...; ``category``: man / woman / child / ... (none for person, someone,
      pedestrian);
    - scene facts, as the query writer phrases them (``models.vocabulary``): ``ground`` ("on the
      grass", "on the pavement"), ``weather`` ("in the rain", "in dry weather"), ``light`` ("at
      night", "in daylight") and ``near`` ("near the bench", "near the lamp post", "near the red
      door": a door with the colour in front of it, when there is one);
    - the scene: the first of ``models.vocabulary.SCENE_WORDS`` in the text.

    Each name is read once (the first occurrence), except events, which keep every distinct value.
    """
    words = _TOKEN.findall(str(text).lower())
    found: dict[str, list[str]] = {}

    def add(name: str, value: str) -> None:
        values = found.setdefault(name, [])
        if value not in values and (name in EVENTS or not values):
            values.append(value)

    loose: list[str] = []
    for i, w in enumerate(words):
        colour = COLOUR_ALIASES.get(w)
        if colour is not None:
            after = words[i + 1:i + 4]
            upper = next((k for k, a in enumerate(after) if a in UPPER_GARMENTS), None)
            lower = next((k for k, a in enumerate(after) if a in LOWER_GARMENTS), None)
            stop = next((k for k, a in enumerate(after) if a in COLOUR_ALIASES or a in ("and", "with")), len(after))
            if upper is not None and upper < stop and (lower is None or upper < lower):
                add("upper_colour", colour)
            elif lower is not None and lower < stop:
                add("lower_colour", colour)
            elif any(b in WEARING for b in words[max(0, i - 2):i]):
                loose.append(colour)
        elif w in WALK_VERBS:
            for a in words[i + 1:i + 1 + WALK_REACH]:
                if a in DIRECTION_WORDS:
                    add("walks", DIRECTION_WORDS[a])
                    break
                if a in ("and", "then", "who", "while") or a in STAND_WORDS:
                    break
        elif w in STAND_WORDS and not (i and words[i - 1] in NEGATIONS):
            add("stands", "still")
        elif w in ENTER_VERBS | LEAVE_VERBS:
            side = _side(words[i + 1:i + 5], "from" if w in ENTER_VERBS else "to")
            if side:
                add("enters" if w in ENTER_VERBS else "leaves", side)
        elif w in CROSS_VERBS and _person(words, i + 1):
            add("crosses", _person(words, i + 1))
        elif w == "occluded" and words[i + 1:i + 2] == ["by"] and _person(words, i + 2):
            add("occluded_by", _person(words, i + 2))
        elif w in ("passes", "passing") and words[i + 1:i + 4] == ["in", "front", "of"] and _person(words, i + 4):
            add("passes_in_front_of", _person(words, i + 4))
        if w in PACE_WORDS and (w != "normal" or words[i + 1:i + 2] in (["pace"], ["speed"])):
            add("speed", PACE_WORDS[w])
        if w in SIZE_WORDS and words[i + 1:i + 2] and words[i + 1] in PERSON_NOUNS:
            add("size", w)
        if w in CATEGORY_NOUNS:
            add("category", w)
        if w in POSITIONS and i >= 2 and words[i - 1] == "the" and words[i - 2] in ("on", "in", "at"):
            if w != "middle" or words[i - 2] == "in":
                add("position", POSITIONS[w])
    for colour in loose:
        add("upper_colour" if "upper_colour" not in found else "lower_colour", colour)
    normal = " " + " ".join(words) + " "
    for name, phrases in (("ground", GROUND_PHRASES), ("weather", WEATHER_PHRASES), ("light", LIGHT_PHRASES)):
        for value, phrase in phrases.items():
            if f" {phrase} " in normal:
                add(name, value)
    for value in _NEAR_VALUES:
        if f" {near_phrase(value)} " in normal:
            add("near", value)
    predicates = [Predicate(name, value, []) for name, values in found.items() for value in values]
    scene = next((s for s in SCENE_WORDS if f" {s} " in normal), None)
    return QueryReading(predicates=predicates, scene=scene)


# "near" values a text can name, longest first, so "near the red door" is read as the red door
# and not as a door of no colour.
_NEAR_VALUES = sorted({object_name(kind) for kind in NEAR_OBJECTS}
                      | {object_name("door", colour) for colour in COLOUR_ALIASES.values()}, key=len, reverse=True)


def _side(after: list[str], preposition: str) -> str | None:
    """``"<preposition> the <side>"`` when ``after`` holds it (``"from the left"``)."""
    for k in range(len(after) - 2):
        if after[k] == preposition and after[k + 1] == "the" and after[k + 2] in SIDES:
            return f"{preposition} the {after[k + 2]}"
    return None


def _person(words: list[str], i: int) -> str | None:
    """``"person <n>"`` when ``words[i:i + 2]`` says it."""
    if words[i:i + 1] == ["person"] and words[i + 1:i + 2] and words[i + 1].isdigit():
        return f"person {words[i + 1]}"
    return None
