"""Facts, descriptions, queries and predicates: the records that the describer (VLM), the query
writer (LLM), the people who review them and the retrievers all exchange (DESIGN 2.6-2.8).

A *fact* is one attribute or event of one trajectory with the frames that show it. Attributes
hold over the trajectory's visible interval unless scoped to an interval (``scope="interval"``);
events always have an interval. Frame intervals are half-open ``[start_frame, end_frame)`` in the
video's frame indices, like everywhere else. ``known=False`` means the describer (or a reviewer)
could not tell; such a fact supports nothing and contradicts nothing.

A *query* is a text and its required predicates; each predicate names the fact ids that support
it. :func:`check_query` refuses a query whose predicates cite facts that do not exist, are not
known, or do not say what the predicate says, and a predicate that fuses facts from intervals
that do not overlap into one simultaneous event (DESIGN 2.7).

:func:`predicates_label` is the automatic reading of a query against a trajectory's facts:
``1`` when every predicate is supported, ``0`` when a necessary condition is contradicted by a
known fact, ``-1`` (``⊥``) otherwise. It pre-labels and compares; it never decides a relation.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import jsonschema

# The scene facts come last: "ground" (what is under the feet: models.vocabulary.GROUNDS),
# "near" (a named scene object, "red door", or models.vocabulary.NEAR_NOTHING), "weather"
# (WEATHERS) and "light" (LIGHTS); "ground" and "near" hold over intervals, weather and light
# over the whole observed interval.
SCENE_FACTS = ("ground", "near", "weather", "light")
ATTRIBUTES = ("upper_colour", "lower_colour", "speed", "size", "position", "category", *SCENE_FACTS)
EVENTS = ("walks", "stands", "enters", "leaves", "crosses", "occluded_by", "passes_in_front_of")
# Attributes with one value at a time: a known different value over an overlapping interval
# contradicts a predicate. Events can co-occur, so only their absence over a covered interval
# contradicts (see predicates_label); so can "near" (a person may be near two objects at once)
# and "position", which are read like events.
SINGLE_VALUED = frozenset({"upper_colour", "lower_colour", "speed", "size", "category", "walks",
                           "ground", "weather", "light"})
SCOPES = ("whole", "interval")
# Events that cannot hold at the same time as each other: where one is known, the other does not
# hold (a person standing still is not walking in any direction).
EXCLUSIVE_EVENTS = {"walks": ("stands",), "stands": ("walks",)}


class InvalidOutput(ValueError):
    """A model's output (or a person's edit) that does not follow the schema; ``raw`` is kept."""

    def __init__(self, message: str, raw: str = ""):
        super().__init__(message)
        self.raw = raw


@dataclass
class Fact:
    """One attribute or event of one trajectory."""

    id: str                                      # unique within its description, e.g. "f3"
    kind: str                                    # "attribute" | "event"
    name: str                                    # one of ATTRIBUTES or EVENTS
    value: str                                   # e.g. "red", "left", "from the right"; "" when unknown
    start_frame: int                             # first frame of the supporting interval
    end_frame: int                               # frame after the last one (half-open)
    evidence_frames: list[int] = field(default_factory=list)  # frames that show it best
    scope: str = "whole"                         # "whole" trajectory or one "interval" of it
    known: bool = True                           # False: the describer could not tell

    def overlaps(self, other: Fact) -> bool:
        return self.start_frame < other.end_frame and other.start_frame < self.end_frame


@dataclass
class Description:
    """A describer's proposal for one trajectory (or its reviewed final version)."""

    appearance: str                              # one sentence about the person's look
    motion: str                                  # one sentence about what they do
    facts: list[Fact]

    def to_dict(self) -> dict:
        return asdict(self)

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON: approvals count on exactly this version (DESIGN 2.6)."""
        return hashlib.sha256(canonical_json(self.to_dict()).encode()).hexdigest()


@dataclass
class Predicate:
    """A required condition of a query, supported by the cited approved facts."""

    name: str                                    # a fact name (ATTRIBUTES or EVENTS)
    value: str                                   # the value the query requires
    fact_ids: list[str]                          # the approved facts that support it


@dataclass
class QueryProposal:
    text: str                                    # the natural-language query
    predicates: list[Predicate]

    def to_dict(self) -> dict:
        return asdict(self)


def canonical_json(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_FACT_SCHEMA = {
    "type": "object",
    "required": ["id", "kind", "name", "value", "start_frame", "end_frame"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 32},
        "kind": {"enum": ["attribute", "event"]},
        "name": {"enum": list(ATTRIBUTES + EVENTS)},
        "value": {"type": "string", "maxLength": 100},
        "start_frame": {"type": "integer", "minimum": 0},
        "end_frame": {"type": "integer", "minimum": 1},
        "evidence_frames": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 64},
        "scope": {"enum": list(SCOPES)},
        "known": {"type": "boolean"},
    },
}
DESCRIPTION_SCHEMA = {
    "type": "object",
    "required": ["appearance", "motion", "facts"],
    "additionalProperties": False,
    "properties": {
        "appearance": {"type": "string", "maxLength": 1000},
        "motion": {"type": "string", "maxLength": 1000},
        "facts": {"type": "array", "items": _FACT_SCHEMA, "maxItems": 200},
    },
}
QUERY_SCHEMA = {
    "type": "object",
    "required": ["text", "predicates"],
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "minLength": 3, "maxLength": 500},
        "predicates": {
            "type": "array", "minItems": 1, "maxItems": 20,
            "items": {
                "type": "object", "required": ["name", "value", "fact_ids"], "additionalProperties": False,
                "properties": {
                    "name": {"enum": list(ATTRIBUTES + EVENTS)},
                    "value": {"type": "string", "minLength": 1, "maxLength": 100},
                    "fact_ids": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                },
            },
        },
    },
}


def _load_json(text: str | dict) -> dict:
    if isinstance(text, dict):
        return text
    raw = text.strip()
    if raw.startswith("```"):                      # a fenced block: take its body
        raw = raw.strip("`")
        raw = raw[raw.find("\n") + 1:] if "\n" in raw else raw
        raw = raw.rsplit("```", 1)[0]
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", text) from None
    if not isinstance(data, dict):
        raise InvalidOutput("expected a JSON object", text)
    return data


def _validate(data: dict, schema: dict, raw) -> None:
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.path))
    if errors:
        where = "/".join(str(p) for p in errors[0].path) or "(top)"
        raise InvalidOutput(f"schema violation at {where}: {errors[0].message}", raw if isinstance(raw, str) else "")


def parse_description(text: str | dict, *, n_frames: int | None = None) -> Description:
    """Validate a describer's JSON output (a string or an already-parsed object)."""
    data = _load_json(text)
    _validate(data, DESCRIPTION_SCHEMA, text)
    facts = [Fact(**f) for f in data["facts"]]
    seen: set[str] = set()
    for f in facts:
        if f.id in seen:
            raise InvalidOutput(f"fact id {f.id!r} is used twice", text if isinstance(text, str) else "")
        seen.add(f.id)
        if f.end_frame <= f.start_frame:
            raise InvalidOutput(f"fact {f.id}: empty interval [{f.start_frame}, {f.end_frame})",
                                text if isinstance(text, str) else "")
        if n_frames is not None and f.end_frame > n_frames:
            raise InvalidOutput(f"fact {f.id}: interval ends at {f.end_frame}, after the video's {n_frames} frames",
                                text if isinstance(text, str) else "")
        if (f.kind == "attribute") != (f.name in ATTRIBUTES):
            raise InvalidOutput(f"fact {f.id}: {f.name!r} is not an {f.kind}", text if isinstance(text, str) else "")
        if f.known and not f.value:
            raise InvalidOutput(f"fact {f.id}: a known fact needs a value", text if isinstance(text, str) else "")
    return Description(appearance=data["appearance"], motion=data["motion"], facts=facts)


def check_query(query: QueryProposal, facts: list[Fact]) -> list[str]:
    """Reasons why ``query`` is not supported by the approved ``facts``; empty when it is."""
    by_id = {f.id: f for f in facts}
    reasons: list[str] = []
    for i, p in enumerate(query.predicates):
        cited = []
        for fid in p.fact_ids:
            f = by_id.get(fid)
            if f is None:
                reasons.append(f"predicate {i} ({p.name}={p.value}) cites fact {fid!r}, which is not an approved fact")
            elif not f.known:
                reasons.append(f"predicate {i} cites fact {fid!r}, which is unknown")
            elif f.name != p.name or f.value != p.value:
                reasons.append(f"predicate {i} ({p.name}={p.value}) cites fact {fid!r}, which says {f.name}={f.value}")
            else:
                cited.append(f)
        for a in range(len(cited)):
            for b in range(a + 1, len(cited)):
                if not cited[a].overlaps(cited[b]):
                    reasons.append(f"predicate {i} fuses facts {cited[a].id!r} and {cited[b].id!r} from different "
                                   "intervals into one event")
    return reasons


def parse_query(text: str | dict, facts: list[Fact]) -> QueryProposal:
    """Validate a query writer's JSON output and its citations against the approved facts."""
    data = _load_json(text)
    _validate(data, QUERY_SCHEMA, text)
    query = QueryProposal(text=data["text"].strip(), predicates=[Predicate(**p) for p in data["predicates"]])
    reasons = check_query(query, facts)
    if reasons:
        raise InvalidOutput("; ".join(reasons), text if isinstance(text, str) else "")
    return query


# Words that make an attribute value several values at once ("red and white", "striped"): such a
# value neither supports nor contradicts one colour.
_MULTI_VALUE_WORDS = ("multi", "striped", "stripes", "checked", "plaid", "patterned", "pattern", "mixed", "various")
_MULTI_VALUE_SEPARATORS = (" and ", "/", ",", "&", " with ", "-and-")


def is_multi_valued(value: str) -> bool:
    """Whether an attribute value names several values at once (multi-coloured, patterned)."""
    v = f" {value.strip().lower()} "
    return any(sep in v for sep in _MULTI_VALUE_SEPARATORS) or any(w in v for w in _MULTI_VALUE_WORDS)


def _intersect(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return a if b is None else b
    return (max(a[0], b[0]), min(a[1], b[1]))


def _union_covers(facts: list[Fact], span: tuple[int, int]) -> bool:
    """Whether the facts' intervals together cover ``span`` (half-open) without a gap."""
    reach = span[0]
    for f in sorted(facts, key=lambda f: f.start_frame):
        if f.start_frame > reach:
            break
        reach = max(reach, f.end_frame)
    return reach >= span[1]


def predicate_support(p: Predicate | dict, facts: list[Fact], *, covered: tuple[int, int] | None = None,
                      interval: tuple[int, int] | None = None) -> int:
    """1 supported, 0 contradicted, -1 unknown for one predicate against one trajectory's facts.

    ``covered`` is the trajectory's observed interval and ``interval`` the predicate's temporal
    scope when the query gives one (both half-open frame intervals); the *relevant interval* is
    their intersection (the trajectory's whole span when neither is given).

    Supported: a known fact with the same name and value (overlapping ``interval`` when given).
    Contradicted, for a single-valued attribute: the known facts of that name say one other value,
    not a multi-coloured or patterned one (:func:`is_multi_valued`), and they hold over the relevant
    interval: a ``whole``-scope fact when nothing is given, else facts whose intervals overlap it
    and, for ``interval``-scope facts, cover it (with the facts of an exclusive event: standing
    covers the intervals where a walker walks in no direction). Two different values (a changing attribute) or a
    multi-coloured one establish no mismatch. For an event, absence counts only when ``covered`` is
    given, the relevant interval lies within it, and the describer's facts of that name (``known``,
    none with the value) cover the relevant interval. Otherwise ``-1`` (Appendix E.3.1: omitted,
    uncertain, changing or partly observed properties do not establish a mismatch).
    """
    name, value = (p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"])
    same = [f for f in facts if f.name == name and f.known]
    if interval is not None:
        same = [f for f in same if f.start_frame < interval[1] and interval[0] < f.end_frame]
    if any(f.value == value for f in same):
        return 1
    if not same:
        return -1
    relevant = _intersect(covered, interval)
    if relevant is not None and relevant[1] <= relevant[0]:
        return -1                                    # the trajectory is not observed when the predicate applies
    if name in SINGLE_VALUED:
        values = {f.value for f in same}
        if len(values) > 1 or any(is_multi_valued(v) for v in values):
            return -1                                # a changing or multi-coloured attribute
        if relevant is None:
            return 0 if any(f.scope == "whole" for f in same) else -1
        if any(f.scope == "whole" for f in same) and interval is None:
            return 0                                 # a whole-trajectory value holds over all of it
        exclusive = [f for f in facts if f.known and f.name in EXCLUSIVE_EVENTS.get(name, ())]
        return 0 if _union_covers(same + exclusive, relevant) else -1
    if covered is None or relevant is None:
        return -1
    if interval is not None and not (covered[0] <= interval[0] and interval[1] <= covered[1]):
        return -1                                    # part of the predicate's interval was never observed
    return 0 if _union_covers(same, relevant) else -1


def predicates_label(predicates: list[Predicate | dict], facts: list[Fact], *,
                     covered: tuple[int, int] | None = None, interval: tuple[int, int] | None = None) -> int:
    """The automatic label of a query (its predicates) against a trajectory: 1, 0 or -1 (⊥)."""
    support = [predicate_support(p, facts, covered=covered, interval=interval) for p in predicates]
    if support and all(s == 1 for s in support):
        return 1
    if any(s == 0 for s in support):
        return 0
    return -1
