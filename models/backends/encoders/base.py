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
import math
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
    roi_dim: int                                 # width of region-of-interest vectors (encode_rois)
    # an encoder whose ROI rows are flattened bins ([C, s, s], channel-major) also has roi_bins (s) and roi_channels (C)

    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """One vector per object crop: ``[N, dim]`` float32."""
        ...

    def encode_rois(self, frames: Sequence[np.ndarray], boxes: Sequence[np.ndarray]) -> np.ndarray:
        """One vector per box, read from the full frame it lies in (the Fast branch's ``a_t``):
        ``boxes[i]`` ``[n_i, 4]`` xyxy in frame ``i``'s pixels → ``[Σ n_i, roi_dim]`` float32, rows in
        order (frame by frame, box by box)."""
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


def check_boxes(frames: Sequence[np.ndarray], boxes: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``boxes`` as float32 ``[n_i, 4]`` arrays, one per frame, each box finite with ``x2 > x1`` and
    ``y2 > y1``; ``ValueError`` names the first bad one."""
    if len(boxes) != len(frames):
        raise ValueError(f"need one box array per frame, got {len(boxes)} for {len(frames)} frames")
    out = []
    for i, b in enumerate(boxes):
        b = np.asarray(b, dtype=np.float32)
        if b.ndim == 1 and b.size == 4:
            b = b[None]
        if b.ndim != 2 or b.shape[1] != 4:
            raise ValueError(f"boxes of frame {i}: expected [n, 4] xyxy, got {list(b.shape)}")
        if not np.all(np.isfinite(b)) or np.any(b[:, 2] <= b[:, 0]) or np.any(b[:, 3] <= b[:, 1]):
            raise ValueError(f"boxes of frame {i}: every box needs finite x1 < x2 and y1 < y2")
        out.append(b)
    return out


def budget_grid(height: int, width: int, budget: int, multiple: int, *, upscale: bool = False) -> tuple[int, int]:
    """The input size of an image under a pixel budget, in units of ``multiple`` (a patch side):
    ``(rows, cols)`` with ``rows · cols · multiple² <= budget``, the aspect ratio kept as well as the
    rounding down to whole units allows, at least one unit each way. An image already within the
    budget keeps its size (rounded down) unless ``upscale``, which scales it up to fill the budget."""
    if budget < multiple * multiple:
        raise ValueError(f"pixel budget {budget} is smaller than one {multiple}x{multiple} patch")
    scale = math.sqrt(budget / max(1.0, float(height) * float(width)))
    if not upscale:
        scale = min(scale, 1.0)
    rows = max(1, int(height * scale / multiple))
    cols = max(1, int(width * scale / multiple))
    while rows * cols * multiple * multiple > budget:        # rounding never overshoots by much
        if rows >= cols:
            rows -= 1
        else:
            cols -= 1
    return rows, cols


def region(frame: np.ndarray, box: np.ndarray) -> np.ndarray:
    """The pixels of ``box`` (xyxy, floored and ceiled outwards), clipped to the frame, at least one pixel."""
    fh, fw = frame.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box)
    xa = int(np.clip(np.floor(x1), 0, fw - 1))
    ya = int(np.clip(np.floor(y1), 0, fh - 1))
    xb = int(np.clip(np.ceil(x2), xa + 1, fw))
    yb = int(np.clip(np.ceil(y2), ya + 1, fh))
    return frame[ya:yb, xa:xb]


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
