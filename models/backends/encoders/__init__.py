"""Frozen encoders behind one small interface (``base.py``), and a content-keyed feature cache.

Image encoders (``ImageEncoder``): object crops → one vector each; full frames → a unit global
feature and spatial context tokens. Text encoders (``TextEncoder``): texts → a pooled vector and
per-token vectors. Each has a stable ``name`` (implementation, settings and weights digest) that
feature caches key on.

- Embedded defaults (CPU, nothing downloaded): ``HandcraftedAppearanceEncoder`` (CIELAB colour
  histograms of the box's upper and lower halves, HOG, geometry) and the packaged
  all-MiniLM-L6-v2 (``SentenceTransformerTextEncoder`` with ``kind="minilm"``).
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
from models.backends.encoders.handcrafted import HandcraftedAppearanceEncoder, HandcraftedConfig
from models.backends.encoders.text import (
    CLIPTextEncoder,
    SentenceTransformerTextEncoder,
    TextEncoderConfig,
    build_text_encoder,
    packaged_minilm_path,
)
from models.config import PlainConfig


@dataclass
class ImageEncoderConfig(PlainConfig):
    """Which frozen image encoder to load and how to run it."""

    kind: str = "handcrafted"                    # "handcrafted" (embedded default) | "hf" (a local HF vision tower)
    path: str = ""                               # local model folder (kind "hf")
    device: str = "cpu"                          # "cpu" | "cuda[:N]" | "auto" (kind "hf")
    batch_size: int = 32                         # images per forward pass (kind "hf")
    image_size: int | None = None                # square input side; None: the model's own (kind "hf")
    max_patches: int | None = None               # SigLIP2 patch budget; None: the model's num_patches
    handcrafted: dict = field(default_factory=dict)  # HandcraftedConfig settings (kind "handcrafted")

    def __post_init__(self) -> None:
        if self.kind not in IMAGE_KINDS:
            raise ValueError(f"ImageEncoderConfig: kind must be one of {', '.join(IMAGE_KINDS)}, got {self.kind!r}")


def build_image_encoder(config: ImageEncoderConfig | dict | None = None) -> ImageEncoder:
    """The image encoder a config names (the handcrafted one by default)."""
    cfg = config if isinstance(config, ImageEncoderConfig) else ImageEncoderConfig.from_dict(config)
    return IMAGE_ENCODERS[cfg.kind](cfg)


def _handcrafted(cfg: ImageEncoderConfig) -> ImageEncoder:
    return HandcraftedAppearanceEncoder(HandcraftedConfig.from_dict(cfg.handcrafted))


def _hf_vision(cfg: ImageEncoderConfig) -> ImageEncoder:
    from models.backends.encoders.vision_hf import HFVisionEncoder  # loads torch and transformers

    return HFVisionEncoder(cfg.path, device=cfg.device, batch_size=cfg.batch_size, image_size=cfg.image_size,
                           max_patches=cfg.max_patches)


# The image encoders: kind -> builder from an ImageEncoderConfig.
IMAGE_ENCODERS = {"handcrafted": _handcrafted, "hf": _hf_vision}
IMAGE_KINDS = tuple(IMAGE_ENCODERS)


__all__ = [
    "IMAGE_ENCODERS",
    "IMAGE_KINDS",
    "CLIPTextEncoder",
    "EncoderConfigError",
    "FeatureCache",
    "FrameEncoding",
    "HandcraftedAppearanceEncoder",
    "HandcraftedConfig",
    "ImageEncoder",
    "ImageEncoderConfig",
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
