"""ActPair's inference pipeline: dual-view late fusion and pairwise reranking (Secs. 3.4-3.5).

Both views (the original query and its rewrite) are scored over the whole gallery; the top-K
(100) of each view are united, each candidate's fused score is the mean of its two views'
scores, and the top-M (10) of the union go to the reranker (:func:`dual_view_retrieve`).

**Pairwise reranking** (Sec. 3.5). ``models.retrievers.rerank.pivot_promote`` (Algorithm 1) with a
comparator ``compare(a, b) -> "a" | "b" | "tie"`` that counts its calls. What each comparator
reads (DESIGN 4.4, no answer key in the inputs):

- :class:`DescribedFactComparator`, the embedded comparator of evaluation and search: the query
  *text* read against the vocabularies (``models.query_reading.read_query``) and the
  facts a describer read from each candidate's pixels (its ``DescribeResult``s);
- :class:`VLMComparator`: any VLM callable with the paper's comparison criteria, shown what its
  caller gives it (at evaluation: the candidates' crops and frames, never their records);
- :class:`FactComparator`, the catalogue comparator: a query's construction predicates against
  the candidates' approved facts (``D_r^H``). It reads the answer key, so it serves people
  browsing the approved catalogue and construction-side checks only; evaluation, experiments and
  default search never build it.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import torch

from models.backends.vlm.base import DescribeResult
from models.facts import Fact, Predicate, QueryProposal, predicate_support
from models.query_reading import read_query
from models.retrievers.rerank import pivot_promote


# -- dual-view retrieval --------------------------------------------------------------------------
@dataclass
class DualViewResult:
    """The fused top-M of dual-view retrieval, per query."""

    indices: torch.Tensor                        # [Q, M] gallery indices, best fused score first
    scores: torch.Tensor                         # [Q, M] fused scores ½ (S_orig + S_rew)
    union_size: torch.Tensor                     # [Q] size of C_orig ∪ C_rew


def _top(scores: torch.Tensor, k: int) -> torch.Tensor:
    """Indices ``[Q, k]`` of the k best scores per row, ties by the lower index."""
    return torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]


@torch.no_grad()
def dual_view_retrieve(s_orig: torch.Tensor, s_rew: torch.Tensor, top_k: int = 100,
                       top_m: int = 10) -> DualViewResult:
    """Parallel late fusion (Eq. 7): per query, the union of the top-``top_k`` of the original
    view's scores ``s_orig [Q, N]`` and of the rewritten view's ``s_rew [Q, N]``, re-sorted by the
    mean of both views' scores, cut to the top ``top_m``. Both views score the whole gallery, so
    every union member has both scores. Ties go to the lower gallery index. A gallery smaller than
    ``top_k`` (or ``top_m``) is taken whole."""
    if s_orig.shape != s_rew.shape or s_orig.ndim != 2:
        raise ValueError(f"both views must be [Q, N] score matrices, got {list(s_orig.shape)} and {list(s_rew.shape)}")
    if not (isinstance(top_k, int) and isinstance(top_m, int) and 1 <= top_m <= top_k):
        raise ValueError(f"need 1 <= top_m <= top_k, got top_m={top_m!r}, top_k={top_k!r}")
    if not (torch.isfinite(s_orig).all() and torch.isfinite(s_rew).all()):
        raise ValueError("scores must be finite")
    union, fused = dual_view_union(s_orig, s_rew, top_k)                     # [Q, N] each
    ranked = _top(fused.masked_fill(~union, -math.inf), min(top_m, s_orig.shape[1]))  # [Q, M]
    return DualViewResult(indices=ranked, scores=fused.gather(1, ranked), union_size=union.sum(dim=1))


def dual_view_union(s_orig: torch.Tensor, s_rew: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``C_orig ∪ C_rew`` as a mask ``[Q, N]`` (the top-``top_k`` of each view, ties to the lower
    index) and the fused scores ``½ (S_orig + S_rew)`` ``[Q, N]`` of Eq. 7."""
    q, n = s_orig.shape
    k = min(top_k, n)
    union = torch.zeros(q, n, dtype=torch.bool, device=s_orig.device)        # [Q, N]
    union.scatter_(1, _top(s_orig, k), True)
    union.scatter_(1, _top(s_rew, k), True)
    return union, (s_orig + s_rew) / 2                                       # [Q, N], [Q, N]


# -- pairwise comparators and reranking -----------------------------------------------------------
class _SupportComparator:
    """Which of two candidates' facts support more of a list of predicates
    (``models.facts.predicate_support``)?

    ``compare(a, b)``: more supported predicates wins; with as many, fewer contradicted ones wins;
    otherwise ``"tie"``. A candidate without an entry in ``facts`` has none (every predicate is
    unknown for it); ``covered`` optionally maps a candidate to its observed interval, so that
    absent events count as contradictions. ``calls`` counts comparisons."""

    def __init__(self, predicates: Sequence[Predicate | dict], facts: Mapping[Hashable, Sequence[Fact]],
                 covered: Mapping[Hashable, tuple[int, int]] | None = None):
        self.predicates = list(predicates)
        self.facts = facts
        self.covered = covered or {}
        self.calls = 0
        self._support: dict[Hashable, tuple[int, int]] = {}

    def support(self, candidate: Hashable) -> tuple[int, int]:
        """(supported, contradicted) predicate counts of one candidate."""
        if candidate not in self._support:
            facts = list(self.facts.get(candidate, []))
            s = [predicate_support(p, facts, covered=self.covered.get(candidate)) for p in self.predicates]
            self._support[candidate] = (s.count(1), s.count(0))
        return self._support[candidate]

    def __call__(self, a: Hashable, b: Hashable) -> str:
        self.calls += 1
        (sa, ca), (sb, cb) = self.support(a), self.support(b)
        if sa != sb:
            return "a" if sa > sb else "b"
        if ca != cb:
            return "a" if ca < cb else "b"
        return "tie"


class DescribedFactComparator(_SupportComparator):
    """The embedded comparator of evaluation and search (DESIGN 4.4): the predicates
    :func:`read_query` finds in the query *text*, against the facts a describer read from each
    candidate's pixels and boxes.

    ``described`` maps a candidate to its ``models.backends.vlm.DescribeResult`` (the describer's
    output, e.g. ``models.retrievers.described.describe_tracks``); a failed description, or a
    candidate without one, has no facts. Anything else (an approved description, a list of facts
    of unknown origin) is refused with ``ValueError``. A text in which nothing is read makes every
    comparison a tie (the first-stage order stands)."""

    def __init__(self, query_text: str, described: Mapping[Hashable, DescribeResult],
                 covered: Mapping[Hashable, tuple[int, int]] | None = None):
        if not isinstance(query_text, str) or not query_text.strip():
            raise ValueError("a DescribedFactComparator needs the query text")
        facts: dict[Hashable, list[Fact]] = {}
        for candidate, result in described.items():
            if not isinstance(result, DescribeResult):
                raise ValueError(f"candidate {candidate!r}: expected the describer's DescribeResult, got "
                                 f"{type(result).__name__} (approved records are not comparator inputs)")
            facts[candidate] = [] if result.failed or result.description is None else list(result.description.facts)
        super().__init__(read_query(query_text).predicates, facts, covered)


class FactComparator(_SupportComparator):
    """The catalogue comparator: a query's construction predicates against the candidates'
    approved facts (``facts`` maps a candidate to its ``D_r^H``). Both are the answer key, so this
    comparator is for people browsing the approved catalogue and for construction-side checks;
    evaluation, experiments and default search use :class:`DescribedFactComparator`."""

    def __init__(self, predicates: QueryProposal | Sequence[Predicate | dict],
                 facts: Mapping[Hashable, Sequence[Fact]],
                 covered: Mapping[Hashable, tuple[int, int]] | None = None):
        predicates = list(predicates.predicates if isinstance(predicates, QueryProposal) else predicates)
        if not predicates:
            raise ValueError("a FactComparator needs the query's predicates")
        super().__init__(predicates, facts, covered)


COMPARISON_CRITERIA = ("the primary action", "the target person", "clothing", "object interaction",
                       "secondary people", "scene and background", "spatial relationships")


def _criteria() -> str:
    return ", ".join(COMPARISON_CRITERIA[:-1]) + " and " + COMPARISON_CRITERIA[-1]


def comparison_prompt(query_text: str) -> str:
    """The pairwise instruction of Sec. 3.5 for a VLM shown candidate A and candidate B together:
    the original query, the fixed criteria, contradictions and missing details, one decision in
    {A, B, tie}."""
    return (f"Query: {query_text.strip()}\n"
            "Candidate A and candidate B are shown above. Compare the two candidates against the query along "
            f"{_criteria()}, together with any explicit contradiction or missing detail relative to the query. "
            "Which candidate is better supported by the query? Answer with exactly one word: A, B, or tie when "
            "neither is.")


def point_prompt(query_text: str) -> str:
    """The pointwise instruction of Table 5's baseline for a VLM shown one candidate: the same
    criteria, one absolute score from 0 to 100 in one answer."""
    return (f"Query: {query_text.strip()}\n"
            "One candidate is shown above. Judge it against the query along "
            f"{_criteria()}, together with any explicit contradiction or missing detail relative to the query. "
            "How well is the candidate supported by the query? Answer with exactly one integer from 0 (contradicted) "
            "to 100 (fully supported).")


def parse_decision(answer: str) -> str | None:
    """``"a"``, ``"b"`` or ``"tie"`` from a comparator's answer (``A``, ``Candidate B``,
    ``{"decision": "tie"}``, ``neither``, ...); None when it says none of them."""
    text = str(answer).strip()
    if text.startswith("{"):
        try:
            text = str(json.loads(text).get("decision", ""))
        except (json.JSONDecodeError, AttributeError):
            return None
    words = re.sub(r"[^a-z ]", " ", text.lower()).split()
    words = [w for w in words if w not in {"candidate", "image", "option", "answer", "the", "is"}]
    if len(words) != 1:
        return None
    return {"a": "a", "b": "b", "tie": "tie", "neither": "tie", "equal": "tie"}.get(words[0])


class VLMComparator:
    """A VLM as the pairwise comparator: ``judge(prompt, a, b) -> answer`` sees the comparison
    prompt and the two candidates (whatever the caller's judge needs: crops, frame paths, ids; at
    evaluation and search only model-side inputs, never a candidate's approved records).

    Answers are read with :func:`parse_decision`; an answer that is none of a / b / tie counts as
    ``"tie"`` (the prior order stands) and in ``invalid``. ``calls`` counts comparisons."""

    def __init__(self, judge: Callable[[str, Hashable, Hashable], str], query_text: str):
        if not callable(judge):
            raise ValueError("judge must be callable: judge(prompt, a, b) -> answer")
        self.judge = judge
        self.prompt = comparison_prompt(query_text)
        self.calls = 0
        self.invalid = 0

    def __call__(self, a: Hashable, b: Hashable) -> str:
        self.calls += 1
        decision = parse_decision(self.judge(self.prompt, a, b))
        if decision is None:
            self.invalid += 1
            return "tie"
        return decision


def pairwise_rerank(result: DualViewResult, comparator_for: Callable[[int], Callable[[int, int], str]]
                    ) -> tuple[list[list[int]], int]:
    """Pivot-promote (Algorithm 1) over each query's fused top-M. ``comparator_for(q)`` gives the
    comparator of query ``q`` (on gallery indices). Returns the reranked gallery indices per query
    and the total number of comparator calls."""
    reranked, total = [], 0
    for q, candidates in enumerate(result.indices.tolist()):
        order, n_calls = pivot_promote(candidates, comparator_for(q))
        reranked.append(list(order))
        total += int(n_calls)
    return reranked, total
