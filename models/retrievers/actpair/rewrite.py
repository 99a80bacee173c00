"""ActPair's query rewrite (Sec. 3.4) at inference: the query text and the canonical action and
scene vocabularies through a language backend, nothing else.

``Q_rew = M(Q_orig ⊕ τ_act ⊕ τ_scene)``: :func:`rewrite_queries` hands each query *text* and the
names of the two vocabularies to a ``models.backends.llm`` backend's ``rewrite_query`` (the
template backend, ``models.backends.llm.rewrite.template_rewrite``, is the embedded default). It
never reads a query's construction predicates, nor any approved fact of the gallery (DESIGN 4.4:
evaluation and default search get no answer key). A backend that gives no usable rewrite leaves
the original text as the rewritten view, and the failure is counted.

:func:`text_action_tag` is the raw action tag of a text's own reading (``read_query``), what the
action vocabulary is built from.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from models.backends.llm.rewrite import (
    REWRITE_TEMPLATE,
    RewriteResult,
    check_template,
    fill_template,
    template_rewrite,
)
from models.query_reading import QueryReading, read_query
from models.retrievers.actpair.vocabulary import first_event_tag

__all__ = ["REWRITE_TEMPLATE", "QueryReading", "RewriteReport", "fill_template", "llm_rewrite", "read_query",
           "rewrite_prompt", "rewrite_queries", "template_rewrite", "text_action_tag"]


def rewrite_prompt(query_text: str, action_tag: str | None, scene_tag: str | None) -> str:
    """A one-turn instruction for a ``prompt -> answer`` callable (:func:`llm_rewrite`) whose tags
    were chosen already."""
    return ("Rewrite the pedestrian search query below into exactly this template, keeping every "
            "detail of the query that fits it and adding nothing the query and tags do not say:\n"
            f"{REWRITE_TEMPLATE}\n\nQuery: {query_text.strip()}\n"
            f"Action tag: {action_tag or 'none'}\nScene tag: {scene_tag or 'none'}\n"
            "Answer with the rewritten query only.")


def llm_rewrite(query_text: str, llm: Callable[[str], str], *, action_tag: str | None = None,
                scene_tag: str | None = None) -> str:
    """The rewrite by a ``prompt -> answer`` callable; the answer must follow the template's two
    sentences (:class:`models.facts.InvalidOutput` otherwise)."""
    if not query_text or not query_text.strip():
        raise ValueError("query_text is empty")
    return check_template(llm(rewrite_prompt(query_text, action_tag, scene_tag)))


@dataclass
class RewriteReport:
    """The rewritten view of a list of queries and what producing it took."""

    texts: list[str]                             # [Q] the rewrites (the original text where one failed)
    results: list[RewriteResult]                 # [Q] the backend's results
    requests: int                                # rewrite requests made (one per query)
    failed: int                                  # requests without a usable rewrite

    def counts(self) -> dict:
        return {"requests": self.requests, "failed": self.failed,
                "model_calls": sum(int(r.provenance.attempts) for r in self.results)}


def rewrite_queries(texts: Sequence[str], llm, *, action_tags: Sequence[str] = (),
                    scene_tags: Sequence[str] = ()) -> RewriteReport:
    """Each query text rewritten by the language backend ``llm`` (its ``rewrite_query``) given
    the canonical ``action_tags`` and ``scene_tags`` names, in order."""
    if not callable(getattr(llm, "rewrite_query", None)):
        raise ValueError("llm must be a models.backends.llm language backend (with rewrite_query)")
    results = [llm.rewrite_query(t, action_tags=list(action_tags), scene_tags=list(scene_tags)) for t in texts]
    out = [r.text if not r.failed and r.text else t for r, t in zip(results, texts, strict=True)]
    return RewriteReport(out, results, len(results), sum(bool(r.failed or not r.text) for r in results))


def text_action_tag(query_text: str) -> str | None:
    """The raw action tag of a query text: the first event of :func:`read_query`'s reading of it
    (``vocabulary.first_event_tag``; what the action vocabulary is built from, DESIGN 4.4)."""
    return first_event_tag((p.name, p.value) for p in read_query(query_text).predicates)
