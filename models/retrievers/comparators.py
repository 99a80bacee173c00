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
  space; the closer description wins (search's reranker before pipelines existed);
- :class:`PairwiseHeadComparator`: ActPair's trained Bradley–Terry pairwise head
  (``models.retrievers.actpair.pairwise_head``) over the query embedding and both candidates'
  embeddings at once, the CPU stand-in for the paper's VLM comparator.

:class:`ScorerComparator` and :class:`DescriptionComparator` decide a pair by comparing two
per-candidate values (``POINTWISE_DERIVED``): pivot-promote over them puts the best pointwise
value first (R@1 is the pointwise sort's), so they cannot stand for pairwise comparison in a
pairwise-versus-pointwise table.
:class:`PairwiseHeadComparator` and the VLM comparator see both candidates together.

What reaches them is a :class:`models.backends.vlm.scoring.ScoreRequest` per candidate (the
query text, the video, frames and boxes) or a describer's output: never an approved record.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import torch

from models.backends.vlm.scoring import ScoreCounts, ScoreRequest
from models.retrievers.rerank import pair_vlm_value

PAIR_SYSTEM = ("You compare two tracked pedestrians, candidate A and candidate B, against a search query. "
               "Answer with exactly one word: A, B or tie.")
PAIR_MAX_NEW_TOKENS = 8
POINT_SYSTEM = ("You judge one tracked pedestrian against a search query. "
                "Answer with exactly one integer from 0 to 100.")
NEUTRAL_POINT = 50.0                             # a pointwise answer that is not a 0-100 integer
POINTWISE_DERIVED = ("scorer", "description")   # comparator kinds whose decisions compare per-candidate values


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


class ChatPointJudge:
    """Table 5's pointwise baseline on a chat VLM: one chat per candidate with its images and
    ``models.retrievers.actpair.pipeline.point_prompt`` (the comparator's criteria), answered by
    one integer 0–100 (one model request per candidate; an answer that is not one counts in
    ``invalid`` and scores :data:`NEUTRAL_POINT`)."""

    def __init__(self, chat_judge: ChatPairJudge):
        self.judge = chat_judge
        self.calls = 0
        self.invalid = 0

    def scores(self, query_text: str, candidates: list[int]) -> np.ndarray:
        from models.retrievers.actpair.pipeline import point_prompt

        out = []
        for t in candidates:
            content = [*self.judge.images(t), {"type": "text", "text": point_prompt(query_text)}]
            messages = [{"role": "system", "content": [{"type": "text", "text": POINT_SYSTEM}]},
                        {"role": "user", "content": content}]
            self.calls += 1
            out.append(parse_point(self.judge.chat.generate(messages, max_new_tokens=PAIR_MAX_NEW_TOKENS)))
        self.invalid += sum(v is None for v in out)
        return np.array([NEUTRAL_POINT if v is None else v for v in out], np.float64)         # [M]


def parse_point(answer) -> float | None:
    """The 0–100 integer of a pointwise answer (``"87"``, ``"Score: 40."``); None when the answer
    holds no single number in 0..100."""
    numbers = re.findall(r"-?\d+(?:\.\d+)?", str(answer))
    if len(numbers) != 1 or not 0 <= float(numbers[0]) <= 100:
        return None
    return float(numbers[0])


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


class PairwiseHeadComparator:
    """``compare(a, b)`` by a trained :class:`models.retrievers.actpair.pairwise_head.PairwiseHead`:
    ``"a"`` when ``P(a ≻ b | q) > ½ + tie_margin``, ``"b"`` below ``½ - tie_margin``, else
    ``"tie"``. ``query`` is the query text's unit embedding ``[d]`` and ``vectors`` maps each
    candidate id to its unit trajectory embedding ``[d]`` (the model's own, model-side only)."""

    def __init__(self, head, query: np.ndarray, vectors: Mapping[int, np.ndarray], *, tie_margin: float = 0.0):
        if not callable(getattr(head, "pair_logits", None)):
            raise ValueError("the pairwise-head comparator needs a trained PairwiseHead")
        if not (isinstance(tie_margin, int | float) and 0 <= tie_margin < 0.5):
            raise ValueError(f"tie_margin must be in [0, 0.5), got {tie_margin!r}")
        self.head, self.tie_margin = head, float(tie_margin)
        device = next(head.parameters()).device
        self.query = torch.as_tensor(np.asarray(query, np.float32), device=device)[None, :]       # [1, d]
        self.vectors = {int(t): torch.as_tensor(np.asarray(v, np.float32), device=device)[None, :]
                        for t, v in vectors.items()}
        self.calls = 0
        self.invalid = 0

    def probability(self, a: int, b: int) -> float:
        """``P(a ≻ b | q)`` from the head (eval mode)."""
        was_training = self.head.training
        self.head.eval()
        with torch.inference_mode():
            logit = self.head.pair_logits(self.query, self.vectors[int(a)], self.vectors[int(b)])
        self.head.train(was_training)
        return float(torch.sigmoid(logit.float())[0])

    def __call__(self, a: int, b: int) -> str:
        self.calls += 1
        p = self.probability(a, b)
        if abs(p - 0.5) <= self.tie_margin:
            return "tie"
        return "a" if p > 0.5 else "b"


def head_point_scores(head, query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The pointwise twin's absolute score ``[M]`` of each candidate row of ``vectors [M, d]``
    alone against the query embedding ``[d]``: one request per candidate."""
    device = next(head.parameters()).device
    v = torch.as_tensor(np.asarray(vectors, np.float32), device=device)                           # [M, d]
    q = torch.as_tensor(np.asarray(query, np.float32), device=device)[None, :].expand_as(v)       # [M, d]
    was_training = head.training
    head.eval()
    with torch.inference_mode():
        scores = head.point_scores(q, v)
    head.train(was_training)
    return scores.float().cpu().numpy().astype(np.float64)                                         # [M]
