"""The frozen-encoder interface: image crops and frames to vectors and tokens, texts to a pooled
vector and token vectors.

Every encoder has a stable ``name`` that says what it computes: the implementation, its settings
and, for learned encoders, a digest of the weights. Feature caches key on it, so two encoders
with the same name must give the same numbers for the same input.

Images are BGR ``uint8`` arrays ``[H, W, 3]`` (what ``models.media.video.FrameReader`` returns). Outputs
are ``float32`` NumPy arrays: the retrievers train on top of frozen features and never send
gradients into an encoder.
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

# Files whose bytes make up a model's weights and architecture (a digest of these names it).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")
CONFIG_NAMES = ("config.json", "modules.json", "config_sentence_transformers.json", "sentence_bert_config.json",
                "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
                "vocab.json", "merges.txt", "tokenizer.model", "special_tokens_map.json")


class EncoderConfigError(ValueError):
    """An encoder that cannot be loaded (a missing path, an unsupported architecture); says why."""


@dataclass
class FrameEncoding:
    """What an image encoder returns for full frames (the Slow branch's context)."""

    global_features: np.ndarray                  # [N, dim] float32, unit rows: one semantic vector per frame
    tokens: np.ndarray                           # [N, T, token_dim] float32: spatial context tokens
    token_mask: np.ndarray                       # [N, T] bool: True for real tokens (False: padding)


@dataclass
class TextEncoding:
    """What a text encoder returns for a list of texts."""

    pooled: np.ndarray                           # [N, dim] float32: one vector per text
    tokens: np.ndarray                           # [N, L, token_dim] float32: per-token vectors, padded
    mask: np.ndarray                             # [N, L] bool: True for real tokens


@runtime_checkable
class ImageEncoder(Protocol):
    """A frozen image encoder (see the module docstring)."""

    name: str                                    # stable identity, used as a cache key
    dim: int                                     # width of crop vectors and of global frame features
    token_dim: int                               # width of context tokens

    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """One vector per object crop: ``[N, dim]`` float32."""
        ...

    def encode_frames(self, frames: Sequence[np.ndarray]) -> FrameEncoding:
        """Unit global features and context tokens of full frames."""
        ...


@runtime_checkable
class TextEncoder(Protocol):
    """A frozen text encoder (see the module docstring)."""

    name: str                                    # stable identity, used as a cache key
    dim: int                                     # width of the pooled vector
    token_dim: int                               # width of the token vectors

    def encode(self, texts: Sequence[str]) -> TextEncoding:
        ...


def check_images(images: Sequence[np.ndarray], what: str) -> None:
    """Reject anything that is not a non-empty BGR uint8 image, naming the first bad one."""
    for i, img in enumerate(images):
        if not isinstance(img, np.ndarray) or img.dtype != np.uint8 or img.ndim != 3 or img.shape[2] != 3:
            got = f"{img.dtype} {list(img.shape)}" if isinstance(img, np.ndarray) else type(img).__name__
            raise ValueError(f"{what} {i}: expected a BGR uint8 image [H, W, 3], got {got}")
        if img.shape[0] < 1 or img.shape[1] < 1:
            raise ValueError(f"{what} {i}: empty image {list(img.shape)}")


def check_texts(texts: Sequence[str]) -> list[str]:
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise ValueError(f"text {i}: expected a non-empty string, got {t!r}")
    return texts


def model_folder(path: str | os.PathLike | None, what: str) -> Path:
    """The resolved local model folder; ``EncoderConfigError`` when it is not there."""
    if not path:
        raise EncoderConfigError(f"{what}: no model path set (a local Hugging Face folder is required; "
                                 "nothing is downloaded)")
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise EncoderConfigError(f"{what}: model folder not found: {folder} (a local Hugging Face folder with "
                                 "config.json and weights is required; nothing is downloaded)")
    if not (folder / "config.json").is_file() and not (folder / "modules.json").is_file():
        raise EncoderConfigError(f"{what}: {folder} has no config.json (is it a Hugging Face model folder?)")
    return folder.resolve()


def weights_digest(folder: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 over a model folder's weight and config files (relative names and bytes, sorted).

    Sub-folders count too (sentence-transformers keeps its pooling and dense layers there).
    """
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file()
                   and (p.suffix in WEIGHT_SUFFIXES or p.name in CONFIG_NAMES))
    if not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise EncoderConfigError(f"{folder}: no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    digest = hashlib.sha256()
    for p in files:
        digest.update(p.relative_to(folder).as_posix().encode() + b"\0")
        with open(p, "rb") as fh:
            while block := fh.read(chunk):
                digest.update(block)
    return digest.hexdigest()


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    norm = np.linalg.norm(x, axis=axis, keepdims=True)
    return (x / np.maximum(norm, 1e-12)).astype(np.float32)
