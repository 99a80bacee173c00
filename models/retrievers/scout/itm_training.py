"""ScoutITM on SCOUT's frozen features: its settings in a ``ScoutRetrieverConfig`` and its training
on negatives mined by the trained first stage (SCOUT paper, Sec. 7.2).

After the contrastive steps the first stage is frozen; it scores every training query against
every stored trajectory of the training snapshot, and per query the ``n_negatives`` highest-scored
*verified* mismatches become the hard negatives (:func:`models.retrievers.scout.itm.itm_pairs`:
every verified match is a positive, unknown pairs are never negatives, pseudo-labels are not
used). ScoutITM then trains by binary cross-entropy on those pairs over the same frozen tokens the
first stage reads (the observation tokens of a track, the text encoder's token states of a query).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.retrievers.scout.itm import ScoutITM, itm_pairs

# ScoutITM sized for the embedded CPU features (ScoutITMConfig() itself is the paper's ~30 M).
EMBEDDED_ITM = {"d_model": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 4}
DERIVED_ITM_FIELDS = {"d_visual", "d_text", "max_visual_tokens", "max_text_tokens"}


@dataclass
class ScoutITMTraining(PlainConfig):
    """The ``itm`` section of ``ScoutRetrieverConfig``: whether SCOUT trains a ScoutITM head after
    its contrastive steps, its size and its training on mined negatives."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    enabled: bool = False                        # train ScoutITM after the first stage (it joins the checkpoint)
    model: dict = field(default_factory=lambda: dict(EMBEDDED_ITM))  # ScoutITMConfig fields (widths follow the features)
    n_negatives: int = 8                         # hard negatives mined per training query
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


def train_itm(itm: ScoutITM, visual: torch.Tensor, visual_mask: torch.Tensor, text: torch.Tensor,
              text_mask: torch.Tensor, pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
              config: ScoutITMTraining, *, seed: int = 0) -> dict:
    """Train ``itm`` in place on ``pairs`` (``query_idx``, ``item_idx``, ``label``) over the frozen
    ``visual [N, nv, d_v]`` / ``visual_mask [N, nv]`` and ``text [Q, nt, d_t]`` / ``text_mask [Q, nt]``.

    Each step draws ``batch_size`` pairs uniformly with replacement from a generator seeded by
    ``seed``, so the run is a pure function of the seed and the pairs. Returns the pair counts and
    the mean loss over the first and the last tenth of the steps."""
    q_idx, i_idx, label = pairs
    if len(label) == 0:
        raise ValueError("no ITM training pairs: no training query has a verified match")
    if int((label == 0).sum()) == 0:
        raise ValueError("no mined negatives: no training query has a verified mismatch")
    device = next(itm.parameters()).device
    params = [p for p in itm.parameters() if p.requires_grad]
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=config.lr)
    gen = torch.Generator().manual_seed(int(seed))
    was_training = itm.training
    itm.train()
    losses = []
    for _ in range(config.steps):
        pick = torch.randint(len(label), (config.batch_size,), generator=gen)          # [b]
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
    return {"pairs": len(label), "positives": int((label == 1).sum()), "negatives": int((label == 0).sum()),
            "steps": config.steps, "first_loss": float(np.mean(losses[:tenth])),
            "last_loss": float(np.mean(losses[-tenth:]))}
