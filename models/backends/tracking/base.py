"""The tracker interface, shaped like SAM 2's video predictor.

A tracker proposes query-independent object trajectories for one video::

    tracker = build_tracker(config)
    state = tracker.init_state(frames)                       # frames: a FrameSource
    tracker.add_prompt(state, category="person")             # one call per category prompt
    for step in tracker.propagate(state):                    # generator, one step per frame done
        ...                                                  # step.frame_index, step.objects
    proposals = tracker.proposals(state)                     # the finished trajectories

Boxes are ``[x1, y1, x2, y2]`` in original-image pixel coordinates. A trajectory holds an
observation only on frames where the image gave evidence for it (a detection matched by the
associator, a non-empty mask); nothing is interpolated.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class FrameSource(Protocol):
    """Random and sequential access to the decoded frames of one video (BGR, uint8, HxWx3)."""

    fps: float
    frame_count: int
    width: int
    height: int

    def read(self, index: int) -> np.ndarray: ...

    def iter_frames(self, start: int = 0, stop: int | None = None, step: int = 1) -> Iterator[tuple[int, np.ndarray]]: ...


@dataclass
class FrameObjects:
    """What ``propagate`` yields for one processed frame."""

    frame_index: int
    object_ids: list[int]            # tracker-local identities present on this frame
    boxes: np.ndarray                # [n, 4] float32, xyxy, original pixels
    scores: np.ndarray               # [n] float32, detector/mask confidence
    categories: list[str]            # [n] category prompt that produced each object
    fraction_done: float             # progress in [0, 1]


@dataclass
class TrackProposal:
    """One proposed trajectory: observations only where the image gave evidence."""

    track_id: int
    category: str
    frames: np.ndarray               # [N] int32, strictly increasing frame indices
    boxes: np.ndarray                # [N, 4] float32, xyxy, original pixels
    scores: np.ndarray               # [N] float32
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.frames = np.asarray(self.frames, dtype=np.int32).reshape(-1)
        self.boxes = np.asarray(self.boxes, dtype=np.float32).reshape(-1, 4)
        self.scores = np.asarray(self.scores, dtype=np.float32).reshape(-1)
        if not (len(self.frames) == len(self.boxes) == len(self.scores)):
            raise ValueError(
                f"track {self.track_id}: {len(self.frames)} frames, {len(self.boxes)} boxes and "
                f"{len(self.scores)} scores must have the same length"
            )


class Tracker(Protocol):
    """What every tracking backend implements (see module docstring)."""

    name: str

    def init_state(self, frames: FrameSource) -> object: ...

    def add_prompt(self, state: object, *, category: str, frame_index: int | None = None,
                   boxes: np.ndarray | None = None) -> None: ...

    def propagate(self, state: object) -> Iterator[FrameObjects]: ...

    def proposals(self, state: object) -> list[TrackProposal]: ...


def mask_boxes(masks):
    """Pixel-edge bounding boxes and areas of binary masks ``[n, H, W]`` (torch or NumPy).

    The box of a mask is ``[x_min, y_min, x_max + 1, y_max + 1]``; an empty mask has area 0 (its
    box is meaningless). Returns ``(boxes [n, 4] float32, areas [n] int64)`` as NumPy arrays.
    """
    import torch

    masks = torch.as_tensor(masks).bool()
    n, h, w = masks.shape
    if n == 0:
        return np.zeros((0, 4), np.float32), np.zeros(0, np.int64)
    rows = masks.any(dim=2).to(torch.uint8)                      # [n, H]
    cols = masks.any(dim=1).to(torch.uint8)                      # [n, W]
    y0 = rows.argmax(dim=1)                                      # first row with mask
    y1 = h - rows.flip(1).argmax(dim=1)                          # last row with mask + 1
    x0 = cols.argmax(dim=1)
    x1 = w - cols.flip(1).argmax(dim=1)
    boxes = torch.stack([x0, y0, x1, y1], dim=1).cpu().numpy().astype(np.float32)
    areas = masks.sum(dim=(1, 2)).cpu().numpy().astype(np.int64)
    return boxes, areas


class TrackerConfigError(ValueError):
    """A tracker configuration that cannot run (unknown category, missing checkpoint, ...)."""


def resolve_torch_device(name: str):
    """The torch device a model tracker's ``device`` setting names ("auto": CUDA when available);
    ``TrackerConfigError`` when CUDA is asked for and absent."""
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise TrackerConfigError(f"device {name!r} asked for, but CUDA is not available")
    return device


def check_frame_source(frames) -> None:
    """Refuse what is not a FrameSource (TypeError) or a video without frames (ValueError)."""
    if not isinstance(frames, FrameSource):
        raise TypeError("frames must implement FrameSource (read, iter_frames, fps, frame_count, width, height)")
    if frames.frame_count <= 0 or frames.width <= 0 or frames.height <= 0:
        raise ValueError(f"the video has no frames ({frames.frame_count} frames, {frames.width}x{frames.height})")


def run_tracker(tracker: Tracker, frames: FrameSource, categories: list[str], progress=None) -> list[TrackProposal]:
    """Run a tracker over a whole video for the given category prompts.

    ``progress(fraction, message)`` is called as frames are processed.
    """
    if not categories:
        raise TrackerConfigError("at least one category prompt is required")
    state = tracker.init_state(frames)
    for category in categories:
        tracker.add_prompt(state, category=category)
    for step in tracker.propagate(state):
        if progress is not None:
            progress(step.fraction_done, f"frame {step.frame_index + 1}/{frames.frame_count}")
    return tracker.proposals(state)
