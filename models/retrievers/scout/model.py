"""SCOUT: retrieval as prediction in a frozen text-embedding space (SCOUT paper, Secs. 3, 5.1, 7.2).

Both encoders stay frozen; only the predictor is trained.

- **Frozen video side.** The paper feeds the ``P`` patch tokens of a frozen V-JEPA frame encoder.
  Here a trajectory is a sequence of observation tokens ``[n, d_in]`` from a frozen encoder (the
  caller decides what a token is, e.g. ROI appearance with geometry); padded batches come with a
  validity mask.
- **Frozen text side.** A frozen text encoder gives one unit vector ``y ∈ R^{d_text}`` per query.
  It is never trained and there is no projection on the text side (the paper finds a trainable
  text projection lowers accuracy), so :meth:`ScoutPredictor.encode_queries` only normalises.
- **Predictor.** Tokens → linear projection (+ learned token positions) → a transformer body that
  reads the projected tokens followed by ``K`` learnable prompt tokens → the ``K`` prompt outputs
  *concatenated* (each prompt keeps its own slot; mean-pooling them collapses) → linear → L2, the
  predicted caption embedding ``ŷ``. The paper's body is a 24-layer decoder initialised from
  Qwen3.5-0.8B: with ``lm_path`` the body is a local Hugging Face model's transformer stack, its
  weights loaded and trained (:class:`models.retrievers.scout.lm_body.PretrainedBody`; its width,
  depth and heads are the model's). Without it, a pre-norm transformer of the configured depth,
  randomly initialised, with decoder-style causal attention by default (the prompts come last, so
  they read every token).
- **Objective.** Symmetric in-batch InfoNCE at ``τ = 0.07`` (``models.training.losses.info_nce``). The
  per-forward batch ``B`` is the main knob (16 → 128 adds 9.4 points in the paper), and batches
  are class-balanced (:class:`ClassBalancedBatchSampler`, +1.6 points for normal/anomalous).

The gallery side is encoded once (bi-encoder); a query costs one text-encoder forward and a dot
product per gallery item: :func:`retrieval_scores`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from models.config import UNKNOWN_NAMED_KEYS, PlainConfig
from models.retrievers.scout.lm_body import PretrainedBody
from models.training.losses import info_nce


# -- configuration --------------------------------------------------------------------------------
@dataclass
class ScoutConfig(PlainConfig):
    """SCOUT predictor and its optimiser recipe; defaults are the paper's where it gives them.

    The paper's per-forward batch is B = 128 pairs (per process), negatives not gathered across
    processes (gathering them did not help: the per-rank forward is the lever), and class-balanced
    batches (:class:`ClassBalancedBatchSampler`, ``BatchingConfig.sampler``). ``batch_size`` and
    ``gather_negatives`` are the recipe ``ScoutRetriever.optimizer_defaults`` gives the trainer: a
    ``TrainConfig.batch_size`` other than the trainer's default wins, and so does this field (sweep B
    with either)."""

    unknown_keys_message = UNKNOWN_NAMED_KEYS

    d_in: int = 1024                 # width of a frozen visual token (V-JEPA 2.1 ViT-L/16: 1024)
    d_text: int = 768                # width of the frozen text space (paper: d = 768)
    d_model: int = 1024              # predictor width (not given by the paper; a sub-1B decoder's)
    n_layers: int = 24               # transformer body depth (8 -> 24 layers: +1.9 mAP@10)
    n_heads: int = 16                # attention heads of the body
    ff_mult: int = 4                 # feed-forward width as a multiple of d_model
    n_prompts: int = 64              # K learnable prompt tokens (saturates near 64; 128 loses 1.5)
    max_tokens: int = 576            # most visual tokens per item (24 x 24 patches of 384 px at /16)
    causal: bool = True              # decoder-style attention, as the paper's decoder body
    dropout: float = 0.0             # dropout inside the body
    tau: float = 0.07                # InfoNCE temperature
    lr: float = 2e-5                 # AdamW peak learning rate
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW betas
    weight_decay: float = 0.01       # AdamW weight decay
    warmup_steps: int = 600          # linear warm-up steps, then cosine decay to zero
    total_steps: int = 6000          # training steps
    batch_size: int = 128            # per-forward batch B (16 -> 128: +9.4 mAP@10, the largest single gain)
    gather_negatives: bool = False   # score all processes' pairs together (the paper: no significant gain)
    # local Hugging Face model folder (causal LM or encoder) whose transformer stack initialises the
    # body (the paper: Qwen3.5-0.8B); "" = a random body of d_model / n_layers / n_heads / ff_mult
    lm_path: str = ""

    def __post_init__(self) -> None:
        self.betas = tuple(float(b) for b in self.betas)
        for name in ("d_in", "d_text", "d_model", "n_layers", "n_heads", "ff_mult", "n_prompts",
                     "max_tokens", "total_steps", "batch_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"ScoutConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.tau <= 0:
            raise ValueError(f"tau must be positive, got {self.tau}")
        if not 0 <= self.warmup_steps <= self.total_steps:
            raise ValueError(f"warmup_steps must be in 0..total_steps ({self.total_steps}), got {self.warmup_steps}")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas}")
        if not isinstance(self.lm_path, str):
            raise ValueError(f"lm_path must be a folder path (a string), got {self.lm_path!r}")


# -- shared pieces --------------------------------------------------------------------------------
def pad_tokens(sequences: Sequence[torch.Tensor], max_tokens: int | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack variable-length token sequences ``[n_i, d]`` into ``tokens [B, n, d]`` (zeros after
    each sequence) and ``mask [B, n]`` (True = a real token). Longer sequences than ``max_tokens``
    are subsampled uniformly over their length, both endpoints kept."""
    if not sequences:
        raise ValueError("no sequences to pad")
    widths = {int(s.shape[-1]) for s in sequences}
    if any(s.ndim != 2 or s.shape[0] == 0 for s in sequences) or len(widths) != 1:
        raise ValueError("every sequence must be a non-empty [n_i, d] tensor with the same d")
    if max_tokens is not None:
        sequences = [s if s.shape[0] <= max_tokens else
                     s[torch.linspace(0, s.shape[0] - 1, max_tokens).round().long()] for s in sequences]
    n = max(int(s.shape[0]) for s in sequences)
    tokens = sequences[0].new_zeros(len(sequences), n, widths.pop())        # [B, n, d]
    mask = torch.zeros(len(sequences), n, dtype=torch.bool)                  # [B, n]
    for i, s in enumerate(sequences):
        tokens[i, : s.shape[0]] = s
        mask[i, : s.shape[0]] = True
    return tokens, mask.to(tokens.device)


def _check_tokens(tokens: torch.Tensor, mask: torch.Tensor | None, width: int, max_tokens: int,
                  name: str) -> torch.Tensor:
    """The validity mask ``[B, n]`` for ``tokens [B, n, width]`` (all True when ``mask`` is None)."""
    if not isinstance(tokens, torch.Tensor) or tokens.ndim != 3:
        raise ValueError(f"{name} must be a [B, n, d] tensor")
    if tokens.shape[-1] != width:
        raise ValueError(f"{name} have width {tokens.shape[-1]}, the model expects {width}")
    if tokens.shape[1] > max_tokens:
        raise ValueError(f"{name} hold {tokens.shape[1]} tokens, more than the model's {max_tokens} "
                         "(subsample them, e.g. with pad_tokens(..., max_tokens))")
    if mask is None:
        return torch.ones(tokens.shape[:2], dtype=torch.bool, device=tokens.device)
    if mask.shape != tokens.shape[:2]:
        raise ValueError(f"{name} mask must be {list(tokens.shape[:2])}, got {list(mask.shape)}")
    mask = mask.to(dtype=torch.bool, device=tokens.device)
    if not bool(mask.any(dim=1).all()):
        raise ValueError(f"every item needs at least one valid token in {name}")
    return mask


def _body(d_model: int, n_layers: int, n_heads: int, ff_mult: int, dropout: float) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(d_model, n_heads, ff_mult * d_model, dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)


# -- the predictor --------------------------------------------------------------------------------
class ScoutPredictor(nn.Module):
    """Frozen visual tokens → K prompt read-out → unit vector in the frozen text space."""

    def __init__(self, config: ScoutConfig):
        super().__init__()
        self.config = config
        c = config
        pretrained = PretrainedBody(c.lm_path) if c.lm_path else None
        self.width = pretrained.width if pretrained is not None else c.d_model     # D
        self.input_proj = nn.Linear(c.d_in, self.width)
        self.positions = nn.Parameter(torch.randn(c.max_tokens, self.width) * 0.02)  # [T, D]
        self.prompts = nn.Parameter(torch.randn(c.n_prompts, self.width) * 0.02)     # [K, D]
        # built after the parameters above, as before, so a seed initialises a random body as it did
        self.body = pretrained if pretrained is not None else _body(c.d_model, c.n_layers, c.n_heads, c.ff_mult,
                                                                       c.dropout)
        self.norm = nn.LayerNorm(self.width)
        self.readout = nn.Linear(c.n_prompts * self.width, c.d_text)

    def prompt_outputs(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The body's outputs at the K prompt positions ``[B, K, D]`` (after the final norm)."""
        c = self.config
        mask = _check_tokens(tokens, mask, c.d_in, c.max_tokens, "visual tokens")
        b, n = mask.shape
        x = self.input_proj(tokens) + self.positions[:n]                    # [B, n, D]
        prompts = self.prompts.unsqueeze(0).expand(b, -1, -1)                # [B, K, D]
        seq = torch.cat([x, prompts], dim=1)                                 # [B, n+K, D]
        pad = torch.cat([~mask, mask.new_zeros(b, c.n_prompts)], dim=1)      # [B, n+K] True = ignore
        if c.lm_path:
            h = self.body(seq, ~pad)                                         # [B, n+K, D]
        else:
            attn = None
            if c.causal:
                s = n + c.n_prompts
                attn = torch.ones(s, s, dtype=torch.bool, device=seq.device).triu(1)   # [S, S]
            h = self.body(seq, mask=attn, src_key_padding_mask=pad)          # [B, n+K, D]
        return self.norm(h[:, n:])                                           # [B, K, D]

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted caption embeddings ``ŷ`` ``[B, d_text]``, unit rows."""
        slots = self.prompt_outputs(tokens, mask)                            # [B, K, D]
        return F.normalize(self.readout(slots.flatten(1)), dim=-1)          # [B, d_text]

    def encode_tracks(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Gallery side: ``[B, d_text]`` unit rows (computed once and cached)."""
        return self(tokens, mask)

    def encode_queries(self, text: torch.Tensor) -> torch.Tensor:
        """Query side: the frozen text embeddings ``[B, d_text]`` as unit rows (nothing trained)."""
        if not isinstance(text, torch.Tensor) or text.ndim != 2 or text.shape[1] != self.config.d_text:
            raise ValueError(f"text embeddings must be [B, {self.config.d_text}]")
        return F.normalize(text, dim=-1)                                     # [B, d_text]

    def training_loss(self, tokens: torch.Tensor, mask: torch.Tensor | None, text: torch.Tensor, *,
                      rank: int = 0, world_size: int = 1) -> dict:
        """Symmetric InfoNCE of one batch of (track, caption) pairs, row ``i`` with row ``i``.

        Returns ``loss`` and, detached, the in-batch top-1 accuracy of both directions."""
        pred = self.encode_tracks(tokens, mask)                              # [B, d_text]
        target = self.encode_queries(text)                                   # [B, d_text]
        if pred.shape[0] != target.shape[0]:
            raise ValueError(f"{pred.shape[0]} tracks against {target.shape[0]} captions")
        loss = info_nce(pred, target, self.config.tau, rank=rank, world_size=world_size)
        with torch.no_grad():
            sims = pred @ target.T                                           # [B, B]
            labels = torch.arange(sims.shape[0], device=sims.device)
            acc = ((sims.argmax(1) == labels).float().mean() + (sims.argmax(0) == labels).float().mean()) / 2
        return {"loss": loss, "batch_accuracy": float(acc)}


def build_scout(config: ScoutConfig | dict | None = None) -> ScoutPredictor:
    """The SCOUT predictor from a config (a :class:`ScoutConfig` or its plain-data form)."""
    if config is None:
        config = ScoutConfig()
    elif isinstance(config, dict):
        config = ScoutConfig.from_dict(config)
    elif not isinstance(config, ScoutConfig):
        raise ValueError(f"config must be a ScoutConfig or a dict, got {type(config).__name__}")
    return ScoutPredictor(config)


def warmup_cosine(step: int, warmup_steps: int, total_steps: int) -> float:
    """Learning-rate multiplier: linear warm-up to 1 over ``warmup_steps``, cosine decay to 0 at
    ``total_steps`` (0 after it)."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if step >= total_steps:
        return 0.0
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def make_optimizer(model: nn.Module, config: ScoutConfig
                   ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW with the paper's recipe and its warm-up + cosine schedule (step it once per batch).
    Biases, norms, positions and prompt tokens are not decayed."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or name in {"positions", "prompts"} else decay).append(p)
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=config.lr, betas=config.betas)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: warmup_cosine(s, config.warmup_steps, config.total_steps))
    return optimizer, schedule


@torch.no_grad()
def retrieval_scores(query_emb: torch.Tensor, gallery_emb: torch.Tensor) -> torch.Tensor:
    """Cosine scores ``[Q, N]`` of unit query rows against unit gallery rows."""
    if query_emb.ndim != 2 or gallery_emb.ndim != 2 or query_emb.shape[1] != gallery_emb.shape[1]:
        raise ValueError("query and gallery embeddings must be [Q, d] and [N, d] with the same d")
    return query_emb @ gallery_emb.T                                        # [Q, N]
