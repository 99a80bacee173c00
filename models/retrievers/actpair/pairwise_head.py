"""A trained Bradley–Terry pairwise head over ActPair's frozen embeddings: the CPU comparator of
pivot-promote (ActPair Sec. 3.5, Table 5).

The paper's comparator is a VLM shown both candidates at once. Without one, the head is trained to
make the same kind of decision: the query embedding and *both* candidates' embeddings in, the
probability that candidate A is better supported by the query than candidate B out. Its logit is
``g(q, a, b) - g(q, b, a)`` with ``g`` an MLP over ``[q⊙a, q⊙b, a⊙b, |a-b|, q]``, so
``P(a ≻ b) = 1 - P(b ≻ a)`` holds by construction while each decision reads the pair jointly: it
is not a difference of two per-candidate scores, and its preferences need not be transitive.

The seed's pointwise baseline is "one absolute score per candidate from the same model": its
twin here, :attr:`PairwiseHead.point`, is an MLP over ``[q⊙a, q, a]`` that scores one candidate
alone. Both are trained by the trained retriever's post-training stage on the same pairs with the
same loss, steps and seed, so Table 5's pairwise − pointwise difference isolates seeing the pair:

- pairs (:func:`preference_pairs`): per training query, every verified positive against each of
  its ``n_negatives`` verified negatives the frozen first stage scores highest (unknown pairs are
  never negatives, pseudo-labels are not read);
- loss (:func:`bradley_terry_loss`): ``-log σ(logit(positive ≻ negative))`` averaged over pairs,
  the Bradley–Terry likelihood of the verified preferences.

Evaluation and search read the query text's embedding and the gallery's embeddings only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig


@dataclass
class PairwiseHeadConfig(PlainConfig):
    """The ``pairwise`` section of ``ActPairRetrieverConfig``: whether the trained retriever also
    trains the pairwise head (and its pointwise twin), their width and their training."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    enabled: bool = False                        # train the heads after the dual encoder (they join the checkpoint)
    hidden: int = 128                            # MLP width of both heads
    n_negatives: int = 8                         # hardest verified negatives per training query
    steps: int = 300                             # optimizer steps
    batch_size: int = 128                        # pairs per step (drawn with replacement, seeded)
    lr: float = 1e-3                             # AdamW learning rate
    weight_decay: float = 0.01                   # AdamW weight decay
    dropout: float = 0.1                         # dropout inside both MLPs while training

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.enabled, bool):
            problems.append(f"enabled must be true or false, got {self.enabled!r}")
        for name in ("hidden", "n_negatives", "steps", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                problems.append(f"{name} must be a positive integer, got {value!r}")
        if not (isinstance(self.lr, int | float) and self.lr > 0):
            problems.append(f"lr must be > 0, got {self.lr!r}")
        if not (isinstance(self.weight_decay, int | float) and self.weight_decay >= 0):
            problems.append(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if not (isinstance(self.dropout, int | float) and 0 <= self.dropout < 1):
            problems.append(f"dropout must be in [0, 1), got {self.dropout!r}")
        if problems:
            raise ValueError("ActPairRetrieverConfig.pairwise: " + "; ".join(problems))


def _mlp(d_in: int, hidden: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, hidden),
                         nn.GELU(), nn.Linear(hidden, 1))


class PairwiseHead(nn.Module):
    """The pairwise head ``joint`` and its pointwise twin ``point`` over ``d``-wide embeddings."""

    def __init__(self, d: int, config: PairwiseHeadConfig):
        super().__init__()
        self.d = int(d)
        self.joint = _mlp(5 * self.d, config.hidden, config.dropout)
        self.point = _mlp(3 * self.d, config.hidden, config.dropout)

    def _check(self, *xs: torch.Tensor) -> None:
        shape = xs[0].shape
        if any(x.shape != shape for x in xs) or len(shape) != 2 or shape[1] != self.d:
            raise ValueError(f"query and candidates must be [B, {self.d}] each, got {[list(x.shape) for x in xs]}")

    def _g(self, q: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.joint(torch.cat([q * a, q * b, a * b, (a - b).abs(), q], dim=-1)).squeeze(-1)

    def pair_logits(self, q: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """``logit P(a ≻ b | q)`` ``[B]`` from rows of ``[B, d]`` (antisymmetric in a and b)."""
        self._check(q, a, b)
        return self._g(q, a, b) - self._g(q, b, a)

    def point_scores(self, q: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """The pointwise twin's absolute score ``[B]`` of each candidate row alone."""
        self._check(q, a)
        return self.point(torch.cat([q * a, q, a], dim=-1)).squeeze(-1)

    def point_logits(self, q: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Bradley–Terry logits of the pointwise twin: ``s(q, a) - s(q, b)``."""
        return self.point_scores(q, a) - self.point_scores(q, b)


def bradley_terry_loss(logits: torch.Tensor) -> torch.Tensor:
    """``mean(-log σ(logit))`` over ``[P]`` logits of the preferred item over the other."""
    if logits.ndim != 1 or logits.numel() == 0:
        raise ValueError(f"logits must be a non-empty [P] vector, got shape {list(logits.shape)}")
    return F.softplus(-logits).mean()


def preference_pairs(scores: np.ndarray, relevance: np.ndarray, n_negatives: int) -> np.ndarray:
    """``[P, 3]`` rows ``(query, positive, negative)`` of gallery indices: per query, each verified
    positive (``relevance == 1``) against each of the ``n_negatives`` verified negatives
    (``relevance == 0``) with the highest first-stage ``scores`` (``[Q, N]``; ties to the lower
    index). Unknown pairs (``-1``) are never used."""
    scores, relevance = np.asarray(scores, np.float64), np.asarray(relevance)
    if scores.shape != relevance.shape or scores.ndim != 2:
        raise ValueError(f"scores and relevance must be one [Q, N] shape, got {scores.shape} and {relevance.shape}")
    rows = []
    for q in range(scores.shape[0]):
        positives = np.flatnonzero(relevance[q] == 1)
        negatives = np.flatnonzero(relevance[q] == 0)
        if not len(positives) or not len(negatives):
            continue
        hardest = negatives[np.argsort(-scores[q, negatives], kind="stable")[:n_negatives]]
        rows += [(q, p, n) for p in positives for n in hardest]
    return np.asarray(rows, np.int64).reshape(-1, 3)


def train_pairwise_head(head: PairwiseHead, queries: torch.Tensor, items: torch.Tensor, pairs: np.ndarray,
                        config: PairwiseHeadConfig, *, seed: int = 0) -> dict:
    """Train both heads of ``head`` in place on ``pairs`` (rows of :func:`preference_pairs`) over
    frozen ``queries [Q, d]`` and ``items [N, d]``: each step draws ``batch_size`` pairs with
    replacement from a generator seeded by ``seed``, shows each pair in a random order (the
    preferred item as A or as B) and minimises the Bradley–Terry loss of both heads. Returns the
    pair counts and each head's mean loss over the first and the last tenth of the steps."""
    if len(pairs) == 0:
        raise ValueError("no preference pairs: no training query has both a verified positive and a verified negative")
    device = next(head.parameters()).device
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": config.weight_decay},
                                   {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}], lr=config.lr)
    gen = torch.Generator().manual_seed(int(seed))
    index = torch.from_numpy(np.asarray(pairs, np.int64))
    queries, items = queries.detach().float().to(device), items.detach().float().to(device)
    was_training = head.training
    head.train()
    losses: dict[str, list[float]] = {"pairwise": [], "pointwise": []}
    for _ in range(config.steps):
        qi, pi, ni = index[torch.randint(len(index), (config.batch_size,), generator=gen)].T.to(device)
        flip = (torch.rand(config.batch_size, generator=gen) < 0.5).to(device)         # [b] positive shown as B
        a = torch.where(flip[:, None], items[ni], items[pi])
        b = torch.where(flip[:, None], items[pi], items[ni])
        sign = 1.0 - 2.0 * flip.float()                                                # +1: A is preferred
        joint = bradley_terry_loss(sign * head.pair_logits(queries[qi], a, b))
        point = bradley_terry_loss(sign * head.point_logits(queries[qi], a, b))
        optimizer.zero_grad(set_to_none=True)
        (joint + point).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses["pairwise"].append(float(joint.detach()))
        losses["pointwise"].append(float(point.detach()))
    head.train(was_training)
    tenth = max(1, config.steps // 10)
    return {"pairs": len(pairs), "queries": len(np.unique(pairs[:, 0])), "steps": config.steps,
            **{f"{k}_first_loss": float(np.mean(v[:tenth])) for k, v in losses.items()},
            **{f"{k}_last_loss": float(np.mean(v[-tenth:])) for k, v in losses.items()}}


@torch.no_grad()
def pair_accuracy(head: PairwiseHead, queries: torch.Tensor, items: torch.Tensor, pairs: np.ndarray,
                  *, pointwise: bool = False) -> float:
    """Share of ``pairs`` whose preferred item the head (or its pointwise twin) puts first."""
    index = torch.from_numpy(np.asarray(pairs, np.int64))
    was_training = head.training
    head.eval()
    q, p, n = queries[index[:, 0]], items[index[:, 1]], items[index[:, 2]]
    logits = head.point_logits(q, p, n) if pointwise else head.pair_logits(q, p, n)
    head.train(was_training)
    return float((logits > 0).float().mean())
