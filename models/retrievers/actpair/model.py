"""ActPair's action-aligned dual encoder and its objective (ActPair paper, Sec. 3.3).

**Dual encoder** (Sec. 3.3). A visual tower over a track's frozen observation tokens and a text
tower over frozen text features (token states, or one pooled vector), each a small transformer
with attention pooling, a linear map into the shared space and L2. The paper fine-tunes
SigLIP2 itself; here both encoders stay frozen and the towers are what is trained. Objective
``L = L_siglip + λ_action · (½[CE(p_img, y) + CE(p_txt, y)] + ½[KL(p_img‖p_txt) + KL(p_txt‖p_img)])``
with ``λ_action = 0.2``, ``p = softmax(W_act E)`` from one shared head ``W_act``, and the SigLIP
loss of ``models.training.losses.siglip_loss`` with a learned ``t'`` (init ``log 10``, ``t = exp t'``)
and bias ``b`` (init ``-10``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.training.losses import siglip_loss


# -- configuration --------------------------------------------------------------------------------
@dataclass
class ActPairConfig(PlainConfig):
    """ActPair dual encoder and retrieval settings; defaults are the paper's where it gives them."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    d_visual: int = 1024             # width of a frozen visual (observation) token
    d_text: int = 384                # width of a frozen text token / pooled vector (MiniLM: 384)
    d_embed: int = 768               # shared embedding width (SigLIP2-B/16-256: 768)
    d_model: int = 256               # tower width (not in the paper: it fine-tunes SigLIP2 itself)
    n_layers: int = 2                # transformer layers per tower
    n_heads: int = 4                 # attention heads per tower
    ff_mult: int = 4                 # feed-forward width as a multiple of d_model
    max_visual_tokens: int = 576     # most visual tokens per track
    max_text_tokens: int = 128       # most text tokens per query
    dropout: float = 0.0             # dropout inside the towers
    n_actions: int = 16              # |T_act|: canonical action tags (take it from the vocabulary)
    lambda_action: float = 0.2       # weight of the action term
    t_prime_init: float = math.log(10.0)  # SigLIP log-scale t' (t = exp t')
    bias_init: float = -10.0         # SigLIP bias b
    top_k: int = 100                 # candidates per query view before the union
    top_m: int = 10                  # fused candidates passed to the pairwise reranker

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "int" and (not isinstance(value, int) or value < 1):
                raise ValueError(f"ActPairConfig.{f.name} must be a positive integer, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not (math.isfinite(self.lambda_action) and self.lambda_action >= 0):
            raise ValueError(f"lambda_action must be a finite number >= 0, got {self.lambda_action}")
        if self.top_m > self.top_k:
            raise ValueError(f"top_m ({self.top_m}) must not exceed top_k ({self.top_k})")


# -- the dual encoder -----------------------------------------------------------------------------
class _Tower(nn.Module):
    """Frozen tokens → projection (+ positions) → transformer → attention pooling → linear → L2."""

    def __init__(self, d_in: int, max_tokens: int, c: ActPairConfig):
        super().__init__()
        self.d_in, self.max_tokens = d_in, max_tokens
        self.proj = nn.Linear(d_in, c.d_model)
        self.positions = nn.Parameter(torch.randn(max_tokens, c.d_model) * 0.02)     # [T, D]
        layer = nn.TransformerEncoderLayer(c.d_model, c.n_heads, c.ff_mult * c.d_model, c.dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.body = nn.TransformerEncoder(layer, c.n_layers, enable_nested_tensor=False)
        self.probe = nn.Parameter(torch.randn(1, 1, c.d_model) * 0.02)              # [1, 1, D]
        self.pool = nn.MultiheadAttention(c.d_model, c.n_heads, batch_first=True)
        self.norm = nn.LayerNorm(c.d_model)
        self.out = nn.Linear(c.d_model, c.d_embed)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if tokens.ndim == 2:                                                 # pooled vectors [B, d]
            tokens = tokens.unsqueeze(1)                                     # [B, 1, d]
            mask = None
        if tokens.ndim != 3 or tokens.shape[-1] != self.d_in:
            raise ValueError(f"tokens must be [B, n, {self.d_in}] (or [B, {self.d_in}]), got {list(tokens.shape)}")
        b, n, _ = tokens.shape
        if n > self.max_tokens:
            raise ValueError(f"{n} tokens is more than the tower's {self.max_tokens}")
        if mask is None:
            mask = torch.ones(b, n, dtype=torch.bool, device=tokens.device)
        elif mask.shape != (b, n):
            raise ValueError(f"mask must be [B, n] = {[b, n]}, got {list(mask.shape)}")
        mask = mask.to(device=tokens.device, dtype=torch.bool)
        if not bool(mask.any(dim=1).all()):
            raise ValueError("every item needs at least one valid token")
        x = self.proj(tokens) + self.positions[:n]                           # [B, n, D]
        h = self.body(x, src_key_padding_mask=~mask)                         # [B, n, D]
        pooled, _ = self.pool(self.probe.expand(b, -1, -1), h, h, key_padding_mask=~mask,
                              need_weights=False)                            # [B, 1, D]
        return F.normalize(self.out(self.norm(pooled.squeeze(1))), dim=-1)   # [B, d_embed]


class ActPair(nn.Module):
    """Visual and text towers into one space, a shared action head, SigLIP scale and bias."""

    def __init__(self, config: ActPairConfig):
        super().__init__()
        self.config = config
        self.visual = _Tower(config.d_visual, config.max_visual_tokens, config)
        self.text = _Tower(config.d_text, config.max_text_tokens, config)
        self.action_head = nn.Linear(config.d_embed, config.n_actions, bias=False)   # W_act
        self.t_prime = nn.Parameter(torch.tensor(float(config.t_prime_init)))
        self.bias = nn.Parameter(torch.tensor(float(config.bias_init)))

    def encode_tracks(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``E_img`` ``[B, d_embed]`` unit rows from visual tokens ``[B, n, d_visual]``."""
        return self.visual(tokens, mask)

    def encode_queries(self, text: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``E_txt`` ``[B, d_embed]`` unit rows from text tokens ``[B, L, d_text]`` or pooled
        vectors ``[B, d_text]``."""
        return self.text(text, mask)

    def action_logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``W_act E`` ``[B, n_actions]`` (the same head for both modalities)."""
        return self.action_head(embeddings)

    def training_loss(self, tokens: torch.Tensor, mask: torch.Tensor | None, text: torch.Tensor,
                      text_mask: torch.Tensor | None, actions: torch.Tensor, *,
                      rank: int = 0, world_size: int = 1) -> dict:
        """SigLIP plus the weighted action term on one batch of row-aligned (track, query) pairs.

        ``actions`` ``[B]`` are canonical action indices (``-1``: none known; such rows skip the
        cross-entropy but keep the consistency term). Returns ``loss`` and its parts."""
        img = self.encode_tracks(tokens, mask)                               # [B, E]
        txt = self.encode_queries(text, text_mask)                           # [B, E]
        if img.shape[0] != txt.shape[0] or actions.shape != (img.shape[0],):
            raise ValueError(f"{img.shape[0]} tracks, {txt.shape[0]} queries and actions of shape "
                             f"{list(actions.shape)} must pair row by row")
        sig = siglip_loss(img, txt, self.t_prime.exp(), self.bias, rank=rank, world_size=world_size)
        act = action_loss(self.action_logits(img), self.action_logits(txt), actions)
        loss = sig + self.config.lambda_action * act["action"]
        return {"loss": loss, "siglip": sig.detach(), "action": act["action"].detach(),
                "ce": act["ce"].detach(), "consistency": act["consistency"].detach()}


def build_actpair(config: ActPairConfig | dict | None = None) -> ActPair:
    """The ActPair dual encoder from a config (an :class:`ActPairConfig` or its plain-data form)."""
    if config is None:
        config = ActPairConfig()
    elif isinstance(config, dict):
        config = ActPairConfig.from_dict(config)
    elif not isinstance(config, ActPairConfig):
        raise ValueError(f"config must be an ActPairConfig or a dict, got {type(config).__name__}")
    return ActPair(config)


def symmetric_kl(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """``½ [KL(p_a‖p_b) + KL(p_b‖p_a)]`` of the softmax distributions, averaged over rows."""
    log_a = F.log_softmax(logits_a, dim=-1)                                  # [B, C]
    log_b = F.log_softmax(logits_b, dim=-1)                                  # [B, C]
    kl_ab = (log_a.exp() * (log_a - log_b)).sum(-1)                          # [B]
    kl_ba = (log_b.exp() * (log_b - log_a)).sum(-1)                          # [B]
    return 0.5 * (kl_ab + kl_ba).mean()


def action_loss(logits_img: torch.Tensor, logits_txt: torch.Tensor, labels: torch.Tensor) -> dict:
    """``L_action = ½[CE(p_img, y) + CE(p_txt, y)] + L_cons`` with ``L_cons`` the symmetric KL.

    ``labels`` ``[B]`` are class indices; rows labelled ``-1`` are left out of the cross-entropy
    (it is 0 when no row has a label) and still count in the consistency term."""
    if logits_img.shape != logits_txt.shape or logits_img.ndim != 2:
        raise ValueError("image and text action logits must both be [B, C]")
    if labels.shape != logits_img.shape[:1]:
        raise ValueError(f"labels must be [B] = {list(logits_img.shape[:1])}, got {list(labels.shape)}")
    n_classes = logits_img.shape[1]
    if bool(((labels < -1) | (labels >= n_classes)).any()):
        raise ValueError(f"action labels must be in 0..{n_classes - 1} or -1 (unknown)")
    known = labels >= 0                                                      # [B]
    if bool(known.any()):
        ce = 0.5 * (F.cross_entropy(logits_img[known], labels[known])
                    + F.cross_entropy(logits_txt[known], labels[known]))
    else:
        ce = logits_img.sum() * 0.0
    cons = symmetric_kl(logits_img, logits_txt)
    return {"action": ce + cons, "ce": ce, "consistency": cons}
