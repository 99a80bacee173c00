"""ActPair's query rewrite (Sec. 3.4) as a language-backend task: the fixed template, its
deterministic filling from a query text, and the reading of a model's answer.

``Q_rew = M(Q_orig ⊕ τ_act ⊕ τ_scene)``: a backend's ``rewrite_query(text, action_tags=...,
scene_tags=...)`` sees the query *text* and the canonical action and scene vocabularies (their
names), nothing else: no construction predicate, no fact of any trajectory (DESIGN 4.4). It
chooses at most one tag of each vocabulary and writes :data:`REWRITE_TEMPLATE`. The template
backend fills it with :func:`template_rewrite`; the chat backends ask with the ``rewrite``
prompt (``prompts.py``) and read the answer with :func:`read_rewrite`.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from models.backends.llm.jsonout import load_json_object
from models.facts import EVENTS, InvalidOutput
from models.query_reading import read_query
from models.vocabulary import DIRECTION_PHRASES
from models.wording import normalise_tag, with_article

REWRITE_TEMPLATE = "The image shows [person description] wearing [clothing] [action]. The background features [scene details]."
UNKNOWN_SCENE = "an unspecified scene"
UNKNOWN_CLOTHING = "unspecified clothing"
_TEMPLATE_RE = re.compile(r"The image shows .+ wearing .+\. The background features .+\.")
_PACE = {"slow": "slowly", "fast": "quickly", "normal": "at a normal pace"}
_EVENT_VERBS = {"stands": "standing", "enters": "entering", "leaves": "leaving", "crosses": "crossing",
                "occluded_by": "occluded by", "passes_in_front_of": "passing in front of"}


def fill_template(person: str, clothing: str, action: str, scene: str) -> str:
    """:data:`REWRITE_TEMPLATE` with its four slots filled (an empty action slot is left out)."""
    action = f" {action}" if action else ""
    return f"The image shows {person} wearing {clothing}{action}. The background features {scene}."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def template_rewrite(query_text: str, *, action_tag: str | None = None, scene_tag: str | None = None) -> str:
    """The deterministic rewrite: ``models.query_reading.read_query`` of the text into
    :data:`REWRITE_TEMPLATE`.

    - person description: ``a [size] [category] [on the <position>]`` (category default
      ``person``);
    - clothing: ``a <upper_colour> top and <lower_colour> trousers`` (``unspecified clothing``
      when the text names neither);
    - action: each event read, in ``models.facts.EVENTS`` order — ``walking [pace] <direction>``
      (``moving <pace>`` without a walk), ``standing still``, ``entering from the left``,
      ``crossing person 2``, ...; the assigned canonical ``action_tag`` when the text names no
      event;
    - scene: the assigned canonical ``scene_tag``, else the text's scene word, else ``an
      unspecified scene``.

    A text that names nothing of these still gets the template (its slots unspecified); an empty
    text is a ``ValueError``.
    """
    if not isinstance(query_text, str) or not query_text.strip():
        raise ValueError("nothing to rewrite: the query text is empty")
    reading = read_query(query_text)
    values: dict[str, list[str]] = {}
    for p in reading.predicates:
        values.setdefault(p.name, []).append(p.value)

    def first(name: str) -> str | None:
        return values.get(name, [None])[0]

    noun = " ".join(x for x in (first("size"), first("category") or "person") if x)
    person = with_article(noun) + (f" on the {first('position')}" if first("position") else "")
    clothes = []
    if first("upper_colour"):
        clothes.append(with_article(f"{first('upper_colour')} top"))
    if first("lower_colour"):
        clothes.append(f"{first('lower_colour')} trousers")
    clothing = _join(clothes) if clothes else UNKNOWN_CLOTHING

    pace = _PACE.get(first("speed") or "", first("speed"))
    actions = []
    for event in EVENTS:
        for value in values.get(event, []):
            if event == "walks":
                actions.append(" ".join(x for x in ("walking", pace, DIRECTION_PHRASES.get(value, value)) if x))
            else:
                actions.append(f"{_EVENT_VERBS[event]} {value}")
    if pace and "walks" not in values:
        actions.insert(0, f"moving {pace}")
    if not actions and action_tag:
        actions.append(normalise_tag(action_tag))
    scene = normalise_tag(scene_tag) if scene_tag else (reading.scene or UNKNOWN_SCENE)
    return fill_template(person, clothing, _join(actions) if actions else "", scene)


def check_template(answer: str) -> str:
    """The rewrite in an answer, whitespace collapsed and quotes stripped; it must be the
    template's two sentences (:class:`models.facts.InvalidOutput` otherwise)."""
    text = " ".join(str(answer).strip().strip('"').split())
    if not _TEMPLATE_RE.fullmatch(text):
        raise InvalidOutput("the rewrite does not follow the template "
                            "'The image shows ... wearing .... The background features ....'", str(answer))
    return text


@dataclass
class RewriteResult:
    """One query's rewrite by a language backend."""

    text: str | None                             # the rewritten query; None when no usable answer came back
    action_tag: str | None                       # the chosen canonical action tag (None: none fits)
    scene_tag: str | None                        # the chosen canonical scene tag (None: none fits)
    failed: bool                                 # True: no usable answer (the caller keeps the original text)
    provenance: object                           # models.backends.llm.base.Provenance

    def to_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in ("text", "action_tag", "scene_tag", "failed")},
                "provenance": dataclasses.asdict(self.provenance)}


def check_rewrite_arguments(query_text: str, action_tags: Sequence[str], scene_tags: Sequence[str]
                            ) -> tuple[list[str], list[str]]:
    """The two vocabularies as lists of normalised names; ``ValueError`` for an empty text or a
    vocabulary that is not a list of non-empty strings."""
    if not isinstance(query_text, str) or not query_text.strip():
        raise ValueError("nothing to rewrite: the query text is empty")
    out = []
    for name, tags in (("action_tags", action_tags), ("scene_tags", scene_tags)):
        if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):
            raise ValueError(f"{name} must be a list of canonical tag names")
        out.append(list(dict.fromkeys(normalise_tag(t) for t in tags)))
    return out[0], out[1]


def vocabulary_block(tags: Sequence[str]) -> str:
    """The tags as the model is shown them (one JSON string per line)."""
    return "\n".join(json.dumps(t, ensure_ascii=False) for t in tags) or "(none)"


def read_rewrite(raw: str, action_tags: Sequence[str], scene_tags: Sequence[str]
                 ) -> tuple[str, str | None, str | None]:
    """``(rewrite, action tag, scene tag)`` from a model's JSON answer ``{"action": <tag or
    null>, "scene": <tag or null>, "rewrite": "<template>"}``: the tags must be names of the
    vocabularies (or null), the rewrite must follow the template. ``InvalidOutput`` otherwise."""
    data = load_json_object(raw)
    tags = []
    for key, vocabulary in (("action", action_tags), ("scene", scene_tags)):
        value = data.get(key)
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "null")):
            tags.append(None)
        elif isinstance(value, str) and normalise_tag(value) in vocabulary:
            tags.append(normalise_tag(value))
        else:
            raise InvalidOutput(f"{key} {value!r} is not a name of the {key} vocabulary", raw)
    if not isinstance(data.get("rewrite"), str):
        raise InvalidOutput('"rewrite" must be the rewritten query', raw)
    return check_template(data["rewrite"]), tags[0], tags[1]
