"""The language-model interface: queries from approved facts, relation proposals, pre-labels and
canonical tags (DESIGN 2.7-2.9, 4 ActPair).

Every backend implements five calls::

    llm = build_llm("template", {})
    gen = llm.generate_queries(facts, GenerationBudget(max_queries=3))     # from D_r^H alone
    gen.queries                                 # accepted QueryProposals, every predicate cited
    gen.rejected                                # proposals that failed models.facts.check_query, with the reason
    rel = llm.propose_relation(query, other_facts)   # Ŷ ∈ {1, 0, -1}, decisive predicates, evidence
    pre = llm.prelabel(query, {traj_id: facts, ...}) # one proposal per candidate of the pool
    tags = llm.canonicalise_tags(raw_tags, kind="action", top_k=50, max_vocabulary=12)
    rew = llm.rewrite_query(text, action_tags=[...], scene_tags=[...])  # ActPair 3.4, from the text alone


Results record what produced them (backend, model, prompt version and the SHA-256 of its text,
every raw answer, attempts, budget). Model misbehaviour never raises: an answer that is not JSON
or breaks its schema is retried within the attempt budget, a proposal that cites facts wrongly
is rejected with its reason, and a relation that cannot be read stays ``-1`` (⊥) with
``failed=True``. Bad arguments raise ``ValueError``.

:func:`match_predicates` is the rule-based relation reading shared by the template backend and
the checks: ``models.facts.predicate_support`` per predicate, plus joint support for predicates
that describe one action together (a ``speed`` predicate and a ``walks`` predicate must be
supported by overlapping facts: "walks left quickly" is not supported by a slow walk to the left
and a fast walk to the right).
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.facts import Fact, Predicate, QueryProposal, predicate_support

LABELS = (1, 0, -1)
# Predicate names that describe one action together: their supporting facts must overlap in time.
CO_TEMPORAL = (("speed", "walks"),)


@dataclass
class GenerationBudget(PlainConfig):
    """The recorded proposal budget of query generation (DESIGN 2.7)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    max_queries: int = 3                         # accepted queries wanted per trajectory
    max_attempts: int = 2                        # model answers asked for
    max_new_tokens: int = 512                    # tokens one answer may use

    def __post_init__(self) -> None:
        if self.max_queries < 1 or self.max_attempts < 1 or self.max_new_tokens < 1:
            raise ValueError(f"GenerationBudget: every field must be >= 1, got {dataclasses.asdict(self)}")


@dataclass
class Rejected:
    """A proposal that was not accepted, and why."""

    proposal: dict                               # the proposal as the model wrote it (or {"raw": text})
    reason: str                                  # what models.facts.check_query (or the schema) said


@dataclass
class Provenance:
    """What produced a result (stored with it)."""

    backend: str                                 # "template" | "transformers" | "openai"
    model: str                                   # model id or path ("" for the template)
    prompt_version: str                          # the prompt (or wording rules) version
    prompt_sha256: str                           # SHA-256 of that prompt's text (or of the rules)
    raw_texts: list[str] = field(default_factory=list)  # every answer, in order
    errors: list[str] = field(default_factory=list)     # why each unusable answer was not used
    attempts: int = 0                            # answers asked for


@dataclass
class GenerationResult:
    """Queries written for one trajectory from its approved facts."""

    queries: list[QueryProposal]                 # accepted: schema-valid, every predicate supported
    rejected: list[Rejected]                     # proposals refused, with the reason
    provenance: Provenance
    budget: dict                                 # the GenerationBudget as given

    @property
    def failed(self) -> bool:
        return not self.queries

    def to_dict(self) -> dict:
        return {"queries": [q.to_dict() for q in self.queries],
                "rejected": [dataclasses.asdict(r) for r in self.rejected],
                "provenance": dataclasses.asdict(self.provenance), "budget": self.budget, "failed": self.failed}


@dataclass
class RelationProposal:
    """A proposed relation between a query and one trajectory: Ŷ, decisive predicates, evidence."""

    label: int                                   # 1 match, 0 mismatch, -1 unresolved (⊥)
    decisive: list[Predicate]                    # the predicates that decide the label
    evidence_fact_ids: list[str]                 # the trajectory's facts that show it
    reason: str                                  # one sentence
    failed: bool                                 # True: no usable answer; the label is then -1
    provenance: Provenance

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class PreLabel:
    """A within-video pre-label for one candidate, with the facts to highlight to the reviewer."""

    trajectory_id: int
    proposal: RelationProposal

    @property
    def label(self) -> int:
        return self.proposal.label

    @property
    def highlights(self) -> list[str]:
        return self.proposal.evidence_fact_ids


@dataclass
class TagCanonicalisation:
    """Raw action or scene tags mapped onto a small canonical vocabulary (ActPair 3.2)."""

    kind: str                                    # "action" | "scene"
    vocabulary: list[str]                        # canonical names
    mapping: dict[str, str]                      # raw tag (as given) -> canonical name, for retained tags
    counts: dict[str, int]                       # raw tag -> occurrences
    dropped: list[str]                           # raw tags outside the top-K (no canonical name)
    failed: bool                                 # True: no usable answer; mapping is then empty
    provenance: Provenance

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@runtime_checkable
class LanguageBackend(Protocol):
    """What every language-model backend implements (see the module docstring)."""

    name: str
    model: str

    def generate_queries(self, facts: list[Fact], budget: GenerationBudget | None = None,
                         prompt_version: str | None = None) -> GenerationResult: ...

    def propose_relation(self, query: QueryProposal, facts: list[Fact], *,
                         covered: tuple[int, int] | None = None,
                         prompt_version: str | None = None) -> RelationProposal: ...

    def prelabel(self, query: QueryProposal, candidates: Mapping[int, list[Fact]], *,
                 covered: Mapping[int, tuple[int, int]] | None = None,
                 prompt_version: str | None = None) -> list[PreLabel]: ...

    def canonicalise_tags(self, tags: list[str], *, kind: str, top_k: int = 50, max_vocabulary: int = 16,
                          prompt_version: str | None = None) -> TagCanonicalisation: ...

    def rewrite_query(self, query_text: str, *, action_tags: list[str], scene_tags: list[str],
                      prompt_version: str | None = None): ...


# -- argument checks -----------------------------------------------------------------------------
def check_facts_argument(facts: list[Fact]) -> None:
    if not isinstance(facts, list) or not all(isinstance(f, Fact) for f in facts):
        raise ValueError("facts must be a list of models.facts.Fact")
    ids = [f.id for f in facts]
    if len(ids) != len(set(ids)):
        raise ValueError("fact ids must be unique within one trajectory's facts")


def check_query_argument(query: QueryProposal) -> None:
    if not isinstance(query, QueryProposal) or not query.predicates:
        raise ValueError("query must be a models.facts.QueryProposal with at least one predicate")


def check_tags_argument(tags: list[str], kind: str, top_k: int, max_vocabulary: int) -> None:
    if kind not in ("action", "scene"):
        raise ValueError(f"kind must be 'action' or 'scene', got {kind!r}")
    if top_k < 1 or max_vocabulary < 1:
        raise ValueError(f"top_k and max_vocabulary must be >= 1, got {top_k}, {max_vocabulary}")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags must be a list of strings (one entry per occurrence)")


# -- rule-based reading --------------------------------------------------------------------------
def co_temporal_problems(query: QueryProposal, facts: list[Fact]) -> list[str]:
    """Reasons why predicates that describe one action together cite facts that never overlap."""
    by_id = {f.id: f for f in facts}
    reasons = []
    for a, b in CO_TEMPORAL:
        pa = [p for p in query.predicates if p.name == a]
        pb = [p for p in query.predicates if p.name == b]
        for p in pa:
            for q in pb:
                fa = [by_id[i] for i in p.fact_ids if i in by_id]
                fb = [by_id[i] for i in q.fact_ids if i in by_id]
                if fa and fb and not any(x.overlaps(y) for x in fa for y in fb):
                    reasons.append(f"{a}={p.value} and {b}={q.value} cite facts from different intervals: "
                                   f"the query would fuse them into one event")
    return reasons


def match_predicates(query: QueryProposal, facts: list[Fact], *, covered: tuple[int, int] | None = None
                     ) -> tuple[int, list[Predicate], list[str], str]:
    """Label, decisive predicates, evidence fact ids and a reason, by predicate matching.

    Per predicate: supported (a known fact says it), contradicted (``predicate_support``: a known
    different value of a single-valued name; absence of an event only over ``covered``) or
    unresolved. Co-temporal pairs (``CO_TEMPORAL``) individually supported but never by
    overlapping facts are unresolved. 1 when all are supported, 0 when one is contradicted,
    -1 otherwise; the decisive predicates are all of them (1), the contradicted ones (0) or the
    unresolved ones (-1).
    """
    known = [f for f in facts if f.known]
    support = [predicate_support(p, facts, covered=covered) for p in query.predicates]
    for a, b in CO_TEMPORAL:
        ia = [i for i, p in enumerate(query.predicates) if p.name == a and support[i] == 1]
        ib = [i for i, p in enumerate(query.predicates) if p.name == b and support[i] == 1]
        for i in ia:
            for j in ib:
                fa = [f for f in known if f.name == a and f.value == query.predicates[i].value]
                fb = [f for f in known if f.name == b and f.value == query.predicates[j].value]
                if not any(x.overlaps(y) for x in fa for y in fb):
                    support[i] = -1
    if all(s == 1 for s in support):
        label, chosen = 1, list(range(len(support)))
    elif any(s == 0 for s in support):
        label, chosen = 0, [i for i, s in enumerate(support) if s == 0]
    else:
        label, chosen = -1, [i for i, s in enumerate(support) if s == -1]
    evidence: list[str] = []
    for i in chosen:
        p = query.predicates[i]
        if support[i] == 1:
            evidence += [f.id for f in known if f.name == p.name and f.value == p.value]
        elif support[i] == 0:
            evidence += [f.id for f in known if f.name == p.name and f.value != p.value]
    evidence = list(dict.fromkeys(evidence))
    decisive = [query.predicates[i] for i in chosen]
    words = ", ".join(f"{p.name}={p.value}" for p in decisive)
    reason = {1: f"every predicate is supported ({words})",
              0: f"a known fact contradicts {words}",
              -1: f"the facts leave {words} unresolved"}[label]
    return label, decisive, evidence, reason


def tally(tags: list[str]) -> dict[str, int]:
    """Occurrences per raw tag (surrounding whitespace stripped, empty tags ignored), most frequent first."""
    counts: dict[str, int] = {}
    for t in tags:
        t = t.strip()
        if t:
            counts[t] = counts.get(t, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
