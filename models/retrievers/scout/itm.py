"""ScoutITM, SCOUT's cross-encoder reranker (SCOUT paper, Sec. 7.2).

A shallow single-stream cross-encoder over the concatenated visual and
text-token sequences that reads out one match probability, trained with binary cross-entropy on
matched pairs against negatives mined from an already-trained retriever's short list
(:func:`mine_hard_negatives`, :func:`itm_pairs`). Its probabilities are the ITM signal of the
rerank blend.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.retrievers.scout.model import _body, _check_tokens


@dataclass
class ScoutITMConfig(PlainConfig):
    """ScoutITM cross-encoder; the defaults have 30.3 M trainable parameters (paper: 29.73 M)."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    d_visual: int = 1024             # width of a frozen visual token
    d_text: int = 768                # width of a frozen text-token state (EmbeddingGemma: 768)
    d_model: int = 768               # cross-encoder width
    n_layers: int = 4                # shallow single-stream body (4 x 768 wide: ~28 M in the body)
    n_heads: int = 12                # attention heads
    ff_mult: int = 4                 # feed-forward width as a multiple of d_model
    max_visual_tokens: int = 576     # most visual tokens per item
    max_text_tokens: int = 128       # most text tokens per query
    dropout: float = 0.0             # dropout inside the body

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "dropout":
                if not 0 <= value < 1:
                    raise ValueError(f"dropout must be in [0, 1), got {value}")
            elif not isinstance(value, int) or value < 1:
                raise ValueError(f"ScoutITMConfig.{f.name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")


# -- ScoutITM -------------------------------------------------------------------------------------
class ScoutITM(nn.Module):
    """Single-stream cross-encoder over ``[CLS] + visual tokens + text tokens`` → match logit."""

    def __init__(self, config: ScoutITMConfig):
        super().__init__()
        self.config = config
        c = config
        self.visual_proj = nn.Linear(c.d_visual, c.d_model)
        self.text_proj = nn.Linear(c.d_text, c.d_model)
        self.visual_pos = nn.Parameter(torch.randn(c.max_visual_tokens, c.d_model) * 0.02)  # [Tv, D]
        self.text_pos = nn.Parameter(torch.randn(c.max_text_tokens, c.d_model) * 0.02)      # [Tt, D]
        self.modality = nn.Parameter(torch.randn(2, c.d_model) * 0.02)                       # [2, D]
        self.cls = nn.Parameter(torch.randn(1, 1, c.d_model) * 0.02)                         # [1, 1, D]
        self.body = _body(c.d_model, c.n_layers, c.n_heads, c.ff_mult, c.dropout)
        self.norm = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, 1)

    def forward(self, visual: torch.Tensor, visual_mask: torch.Tensor | None,
                text: torch.Tensor, text_mask: torch.Tensor | None) -> torch.Tensor:
        """Match logits ``[B]`` of row-aligned (track, query) pairs."""
        c = self.config
        visual_mask = _check_tokens(visual, visual_mask, c.d_visual, c.max_visual_tokens, "visual tokens")
        text_mask = _check_tokens(text, text_mask, c.d_text, c.max_text_tokens, "text tokens")
        if visual.shape[0] != text.shape[0]:
            raise ValueError(f"{visual.shape[0]} tracks against {text.shape[0]} queries")
        b, nv = visual_mask.shape
        nt = text_mask.shape[1]
        v = self.visual_proj(visual) + self.visual_pos[:nv] + self.modality[0]   # [B, nv, D]
        t = self.text_proj(text) + self.text_pos[:nt] + self.modality[1]         # [B, nt, D]
        seq = torch.cat([self.cls.expand(b, -1, -1), v, t], dim=1)              # [B, 1+nv+nt, D]
        keep = torch.cat([visual_mask.new_ones(b, 1), visual_mask, text_mask], dim=1)
        h = self.body(seq, src_key_padding_mask=~keep)                           # [B, 1+nv+nt, D]
        return self.head(self.norm(h[:, 0])).squeeze(-1)                         # [B]

    def match_probability(self, visual, visual_mask, text, text_mask) -> torch.Tensor:
        """P(match) ``[B]``."""
        return torch.sigmoid(self(visual, visual_mask, text, text_mask))

    def training_loss(self, visual, visual_mask, text, text_mask, labels: torch.Tensor) -> dict:
        """Binary cross-entropy of the pairs' logits against ``labels`` ``[B]`` (1 match, 0 not)."""
        logits = self(visual, visual_mask, text, text_mask)                      # [B]
        if labels.shape != logits.shape:
            raise ValueError(f"labels must be [B] = {list(logits.shape)}, got {list(labels.shape)}")
        if bool(((labels != 0) & (labels != 1)).any()):
            raise ValueError("ITM labels must be 0 or 1 (unknown pairs are not training pairs)")
        loss = F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return {"loss": loss}

    @torch.no_grad()
    def score_shortlist(self, track_tokens: torch.Tensor, track_mask: torch.Tensor | None,
                        text_tokens: torch.Tensor, text_mask: torch.Tensor | None,
                        shortlist: torch.Tensor, chunk: int = 256) -> torch.Tensor:
        """Match probabilities ``[Q, M]`` of each query's short-listed tracks.

        ``track_tokens [N, nv, d_visual]`` is the gallery, ``text_tokens [Q, nt, d_text]`` the
        queries, ``shortlist [Q, M]`` gallery indices per query (e.g. the CombSUM top-20). The
        result lines up with the shortlist, as the ITM signal of ``models.retrievers.rerank.rerank_blend``."""
        if shortlist.ndim != 2 or shortlist.shape[0] != text_tokens.shape[0]:
            raise ValueError(f"shortlist must be [Q, M] with Q = {text_tokens.shape[0]}")
        n = track_tokens.shape[0]
        if shortlist.numel() and (int(shortlist.min()) < 0 or int(shortlist.max()) >= n):
            raise ValueError(f"shortlist indices must be in 0..{n - 1}")
        track_mask = _check_tokens(track_tokens, track_mask, self.config.d_visual,
                                   self.config.max_visual_tokens, "visual tokens")
        text_mask = _check_tokens(text_tokens, text_mask, self.config.d_text,
                                  self.config.max_text_tokens, "text tokens")
        q_idx = torch.arange(shortlist.shape[0]).repeat_interleave(shortlist.shape[1])   # [Q*M]
        t_idx = shortlist.reshape(-1).cpu()                                               # [Q*M]
        out = []
        for s in range(0, len(q_idx), chunk):
            qi, ti = q_idx[s: s + chunk], t_idx[s: s + chunk]
            out.append(self.match_probability(track_tokens[ti], track_mask[ti], text_tokens[qi], text_mask[qi]))
        probs = torch.cat(out) if out else text_tokens.new_zeros(0)
        return probs.reshape(shortlist.shape)                                             # [Q, M]


def build_scout_itm(config: ScoutITMConfig | dict | None = None) -> ScoutITM:
    if config is None:
        config = ScoutITMConfig()
    elif isinstance(config, dict):
        config = ScoutITMConfig.from_dict(config)
    elif not isinstance(config, ScoutITMConfig):
        raise ValueError(f"config must be a ScoutITMConfig or a dict, got {type(config).__name__}")
    return ScoutITM(config)


def mine_hard_negatives(scores: torch.Tensor, relevance: torch.Tensor, n_negatives: int
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query, the ``n_negatives`` highest-scored gallery items that are verified mismatches.

    ``scores [Q, N]`` come from a frozen, already-trained retriever; ``relevance [Q, N]`` is 1
    match, 0 verified mismatch, -1 unknown. Unknown items are never negatives. Returns
    ``indices [Q, n]`` and ``valid [Q, n]`` (False where a query has fewer mismatches; the index
    there is 0 and must be ignored)."""
    if scores.shape != relevance.shape or scores.ndim != 2:
        raise ValueError("scores and relevance must both be [Q, N]")
    if not isinstance(n_negatives, int) or not 1 <= n_negatives <= scores.shape[1]:
        raise ValueError(f"n_negatives must be in 1..{scores.shape[1]}, got {n_negatives!r}")
    candidates = scores.masked_fill(relevance != 0, -math.inf)               # [Q, N]
    top = candidates.topk(n_negatives, dim=1)
    valid = torch.isfinite(top.values)                                       # [Q, n]
    return top.indices.masked_fill(~valid, 0), valid


def itm_pairs(scores: torch.Tensor, relevance: torch.Tensor, n_negatives: int
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ScoutITM training pairs: every match, and per query with a match its ``n_negatives`` mined
    hard negatives. Returns ``query_idx [P]``, ``item_idx [P]``, ``label [P]`` (1 / 0)."""
    hard, valid = mine_hard_negatives(scores, relevance, n_negatives)       # [Q, n], [Q, n]
    has_match = (relevance == 1).any(dim=1, keepdim=True)                   # [Q, 1]
    valid = valid & has_match                                                # [Q, n]
    pos_q, pos_i = torch.nonzero(relevance == 1, as_tuple=True)              # [P+]
    neg_q = torch.arange(scores.shape[0], device=scores.device).unsqueeze(1).expand_as(hard)[valid]
    neg_i = hard[valid]
    query_idx = torch.cat([pos_q, neg_q])
    item_idx = torch.cat([pos_i, neg_i])
    label = torch.cat([torch.ones_like(pos_q), torch.zeros_like(neg_q)])
    return query_idx, item_idx, label
