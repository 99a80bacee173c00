"""What the SAM 2 tracker feeds and keeps: frames from a ``FrameSource`` preprocessed exactly as
SAM 2's JPEG loader does (RGB, bicubic resize to ``image_size`` square, ImageNet mean/std), read
lazily one at a time, and the per-video state (box prompts and inference states per anchor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from models.backends.tracking.base import (
    FrameSource,
)
from models.backends.tracking.sam2_anchors import AnchorIdentity

IMG_MEAN = (0.485, 0.456, 0.406)  # SAM 2's input normalisation (sam2.utils.misc.load_video_frames)
IMG_STD = (0.229, 0.224, 0.225)


# -- frames ----------------------------------------------------------------------------------------
class FrameImages:
    """The video as SAM 2's inference state expects ``images``: ``len()`` and ``[i]`` -> [3, S, S].

    Frames are read from the FrameSource when the model asks for them and preprocessed exactly as
    ``sam2.utils.misc.load_video_frames_from_jpg_images`` does (RGB, PIL's default (bicubic)
    resize to S x S, /255, ImageNet mean/std in float32), without a JPEG round trip. ``mean``,
    ``std``, ``dtype`` and ``resample`` serve models that preprocess otherwise (SAM 3: 0.5,
    float16 and bilinear).
    """

    def __init__(self, frames: FrameSource, image_size: int, device: torch.device, *,
                 mean: tuple[float, float, float] = IMG_MEAN, std: tuple[float, float, float] = IMG_STD,
                 dtype: torch.dtype = torch.float32, resample: int | None = None):
        self.frames = frames
        self.resample = resample  # a PIL filter; None: PIL's default (bicubic), as SAM 2's loader
        self.image_size = int(image_size)
        self.device = device
        self.dtype = dtype
        self.mean = torch.tensor(mean, dtype=torch.float32)[:, None, None]
        self.std = torch.tensor(std, dtype=torch.float32)[:, None, None]

    def __len__(self) -> int:
        return int(self.frames.frame_count)

    def __getitem__(self, index: int) -> torch.Tensor:
        from PIL import Image

        frame = self.frames.read(int(index))
        if frame.shape != (self.frames.height, self.frames.width, 3):
            raise ValueError(
                f"frame {index} has shape {frame.shape}, expected "
                f"({self.frames.height}, {self.frames.width}, 3) (BGR)"
            )
        rgb = Image.fromarray(np.ascontiguousarray(frame[:, :, ::-1]))
        size = (self.image_size, self.image_size)
        resized = rgb.resize(size) if self.resample is None else rgb.resize(size, resample=self.resample)
        resized = np.asarray(resized) / 255.0                                         # float64, as SAM 2
        img = torch.from_numpy(resized).permute(2, 0, 1).to(torch.float32)            # [3, S, S]
        img = (img - self.mean) / self.std
        return img.to(self.device, self.dtype)


# -- state -----------------------------------------------------------------------------------------
@dataclass
class BoxPrompt:
    pid: int                   # provisional identity id (unique within the state)
    category: str
    box: np.ndarray            # [4] float32 xyxy, original pixels
    score: float | None        # detector score, None for an explicit box


@dataclass
class Sam2State:
    """One video's tracking state (what ``init_state`` returns)."""

    frames: FrameSource
    images: FrameImages
    prompts: dict[int, list[BoxPrompt]] = field(default_factory=dict)   # anchor frame -> prompts
    categories: list[str] = field(default_factory=list)                  # categories prompted
    identities: dict[int, AnchorIdentity] = field(default_factory=dict)  # pid -> identity
    propagated: bool = False
    next_pid: int = 1
    stats: dict = field(default_factory=lambda: {
        "anchors": 0, "frames_processed": 0, "max_stored_frames": 0,
    })
