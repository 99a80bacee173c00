"""ScoutITM on SCOUT's frozen features: its settings in a ``ScoutRetrieverConfig`` and its training
on identity-hard and mined negatives (SCOUT paper, Sec. 7.2: "identity-based and short-list-mined
negatives from a frozen, already-trained SCOUT retriever").

After the contrastive steps the first stage is frozen; it scores every training query against
every stored trajectory of the training snapshot (:func:`training_pairs`). Every verified match is
a positive. Per query with a match, up to ``n_identity_negatives`` *identity-hard* negatives are
drawn (seeded) from the other trajectories of the query's own video that are verified mismatches:
another person in the same scene. Then the ``n_negatives`` highest-scored verified mismatches
among the rest become the *mined* negatives (:func:`models.retrievers.scout.itm.itm_pairs`).
Unknown pairs are never negatives and pseudo-labels are not used. ScoutITM trains by binary
cross-entropy on those pairs over the same frozen tokens the first stage reads (the observation
tokens of a track, the text encoder's token states of a query), every batch holding each kind of
pair in its share (:class:`models.retrievers.scout.sampler.KindMixedPairBatches`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.retrievers.scout.itm import ScoutITM, itm_pairs
from models.retrievers.scout.sampler import KindMixedPairBatches

# ScoutITM sized for the embedded CPU features (ScoutITMConfig() itself is the paper's ~30 M).
EMBEDDED_ITM = {"d_model": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 4}
DERIVED_ITM_FIELDS = {"d_visual", "d_text", "max_visual_tokens", "max_text_tokens"}
# Pair kinds (ITMPairs.kind).
POSITIVE, MINED, IDENTITY = 0, 1, 2
KIND_NAMES = {POSITIVE: "positives", MINED: "mined_negatives", IDENTITY: "identity_negatives"}


@dataclass
class ScoutITMTraining(PlainConfig):
    """The ``itm`` section of ``ScoutRetrieverConfig``: whether SCOUT trains a ScoutITM head after
    its contrastive steps, its size and its training on mined negatives."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    enabled: bool = False                        # train ScoutITM after the first stage (it joins the checkpoint)
    model: dict = field(default_factory=lambda: dict(EMBEDDED_ITM))  # ScoutITMConfig fields (widths follow the features)
    n_negatives: int = 8                         # hard negatives mined per training query (the first stage's top)
    # identity-hard negatives per training query: verified mismatches of its own video (other people
    # in the scene), drawn at random; 0 turns them off. The paper names both kinds without a ratio.
    n_identity_negatives: int = 4
    steps: int = 200                             # ITM optimizer steps
    batch_size: int = 64                         # pairs per ITM step (drawn with replacement, seeded)
    lr: float = 1e-4                             # AdamW learning rate of the ITM head
    weight_decay: float = 0.01                   # AdamW weight decay of the ITM head

    def __post_init__(self) -> None:
        problems = []
        derived = sorted(DERIVED_ITM_FIELDS & set(self.model))
        if derived:
            problems.append(f"model: {derived} follow from the encoders and features; leave them out")
        for name in ("n_negatives", "steps", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                problems.append(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        if isinstance(self.n_identity_negatives, bool) or not isinstance(self.n_identity_negatives, int) or (
                self.n_identity_negatives < 0):
            problems.append(f"n_identity_negatives must be an integer >= 0, got {self.n_identity_negatives!r}")
        elif isinstance(self.batch_size, int) and self.batch_size < 2 + (self.n_identity_negatives > 0):
            problems.append(f"batch_size must give each kind of pair a seat (positives, mined and identity-hard "
                            f"negatives), got {self.batch_size!r}")
        if not self.lr > 0 or self.weight_decay < 0:
            problems.append("lr must be > 0 and weight_decay >= 0")
        if problems:
            raise ValueError("ScoutRetrieverConfig.itm: " + "; ".join(problems))


def mined_pairs(scores: torch.Tensor, relevance: torch.Tensor, n_negatives: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``itm_pairs`` with ``n_negatives`` capped at the gallery size: ``query_idx``, ``item_idx``,
    ``label`` ``[P]``. ``scores [Q, N]`` from the frozen first stage, ``relevance [Q, N]`` verified
    labels (1 / 0 / -1)."""
    return itm_pairs(scores, relevance, min(n_negatives, scores.shape[1]))


@dataclass
class ITMPairs:
    """ScoutITM training pairs, one per row, tagged with where each came from."""

    query_idx: torch.Tensor                      # [P] the query's row
    item_idx: torch.Tensor                       # [P] the trajectory's column
    label: torch.Tensor                          # [P] 1 match, 0 verified mismatch
    kind: torch.Tensor                           # [P] POSITIVE | MINED | IDENTITY

    @classmethod
    def of(cls, pairs: ITMPairs | tuple) -> ITMPairs:
        """``pairs`` as :class:`ITMPairs`; a ``(query_idx, item_idx, label)`` tuple's negatives are mined."""
        if isinstance(pairs, cls):
            return pairs
        q, i, label = pairs
        return cls(q, i, label, torch.where(label == 1, POSITIVE, MINED))

    def counts(self) -> dict[str, int]:
        return {name: int((self.kind == k).sum()) for k, name in KIND_NAMES.items()}


def identity_negatives(relevance: torch.Tensor, query_video: torch.Tensor, track_video: torch.Tensor, n: int,
                       *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Identity-hard negatives: per query with a verified match, up to ``n`` of the trajectories of
    its own video that are verified mismatches for it (``relevance == 0``: another person of the
    scene, never the query's own target, never an unknown pair), drawn without replacement from a
    generator seeded by ``seed``. ``relevance [Q, N]``, ``query_video [Q]``, ``track_video [N]``.
    Returns ``query_idx [P]``, ``item_idx [P]``."""
    if relevance.ndim != 2 or query_video.shape != relevance.shape[:1] or track_video.shape != relevance.shape[1:]:
        raise ValueError("relevance must be [Q, N] with query_video [Q] and track_video [N]")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    has_match = (relevance == 1).any(dim=1, keepdim=True)                                # [Q, 1]
    same_video = query_video.unsqueeze(1) == track_video.unsqueeze(0)                   # [Q, N]
    allowed = same_video & (relevance == 0) & has_match                                 # [Q, N]
    k = min(n, relevance.shape[1])
    if k == 0:
        empty = torch.zeros(0, dtype=torch.long)
        return empty, empty
    gen = torch.Generator().manual_seed(int(seed))
    keys = torch.rand(relevance.shape, generator=gen).masked_fill(~allowed.cpu(), -1.0)   # [Q, N] random order
    top = keys.topk(k, dim=1)                                                           # [Q, k]
    valid = top.values >= 0                                                             # [Q, k]
    rows = torch.arange(relevance.shape[0]).unsqueeze(1).expand_as(top.indices)         # [Q, k]
    return rows[valid], top.indices[valid]


def training_pairs(scores: torch.Tensor, relevance: torch.Tensor, query_video: torch.Tensor,
                   track_video: torch.Tensor, config: ScoutITMTraining, *, seed: int = 0) -> ITMPairs:
    """The whole ScoutITM training set (module docstring): every verified match, the
    identity-hard negatives of :func:`identity_negatives`, then the ``n_negatives`` mined
    negatives among the verified mismatches not already taken. ``scores [Q, N]`` from the frozen
    first stage, ``relevance [Q, N]`` verified labels (1 / 0 / -1), videos ``[Q]`` and ``[N]``."""
    relevance = relevance.cpu()
    iq, ii = identity_negatives(relevance, query_video.cpu(), track_video.cpu(), config.n_identity_negatives,
                                seed=seed)
    rest = relevance.clone()
    rest[iq, ii] = -1                                                                   # taken: not mined again
    q, i, label = mined_pairs(scores.cpu(), rest, config.n_negatives)
    mined = ITMPairs.of((q, i, label))
    return ITMPairs(torch.cat([mined.query_idx, iq]), torch.cat([mined.item_idx, ii]),
                    torch.cat([mined.label, torch.zeros_like(iq)]),
                    torch.cat([mined.kind, torch.full_like(iq, IDENTITY)]))


def train_itm(itm: ScoutITM, visual: torch.Tensor, visual_mask: torch.Tensor, text: torch.Tensor,
              text_mask: torch.Tensor, pairs: ITMPairs | tuple[torch.Tensor, torch.Tensor, torch.Tensor],
              config: ScoutITMTraining, *, seed: int = 0) -> dict:
    """Train ``itm`` in place on ``pairs`` (:class:`ITMPairs`, or ``query_idx``, ``item_idx``,
    ``label`` of mined pairs) over the frozen ``visual [N, nv, d_v]`` / ``visual_mask [N, nv]`` and
    ``text [Q, nt, d_t]`` / ``text_mask [Q, nt]``.

    Each step draws ``batch_size`` pairs with replacement, every kind of pair in its share
    (:class:`KindMixedPairBatches`, seeded by ``seed``), so the run is a pure function of the seed
    and the pairs. Returns the pair counts by kind and the mean loss over the first and the last
    tenth of the steps."""
    pairs = ITMPairs.of(pairs)
    q_idx, i_idx, label = pairs.query_idx, pairs.item_idx, pairs.label
    if int((label == 1).sum()) == 0:
        raise ValueError("no ITM training pairs: no training query has a verified match")
    if int((label == 0).sum()) == 0:
        raise ValueError("no ITM negatives: no training query has a verified mismatch")
    device = next(itm.parameters()).device
    params = [p for p in itm.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)
    batches = KindMixedPairBatches(pairs.kind, config.batch_size, seed=int(seed))
    was_training = itm.training
    itm.train()
    losses = []
    for _ in range(config.steps):
        pick = batches.batch()                                                          # [b]
        qi, ii = q_idx[pick].cpu(), i_idx[pick].cpu()                                   # [b], [b]
        out = itm.training_loss(visual[ii].to(device), visual_mask[ii].to(device), text[qi].to(device),
                                text_mask[qi].to(device), label[pick].to(device))
        optimizer.zero_grad(set_to_none=True)
        out["loss"].backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        losses.append(float(out["loss"].detach()))
    itm.train(was_training)
    tenth = max(1, len(losses) // 10)
    return {"pairs": len(label), **pairs.counts(), "negatives": int((label == 0).sum()), "steps": config.steps,
            "first_loss": float(np.mean(losses[:tenth])), "last_loss": float(np.mean(losses[-tenth:]))}
