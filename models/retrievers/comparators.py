"""Pairwise comparators for pivot-promote (ActPair Sec. 3.5) that read model-side inputs only.

Each is a callable ``compare(a, b) -> "a" | "b" | "tie"`` over trajectory ids with ``calls``
(comparator requests: one per comparison, what Algorithm 1 counts) and ``invalid`` (answers that
were none of a / b / tie, or scores that could not be read; the prior order stands for them):

- :class:`ScorerComparator`, the embedded default: a VLM scorer (``models.backends.vlm.scoring``;
  the heuristic pixel scorer by default) scores each candidate once against the query text, and
  the candidate with the higher ``pair_vlm_value`` (½ P(yes) + ½ the decomposed geometric mean
  / 100) wins, differences within ``tie_margin`` being ties. Its scorer requests (at most one per
  candidate) are counted apart;
- :class:`ChatPairJudge` with ``models.retrievers.actpair.pipeline.VLMComparator``: a chat VLM
  (the ``transformers`` or ``openai`` scoring backend's ``generate``) shown both candidates'
  crops and target-marked frames with the paper's comparison prompt, answering A, B or tie;
- :class:`DescriptionComparator`: the query text and each candidate's description by a
  describer backend (its reading of the candidate's own frames and boxes) in a frozen text
  space; the closer description wins (search's reranker before pipelines existed).

What reaches them is a :class:`models.backends.vlm.scoring.ScoreRequest` per candidate (the
query text, the video, frames and boxes) or a describer's output: never an approved record.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from models.backends.vlm.scoring import ScoreCounts, ScoreRequest
from models.retrievers.rerank import pair_vlm_value

PAIR_SYSTEM = ("You compare two tracked pedestrians, candidate A and candidate B, against a search query. "
               "Answer with exactly one word: A, B or tie.")
PAIR_MAX_NEW_TOKENS = 8


def _decide(sa: float, sb: float, margin: float) -> str:
    if abs(sa - sb) <= margin:
        return "tie"
    return "a" if sa > sb else "b"


class ScorerComparator:
    """Pairwise decisions from a pointwise VLM scorer (see the module docstring): ``requests``
    maps each candidate id to its :class:`ScoreRequest`."""

    def __init__(self, scorer, requests: Mapping[int, ScoreRequest], *, tie_margin: float = 0.0):
        if not callable(getattr(scorer, "score", None)):
            raise ValueError("scorer must be a models.backends.vlm scorer (with score(request))")
        if not (isinstance(tie_margin, int | float) and np.isfinite(tie_margin) and tie_margin >= 0):
            raise ValueError(f"tie_margin must be a finite number >= 0, got {tie_margin!r}")
        self.scorer, self.requests, self.tie_margin = scorer, dict(requests), float(tie_margin)
        self.calls = 0
        self.invalid = 0                         # candidates whose score had an invalid mark
        self.counts = ScoreCounts()              # the scorer requests this comparator made
        self._value: dict[int, float] = {}

    def value(self, candidate: int) -> float:
        """The candidate's ``pair_vlm_value`` (scored on first use)."""
        if candidate not in self._value:
            result = self.scorer.score(self.requests[candidate])
            self.counts.add(result)
            self.invalid += bool(result.invalid)
            self._value[candidate] = pair_vlm_value(*result.vlm_inputs())
        return self._value[candidate]

    def __call__(self, a: int, b: int) -> str:
        self.calls += 1
        return _decide(self.value(a), self.value(b), self.tie_margin)


class ChatPairJudge:
    """``judge(prompt, a, b) -> answer`` for ``VLMComparator``: one chat with candidate A's
    images, then candidate B's, then the comparison prompt, through a chat scorer's ``images``
    and ``generate`` (``models.backends.vlm.chat_scoring.ChatScorer``: transformers, openai)."""

    def __init__(self, chat_scorer, requests: Mapping[int, ScoreRequest]):
        if not (callable(getattr(chat_scorer, "generate", None)) and callable(getattr(chat_scorer, "images", None))):
            raise ValueError("the pairwise VLM comparator needs a chat scoring backend (transformers or openai)")
        self.chat, self.requests = chat_scorer, dict(requests)
        self._images: dict[int, list[dict]] = {}

    def images(self, candidate: int) -> list[dict]:
        if candidate not in self._images:
            self._images[candidate] = self.chat.images(self.requests[candidate])[0]
        return self._images[candidate]

    def __call__(self, prompt: str, a: int, b: int) -> str:
        content = [{"type": "text", "text": "Candidate A:"}, *self.images(a),
                   {"type": "text", "text": "Candidate B:"}, *self.images(b), {"type": "text", "text": prompt}]
        messages = [{"role": "system", "content": [{"type": "text", "text": PAIR_SYSTEM}]},
                    {"role": "user", "content": content}]
        return str(self.chat.generate(messages, max_new_tokens=PAIR_MAX_NEW_TOKENS))


class DescriptionComparator:
    """The closer description wins: cosine of the query text and each candidate's description
    (``descriptions``: candidate id -> the describer's text, ``""`` where it failed, which scores
    -1) in ``text_encoder``'s pooled space; differences within ``tie_margin`` are ties."""

    def __init__(self, query_text: str, descriptions: Mapping[int, str], text_encoder, *, tie_margin: float = 0.01):
        ids = list(descriptions)
        texts = [query_text] + [descriptions[t] or " " for t in ids]
        pooled = np.asarray(text_encoder.encode(texts).pooled, np.float64)                 # [1 + M, D]
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        self.closeness = {t: (float(pooled[0] @ pooled[i + 1]) if descriptions[t] else -1.0)
                          for i, t in enumerate(ids)}
        self.tie_margin = float(tie_margin)
        self.calls = 0
        self.invalid = 0

    def __call__(self, a: int, b: int) -> str:
        self.calls += 1
        return _decide(self.closeness[a], self.closeness[b], self.tie_margin)
