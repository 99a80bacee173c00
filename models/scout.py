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
  Qwen3.5-0.8B; here it is a pre-norm transformer of the configured depth, randomly initialised,
  with decoder-style causal attention by default (the prompts come last, so they read every token).
- **Objective.** Symmetric in-batch InfoNCE at ``τ = 0.07`` (``models.losses.info_nce``). The
  per-forward batch ``B`` is the main knob (16 → 128 adds 9.4 points in the paper), and batches
  are class-balanced (:class:`ClassBalancedBatchSampler`, +1.6 points for normal/anomalous).
- **ScoutITM** (Sec. 7.2): a shallow single-stream cross-encoder over the concatenated visual and
  text-token sequences that reads out one match probability, trained with binary cross-entropy on
  matched pairs against negatives mined from an already-trained retriever's short list
  (:func:`mine_hard_negatives`, :func:`itm_pairs`). Its probabilities are the ITM signal of the
  rerank blend.

The gallery side is encoded once (bi-encoder); a query costs one text-encoder forward and a dot
product per gallery item: :func:`retrieval_scores`.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.losses import info_nce


# -- configuration --------------------------------------------------------------------------------
@dataclass
class ScoutConfig:
    """SCOUT predictor and its optimiser recipe; defaults are the paper's where it gives them.

    The paper's per-forward batch is B = 128 pairs (per process) with class-balanced batches
    (:class:`ClassBalancedBatchSampler`); the batch is the caller's (or the trainer's) setting."""

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

    def __post_init__(self) -> None:
        self.betas = tuple(float(b) for b in self.betas)
        for name in ("d_in", "d_text", "d_model", "n_layers", "n_heads", "ff_mult", "n_prompts",
                     "max_tokens", "total_steps"):
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

    @classmethod
    def from_dict(cls, data: dict) -> ScoutConfig:
        """A config from plain data (JSON), refusing unknown keys."""
        return _from_dict(cls, data)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ScoutITMConfig:
    """ScoutITM cross-encoder; the defaults have 30.3 M trainable parameters (paper: 29.73 M)."""

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

    @classmethod
    def from_dict(cls, data: dict) -> ScoutITMConfig:
        return _from_dict(cls, data)

    def to_dict(self) -> dict:
        return asdict(self)


def _from_dict(cls, data: dict):
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__} needs a dict, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys: {unknown} (known: {sorted(known)})")
    return cls(**data)


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
        self.input_proj = nn.Linear(c.d_in, c.d_model)
        self.positions = nn.Parameter(torch.randn(c.max_tokens, c.d_model) * 0.02)   # [T, D]
        self.prompts = nn.Parameter(torch.randn(c.n_prompts, c.d_model) * 0.02)      # [K, D]
        self.body = _body(c.d_model, c.n_layers, c.n_heads, c.ff_mult, c.dropout)
        self.norm = nn.LayerNorm(c.d_model)
        self.readout = nn.Linear(c.n_prompts * c.d_model, c.d_text)

    def prompt_outputs(self, tokens: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The body's outputs at the K prompt positions ``[B, K, d_model]`` (after the final norm)."""
        c = self.config
        mask = _check_tokens(tokens, mask, c.d_in, c.max_tokens, "visual tokens")
        b, n = mask.shape
        x = self.input_proj(tokens) + self.positions[:n]                    # [B, n, D]
        prompts = self.prompts.unsqueeze(0).expand(b, -1, -1)                # [B, K, D]
        seq = torch.cat([x, prompts], dim=1)                                 # [B, n+K, D]
        pad = torch.cat([~mask, mask.new_zeros(b, c.n_prompts)], dim=1)      # [B, n+K] True = ignore
        attn = None
        if c.causal:
            s = n + c.n_prompts
            attn = torch.ones(s, s, dtype=torch.bool, device=seq.device).triu(1)   # [S, S]
        h = self.body(seq, mask=attn, src_key_padding_mask=pad)              # [B, n+K, D]
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


# -- class-balanced batches -----------------------------------------------------------------------
class ClassBalancedBatchSampler(torch.utils.data.Sampler[list[int]]):
    """Batches of dataset indices with an equal share of every class (e.g. normal / anomalous).

    With ``C`` classes each batch holds ``batch_size // C`` items of every class; the remaining
    ``batch_size % C`` seats go to ``C`` classes in turn (a rotating start, so over ``C``
    consecutive batches every class gets the same number of seats). Within a class, items are
    drawn from a seeded permutation without replacement; when it runs out a new permutation
    starts, so a small class is revisited more often than a large one (that is the balancing).
    A batch never holds the same item twice (a duplicate would be a false in-batch negative), so
    every class needs at least as many items as its largest per-batch share.

    ``n_batches`` batches per epoch (default: ``ceil(len(labels) / batch_size)``); the order
    depends only on ``seed`` and the epoch set with :meth:`set_epoch`.
    """

    def __init__(self, labels: Sequence[int] | np.ndarray | torch.Tensor, batch_size: int,
                 n_batches: int | None = None, seed: int = 0):
        labels = np.asarray(labels.cpu() if isinstance(labels, torch.Tensor) else labels)
        if labels.ndim != 1 or len(labels) == 0:
            raise ValueError("labels must be a non-empty 1-D sequence of class labels")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.classes, inverse = np.unique(labels, return_inverse=True)
        n_classes = len(self.classes)
        if batch_size < n_classes:
            raise ValueError(f"batch_size {batch_size} is smaller than the number of classes {n_classes}")
        self.members = [np.flatnonzero(inverse == c) for c in range(n_classes)]
        largest_share = batch_size // n_classes + (batch_size % n_classes > 0)
        small = [(str(self.classes[c]), len(m)) for c, m in enumerate(self.members) if len(m) < largest_share]
        if small:
            raise ValueError(f"classes with fewer items than their per-batch share {largest_share}: {small}")
        self.batch_size = batch_size
        self.n_batches = n_batches if n_batches is not None else math.ceil(len(labels) / batch_size)
        if not isinstance(self.n_batches, int) or self.n_batches < 1:
            raise ValueError(f"n_batches must be a positive integer, got {n_batches!r}")
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.n_batches

    def shares(self, batch: int) -> np.ndarray:
        """Seats per class ``[C]`` in batch number ``batch`` of an epoch."""
        n_classes = len(self.classes)
        base, extra = divmod(self.batch_size, n_classes)
        seats = np.full(n_classes, base)
        start = (batch * extra) % n_classes
        seats[(start + np.arange(extra)) % n_classes] += 1
        return seats

    def __iter__(self) -> Iterator[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        queues = [list(rng.permutation(m)) for m in self.members]
        for i in range(self.n_batches):
            batch: list[int] = []
            for c, share in enumerate(self.shares(i)):
                queue = queues[c]
                if len(queue) < share:
                    # the leftovers of this pass go first; the next pass puts them last so the
                    # batch cannot take one of them twice
                    fresh = rng.permutation(self.members[c])
                    left = set(queue)
                    queue.extend([j for j in fresh if j not in left] + [j for j in fresh if j in left])
                batch.extend(int(j) for j in queue[:share])
                del queue[:share]
            order = rng.permutation(len(batch))
            yield [batch[j] for j in order]


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
        result lines up with the shortlist, as the ITM signal of ``models.rerank.rerank_blend``."""
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


# -- the retriever of models.training -------------------------------------------------------------
# The embedded predictor: sized for the frozen CPU features of the embedded encoders (handcrafted
# appearance, MiniLM) and a CPU. ScoutConfig() itself keeps the paper's 24 layers and K = 64.
EMBEDDED_PREDICTOR = {"d_model": 256, "n_layers": 4, "n_heads": 4, "ff_mult": 4, "n_prompts": 16}


@dataclass
class ScoutRetrieverConfig:
    """SCOUT as a ``models.training`` retriever: frozen encoders, features and the predictor."""

    appearance: dict = field(default_factory=dict)   # ImageEncoderConfig of a_t (handcrafted by default)
    text: dict = field(default_factory=dict)         # TextEncoderConfig: the frozen target space (MiniLM)
    features: dict = field(default_factory=dict)     # FeatureConfig (n_f^max = 32 observations per track)
    predictor: dict = field(default_factory=lambda: dict(EMBEDDED_PREDICTOR))  # ScoutConfig fields
    geometry: bool = True                            # append g_t to each observation token

    def __post_init__(self) -> None:
        derived = sorted({"d_in", "d_text", "max_tokens"} & set(self.predictor))
        if derived:
            raise ValueError(f"ScoutRetrieverConfig.predictor: {derived} follow from the encoders and features; "
                             "leave them out")

    @classmethod
    def from_dict(cls, data: dict | None) -> ScoutRetrieverConfig:
        return _from_dict(cls, dict(data or {}))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class ObservationData:
    """A snapshot's frozen features as tensors: one row of observation tokens per track record."""

    rows: dict[tuple[int, int], int]             # record (track id, variant) -> row
    tokens: torch.Tensor                         # [R, n, d_in] observation tokens, zero-padded
    mask: torch.Tensor                           # [R, n] bool real observations
    text: object | None                          # models.features.TextFeatures of the queries
    query_video: dict[int, int]                  # query id -> video id
    query_predicates: dict[int, list[dict]]      # query id -> its predicates


def observation_tokens(features, geometry: bool = True) -> np.ndarray:
    """One token per Fast observation of a ``models.features.TrackFeatures``: the appearance
    vector ``a_t``, followed by the geometry ``g_t`` when ``geometry`` — ``[n_f, D_a (+ 8)]``."""
    parts = [np.asarray(features.appearance, np.float32)]
    if geometry:
        parts.append(np.asarray(features.geometry, np.float32))
    return np.concatenate(parts, axis=1)


def prepare_observations(extractor, snapshot, records=None, *, geometry: bool = True,
                         with_text: bool = True) -> ObservationData:
    """Frozen features of every stored track of ``snapshot`` (variant 0), of the extra ``records``
    (training variants) and of every query, packed as :class:`ObservationData`."""
    tracks = extractor.snapshot_tracks(snapshot, records)
    keys = sorted(tracks)
    if not keys:
        raise ValueError(f"snapshot {snapshot.split!r} has no tracks")
    tokens, mask = pad_tokens([torch.from_numpy(observation_tokens(tracks[k], geometry)) for k in keys],
                              extractor.config.n_fast_max)
    text = None
    if with_text and snapshot.queries:
        text = extractor.text_features([q.id for q in snapshot.queries], [q.text for q in snapshot.queries])
    return ObservationData(rows={k: i for i, k in enumerate(keys)}, tokens=tokens, mask=mask, text=text,
                           query_video={q.id: q.video_id for q in snapshot.queries},
                           query_predicates={q.id: list(q.predicates) for q in snapshot.queries})


def record_rows(data: ObservationData, records) -> torch.Tensor:
    try:
        return torch.as_tensor([data.rows[tuple(k)] for k in records], dtype=torch.long)
    except KeyError as exc:
        raise KeyError(f"record {exc.args[0]} was not prepared") from None


def query_rows(data: ObservationData, query_ids) -> np.ndarray:
    if data.text is None:
        raise ValueError("no query features were prepared (the snapshot has no queries)")
    return data.text.rows([int(q) for q in query_ids])


def contrastive_pairs(batch, within: slice | None = None) -> torch.Tensor:
    """Which groups of a ``models.batching.TrainBatch`` give an in-batch contrastive pair.

    Each group pairs its query with its clean target (record ``4i``). InfoNCE and SigLIP treat
    every other pair they score as a negative, so a group is left out (``False``) when its target
    is the target of an earlier kept group, or when a verified match links it to one (the query of
    one and the target of the other, ``relation == 1``): those would be false negatives. Unknown
    (⊥) pairs stay in-batch negatives, as in the papers. ``[B]`` bool.

    ``within`` (a slice of groups, e.g. a rank's share when the ranks' pairs are not gathered)
    restricts the choice to those groups, checked against each other only: the others are
    ``False``, and a conflict with a group outside cannot drop a group inside (the two are never
    scored together). Without it the whole batch is one set, the same on every rank.
    """
    from models.batching import GROUP_SIZE

    b = len(batch.query_ids)
    targets = [batch.records[i * GROUP_SIZE][0] for i in range(b)]
    match = (batch.relation[:, ::GROUP_SIZE] == 1).tolist()                  # [B][B] query i, target j
    keep = torch.zeros(b, dtype=torch.bool)
    kept: list[int] = []
    for i in range(b)[within if within is not None else slice(None)]:
        if all(targets[i] != targets[j] and not match[i][j] and not match[j][i] for j in kept):
            keep[i] = True
            kept.append(i)
    return keep


def no_pair_loss(module: nn.Module) -> torch.Tensor:
    """A zero loss that still reaches every trained parameter of ``module`` (each gets a zero
    gradient): what a process returns when none of its groups gives a pair, so gradient
    synchronisation across processes (DistributedDataParallel's hooks, the trainer's all-reduce)
    sees the same parameters on every rank."""
    return 0.0 * sum(p.sum() for p in module.parameters() if p.requires_grad)


class ScoutRetriever(nn.Module):
    """SCOUT behind the retriever interface of ``models.training``: observation tokens of frozen
    features through the predictor; queries are the frozen text encoder's pooled vectors."""

    kind = "scout"

    def __init__(self, config: ScoutRetrieverConfig | dict | None = None):
        super().__init__()
        from models.encoders import (
            ImageEncoderConfig,
            TextEncoderConfig,
            build_image_encoder,
            build_text_encoder,
        )
        from models.features import GEOMETRY_DIM, FeatureConfig

        cfg = config if isinstance(config, ScoutRetrieverConfig) else ScoutRetrieverConfig.from_dict(config)
        self.config = cfg
        self.feature_config = FeatureConfig.from_dict(cfg.features)
        # frozen encoders: plain attributes, never in the state dict
        self.appearance_encoder = build_image_encoder(ImageEncoderConfig.from_dict(cfg.appearance))
        self.text_encoder = build_text_encoder(TextEncoderConfig.from_dict(cfg.text))
        d_in = self.appearance_encoder.dim + (GEOMETRY_DIM if cfg.geometry else 0)
        self.predictor = ScoutPredictor(ScoutConfig.from_dict(
            {**cfg.predictor, "d_in": d_in, "d_text": self.text_encoder.dim,
             "max_tokens": self.feature_config.n_fast_max}))

    def config_dict(self) -> dict:
        return self.config.to_dict()

    @property
    def device(self) -> torch.device:
        return self.predictor.prompts.device

    def prepare(self, snapshot, records=None, *, cache_dir: str | None = None) -> ObservationData:
        from dataclasses import replace

        from models.features import FeatureExtractor

        fcfg = replace(self.feature_config, cache_dir=cache_dir or self.feature_config.cache_dir)
        extractor = FeatureExtractor(fcfg, self.appearance_encoder, text=self.text_encoder)
        return prepare_observations(extractor, snapshot, records, geometry=self.config.geometry)

    def encode_tracks(self, data: ObservationData, records) -> torch.Tensor:
        """Predicted caption embeddings ``[P, d_text]`` of ``records`` (row order kept)."""
        rows = record_rows(data, records)
        return self.predictor(data.tokens[rows].to(self.device), data.mask[rows].to(self.device))

    def encode_queries(self, data: ObservationData, query_ids) -> torch.Tensor:
        """The frozen text embeddings ``[Q, d_text]`` of the queries, unit rows."""
        pooled = torch.from_numpy(data.text.pooled[query_rows(data, query_ids)]).to(self.device)
        return self.predictor.encode_queries(pooled)

    @torch.no_grad()
    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        """Any query texts through the frozen text encoder, unit rows ``[Q, d_text]``."""
        pooled = torch.from_numpy(self.text_encoder.encode(list(texts)).pooled).to(self.device)
        return self.predictor.encode_queries(pooled)

    def score(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Cosine similarity ``[Q, P]`` (SCOUT ranks by it)."""
        return q @ v.T

    def training_loss(self, data: ObservationData, batch, ctx) -> dict:
        """Symmetric InfoNCE over (query, clean target) pairs of the batch (:func:`contrastive_pairs`
        leaves out groups that would be false in-batch negatives); with ``ctx.gather`` and several
        ranks the pairs of all ranks are scored together, otherwise each rank scores (and chooses)
        the pairs of its own groups only."""
        from models.batching import GROUP_SIZE

        qs, _ = batch.local_slices(ctx.rank, ctx.world_size)
        gather = ctx.world_size > 1 and ctx.gather
        keep = contrastive_pairs(batch, None if gather else qs)              # [B]
        local = [i for i in range(len(batch.query_ids))[qs] if keep[i]]
        n_pairs = int(keep.sum())
        dropped = (len(batch.query_ids) if gather else len(range(len(batch.query_ids))[qs])) - n_pairs
        if not local and not gather:     # nothing to score here (no rank waits on this one's embeddings)
            return {"loss": no_pair_loss(self), "pairs": 0, "dropped_pairs": dropped}
        if local:
            pred = self.encode_tracks(data, [batch.records[i * GROUP_SIZE] for i in local])   # [b, d]
            target = self.encode_queries(data, [batch.query_ids[i] for i in local])            # [b, d]
        else:       # every local group conflicts with another rank's: this rank adds no pair to the gathered batch
            d = self.predictor.config.d_text
            pred = torch.zeros(0, d, device=self.device, requires_grad=True)
            target = torch.zeros(0, d, device=self.device)
        rank, world = (ctx.rank, ctx.world_size) if gather else (0, 1)
        loss = info_nce(pred, target, self.predictor.config.tau, rank=rank, world_size=world)
        if not local:
            loss = loss + no_pair_loss(self)
        return {"loss": loss, "pairs": n_pairs, "dropped_pairs": dropped}

    def optimizer_defaults(self, steps: int) -> dict:
        """SCOUT's recipe for ``models.training.train`` (fields the TrainConfig sets win): AdamW with
        the predictor config's learning rate, betas and weight decay, a linear warm-up over the same
        share of the run as ``warmup_steps / total_steps`` (600 of 6000 in the paper), then a cosine
        decay to zero; groups without noisy-GT variants (only each group's clean target is read, so
        the variants' features would be computed for nothing)."""
        c = self.predictor.config
        return {"lr": c.lr, "betas": c.betas, "weight_decay": c.weight_decay,
                "warmup_steps": round(steps * c.warmup_steps / c.total_steps), "min_lr_ratio": 0.0,
                "batching": {"noisy_gt": False}}

    def no_weight_decay(self) -> set[str]:
        """Token positions and prompt tokens are not decayed (as in :func:`make_optimizer`)."""
        return {"predictor.positions", "predictor.prompts"}


def build_retriever(config: dict | None = None) -> ScoutRetriever:
    """The factory ``models.training.MODEL_KINDS["scout"]`` points to."""
    return ScoutRetriever(config)
