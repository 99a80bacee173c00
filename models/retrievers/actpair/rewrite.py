"""ActPair's query rewrite into the paper's fixed template (Sec. 3.4), from the query text alone.

The rewrite is ``Q_rew = M(Q_orig ⊕ τ_act ⊕ τ_scene)``: the query *text*, the canonical action
tag nearest to it and a scene tag. It never reads the query's construction predicates, nor any
approved fact of the gallery (DESIGN 4.4: evaluation and default search get no answer key).

:func:`read_query` (``models.query_reading``, re-exported here) is the deterministic reading of
a text against the shared vocabularies into predicates that cite no fact. The embedded default rewrite,
:func:`template_rewrite`, fills :data:`REWRITE_TEMPLATE` from that reading; :func:`llm_rewrite`
asks an LLM with the same inputs.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from models.facts import EVENTS, InvalidOutput, Predicate
from models.query_reading import QueryReading, read_query
from models.retrievers.actpair.vocabulary import normalise_tag
from models.vocabulary import DIRECTION_PHRASES
from models.wording import with_article

__all__ = ["REWRITE_TEMPLATE", "QueryReading", "fill_template", "llm_rewrite", "query_action_tag", "read_query",
           "rewrite_prompt", "template_rewrite", "text_action_tag"]

# -- query rewrite --------------------------------------------------------------------------------
REWRITE_TEMPLATE = "The image shows [person description] wearing [clothing] [action]. The background features [scene details]."
UNKNOWN_SCENE = "an unspecified scene"
UNKNOWN_CLOTHING = "unspecified clothing"


def fill_template(person: str, clothing: str, action: str, scene: str) -> str:
    """:data:`REWRITE_TEMPLATE` with its four slots filled (an empty action slot is left out)."""
    action = f" {action}" if action else ""
    return f"The image shows {person} wearing {clothing}{action}. The background features {scene}."


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# -- the template ---------------------------------------------------------------------------------
_PACE = {"slow": "slowly", "fast": "quickly", "normal": "at a normal pace"}
_EVENT_VERBS = {"stands": "standing", "enters": "entering", "leaves": "leaving", "crosses": "crossing",
                "occluded_by": "occluded by", "passes_in_front_of": "passing in front of"}


def template_rewrite(query_text: str, *, action_tag: str | None = None, scene_tag: str | None = None) -> str:
    """The deterministic default rewrite: :func:`read_query` of the text into
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


def rewrite_prompt(query_text: str, action_tag: str | None, scene_tag: str | None) -> str:
    """The instruction for an LLM rewrite ``Q_rew = M(Q_orig ⊕ τ_act ⊕ τ_scene)`` (Sec. 3.4)."""
    return ("Rewrite the pedestrian search query below into exactly this template, keeping every "
            "detail of the query that fits it and adding nothing the query and tags do not say:\n"
            f"{REWRITE_TEMPLATE}\n\nQuery: {query_text.strip()}\n"
            f"Action tag: {action_tag or 'none'}\nScene tag: {scene_tag or 'none'}\n"
            "Answer with the rewritten query only.")


def llm_rewrite(query_text: str, llm: Callable[[str], str], *, action_tag: str | None = None,
                scene_tag: str | None = None) -> str:
    """The paper's rewrite by an LLM (``prompt -> answer``); the answer must follow the template's
    two sentences (:class:`models.facts.InvalidOutput` otherwise)."""
    if not query_text or not query_text.strip():
        raise ValueError("query_text is empty")
    answer = llm(rewrite_prompt(query_text, action_tag, scene_tag))
    text = " ".join(str(answer).strip().strip('"').split())
    if not re.fullmatch(r"The image shows .+ wearing .+\. The background features .+\.", text):
        raise InvalidOutput("the rewrite does not follow the template "
                            "'The image shows ... wearing .... The background features ....'", str(answer))
    return text


def query_action_tag(predicates: Sequence[Predicate | dict]) -> str | None:
    """The raw action tag of a list of predicates: ``"<event> <value>"`` of the first event in
    ``models.facts.EVENTS`` order (``"walks left"``); None without one."""
    events = [(p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"]) for p in predicates]
    events = [(EVENTS.index(n), i, n, v) for i, (n, v) in enumerate(events) if n in EVENTS and v]
    if not events:
        return None
    _, _, name, value = min(events)
    return normalise_tag(f"{name} {value}")


def text_action_tag(query_text: str) -> str | None:
    """The raw action tag of a query text: :func:`query_action_tag` of :func:`read_query` (what
    the action vocabulary is built from and what inference assigns; DESIGN 4.4)."""
    return query_action_tag(read_query(query_text).predicates)
