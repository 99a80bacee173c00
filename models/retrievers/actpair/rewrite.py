"""ActPair's query rewrite into the paper's fixed template (Sec. 3.4).

A query gets the canonical action and scene tags nearest to it and is rewritten into
:data:`REWRITE_TEMPLATE`. The embedded default, :func:`template_rewrite`, fills the template
deterministically from the query's predicates (colours and other appearance → person and
clothing; walks, stands, ... → action; the scene tag → scene); :func:`llm_rewrite` asks an LLM.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from models.facts import EVENTS, InvalidOutput, Predicate, QueryProposal
from models.retrievers.actpair.vocabulary import normalise_tag
from models.vocabulary import DIRECTION_PHRASES
from models.wording import with_article

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


def _article(phrase: str) -> str:
    """``phrase`` with its indefinite article ("a red", "an orange")."""
    return with_article(phrase)


_PACE = {"slow": "slowly", "fast": "quickly", "normal": "at a normal pace"}
_EVENT_VERBS = {"stands": "standing", "enters": "entering", "leaves": "leaving", "crosses": "crossing",
                "occluded_by": "occluded by", "passes_in_front_of": "passing in front of"}


def template_rewrite(predicates: QueryProposal | Sequence[Predicate | dict], *,
                     action_tag: str | None = None, scene_tag: str | None = None) -> str:
    """The deterministic default rewrite: the query's predicates into :data:`REWRITE_TEMPLATE`.

    - person description: ``a [size] [category] [on the <position>]`` (category default
      ``person``);
    - clothing: ``a <upper_colour> top and <lower_colour> trousers`` (``unspecified clothing``
      when neither is required);
    - action: each required event in ``models.facts.EVENTS`` order — ``walking [pace] <direction>``
      (``speed`` gives the pace; ``moving <pace>`` without a walk), ``standing still``,
      ``entering from the left``, ``crossing person 2``, ...; the assigned canonical
      ``action_tag`` when the query requires no event;
    - scene: the assigned canonical ``scene_tag`` (``an unspecified scene`` without one).
    """
    items = predicates.predicates if isinstance(predicates, QueryProposal) else list(predicates)
    preds = [(p.name, p.value) if isinstance(p, Predicate) else (p["name"], p["value"]) for p in items]
    if not preds and not action_tag and not scene_tag:
        raise ValueError("nothing to rewrite: the query has no predicates and no tags were assigned")
    values: dict[str, list[str]] = {}
    for name, value in preds:
        values.setdefault(name, []).append(str(value).strip())

    def first(name: str) -> str | None:
        return values.get(name, [None])[0]

    noun = " ".join(x for x in (first("size"), first("category") or "person") if x)
    person = _article(noun) + (f" on the {first('position')}" if first("position") else "")
    clothes = []
    if first("upper_colour"):
        clothes.append(_article(f"{first('upper_colour')} top"))
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
    scene = normalise_tag(scene_tag) if scene_tag else UNKNOWN_SCENE
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
