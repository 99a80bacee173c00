"""The describer interface: one trajectory in, one validated description (or a recorded failure) out.

DESIGN 2.6: a describer proposes, per pooled trajectory, an appearance description, a motion
description and structured facts (:class:`models.facts.Description`) from chronologically
ordered crops of the target plus target-marked full frames::

    describer = build_describer("heuristic", {})
    result = describer.describe(DescribeRequest(video_path, frames, boxes, budget=DescribeBudget(max_crops=8)))
    if not result.failed:
        facts = result.description.facts


Every backend returns a :class:`DescribeResult` that records what went in and what came out: the
frame indices of the crops and of the full frames actually used (chronological), every raw answer
and why each rejected one was rejected, the number of attempts, the prompt version and the
SHA-256 of its text, the backend and the model. An answer that is not JSON, breaks the schema or
claims frames outside the video (or outside the trajectory's observed span) is retried within
``budget.max_attempts``; when the budget is spent the result says ``failed`` and keeps the raw
texts. Model misbehaviour never raises; bad arguments raise ``ValueError``.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from models.backends.llm.jsonout import extract_json_object
from models.backends.tracking.base import FrameSource
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.facts import Description, InvalidOutput, parse_description


class DescriberConfigError(ValueError):
    """A describer configuration that cannot run (missing model path, unknown prompt version, ...)."""


@dataclass
class DescribeBudget(PlainConfig):
    """What one description may cost (recorded with it, DESIGN 2.6)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    max_crops: int = 8                           # crops of the target, spread over its observations
    max_full_frames: int = 2                     # target-marked full frames for context (0: none)
    max_new_tokens: int = 1024                   # tokens one answer may use
    max_attempts: int = 3                        # answers asked for before the result is a failure

    def __post_init__(self) -> None:
        problems = []
        if self.max_crops < 1:
            problems.append(f"max_crops must be >= 1, got {self.max_crops}")
        if self.max_full_frames < 0:
            problems.append(f"max_full_frames must be >= 0, got {self.max_full_frames}")
        if self.max_new_tokens < 1:
            problems.append(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.max_attempts < 1:
            problems.append(f"max_attempts must be >= 1, got {self.max_attempts}")
        if problems:
            raise ValueError("DescribeBudget: " + "; ".join(problems))


@dataclass
class DescribeRequest:
    """One trajectory to describe: its observations and the video they come from."""

    video_path: str                              # video file or frame folder, read with models.media.video.FrameReader
    frames: np.ndarray                           # [N] int, strictly increasing frame indices of the observations
    boxes: np.ndarray                            # [N, 4] float, xyxy in original pixels
    budget: DescribeBudget = field(default_factory=DescribeBudget)
    prompt_version: str | None = None            # None: the backend's current version
    fps: float | None = None                     # frame rate override (a frame folder has none of its own)
    trajectory_id: int | None = None             # for messages only

    def __post_init__(self) -> None:
        self.frames = np.asarray(self.frames, dtype=np.int64).reshape(-1)
        self.boxes = np.asarray(self.boxes, dtype=np.float64).reshape(-1, 4) if np.size(self.boxes) else \
            np.zeros((0, 4), np.float64)
        if isinstance(self.budget, dict):
            self.budget = DescribeBudget.from_dict(self.budget)
        where = f"trajectory {self.trajectory_id}" if self.trajectory_id is not None else "trajectory"
        if not self.video_path:
            raise ValueError(f"{where}: video_path is empty")
        if len(self.frames) == 0:
            raise ValueError(f"{where}: no observations")
        if len(self.frames) != len(self.boxes):
            raise ValueError(f"{where}: {len(self.frames)} frames but {len(self.boxes)} boxes")
        if (self.frames < 0).any() or (np.diff(self.frames) <= 0).any():
            raise ValueError(f"{where}: frame indices must be >= 0 and strictly increasing")
        if not np.isfinite(self.boxes).all():
            raise ValueError(f"{where}: boxes must be finite")
        if ((self.boxes[:, 2] <= self.boxes[:, 0]) | (self.boxes[:, 3] <= self.boxes[:, 1])).any():
            raise ValueError(f"{where}: every box needs x2 > x1 and y2 > y1")
        if self.fps is not None and not (np.isfinite(self.fps) and self.fps > 0):
            raise ValueError(f"{where}: fps must be > 0, got {self.fps}")

    @property
    def span(self) -> tuple[int, int]:
        """The observed interval, half-open: ``[first frame, last frame + 1)``."""
        return int(self.frames[0]), int(self.frames[-1]) + 1


@dataclass
class DescribeResult:
    """What a describer did for one trajectory (stored with the proposal, DESIGN 2.6)."""

    description: Description | None             # the validated description; None when failed
    failed: bool                                 # True: no valid answer within the attempt budget
    raw_texts: list[str]                         # every answer, in order, valid or not
    errors: list[str]                            # why each rejected answer was rejected (attempt k: ...)
    attempts: int                                # answers asked for
    crop_frames: list[int]                       # frames whose crops were used, chronological
    full_frames: list[int]                       # frames used whole with the target marked, chronological
    context_frames: list[int]                    # other frames read (e.g. for a background model)
    prompt_version: str                          # the prompt (or rule set) version used
    prompt_sha256: str                           # SHA-256 of that prompt's text (or of the rules' settings)
    backend: str                                 # "heuristic" | "transformers" | "openai"
    model: str                                   # model id or path ("" for the heuristic)
    budget: dict                                 # the DescribeBudget as given
    settings: dict = field(default_factory=dict)  # the backend's settings (no secrets)
    seconds: float = 0.0                         # wall time of the whole call

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["description"] = self.description.to_dict() if self.description is not None else None
        return out


@runtime_checkable
class Describer(Protocol):
    """What every describing backend implements."""

    name: str                                    # backend name
    model: str                                   # model id or path

    def describe(self, request: DescribeRequest, *, reader: FrameSource | None = None) -> DescribeResult: ...


# -- inputs --------------------------------------------------------------------------------------
def uniform_positions(n: int, k: int) -> list[int]:
    """``min(n, k)`` distinct positions spread evenly over ``range(n)``, both ends included."""
    if n <= 0 or k <= 0:
        return []
    if k >= n:
        return list(range(n))
    if k == 1:
        return [(n - 1) // 2]
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)})


def interior_positions(n: int, k: int) -> list[int]:
    """``min(n, k)`` positions at the centres of ``k`` equal parts of ``range(n)`` (no ends)."""
    if n <= 0 or k <= 0:
        return []
    if k >= n:
        return list(range(n))
    return sorted({min(n - 1, int((i + 0.5) * n / k)) for i in range(k)})


def clean_observations(boxes: np.ndarray, width: int, height: int, *, margin: float = 1.5,
                       min_height: float = 0.0) -> np.ndarray:
    """[N] bool: boxes that touch no frame edge (the whole target is in view) and are tall enough."""
    b = np.asarray(boxes, np.float64).reshape(-1, 4)
    inside = (b[:, 0] > margin) & (b[:, 1] > margin) & (b[:, 2] < width - margin) & (b[:, 3] < height - margin)
    return inside & ((b[:, 3] - b[:, 1]) >= min_height)


def select_inputs(request: DescribeRequest, width: int, height: int, *, min_crop_height: float = 0.0
                  ) -> tuple[list[int], list[int]]:
    """Positions (into the observation list) of the crops and of the full frames to use.

    Crops are spread evenly over the observations whose box is wholly in view and at least
    ``min_crop_height`` tall (over all observations when fewer of those than the budget exist);
    full frames sit at the centres of equal parts of the trajectory. Both lists are chronological.
    """
    n = len(request.frames)
    clean = np.flatnonzero(clean_observations(request.boxes, width, height, min_height=min_crop_height))
    pool = clean if len(clean) >= min(n, request.budget.max_crops) else np.arange(n)
    crops = [int(pool[p]) for p in uniform_positions(len(pool), request.budget.max_crops)]
    full = interior_positions(n, request.budget.max_full_frames)
    return crops, full


def check_against_video(request: DescribeRequest, n_frames: int, width: int, height: int) -> None:
    """ValueError when an observation lies after the video's last frame or outside the frame."""
    if request.frames[-1] >= n_frames:
        raise ValueError(f"observation at frame {int(request.frames[-1])}, but the video has {n_frames} frames")
    b = request.boxes
    outside = np.flatnonzero((b[:, 2] <= 0) | (b[:, 3] <= 0) | (b[:, 0] >= width) | (b[:, 1] >= height))
    if len(outside):
        raise ValueError(f"the box at frame {int(request.frames[outside[0]])} lies outside the {width}x{height} frame")


# -- outputs -------------------------------------------------------------------------------------
def check_description(raw: str, *, n_frames: int, span: tuple[int, int]) -> Description:
    """Validate an answer: schema (``parse_description``), then frames inside the video and facts
    that touch the trajectory's observed ``span``. Raises :class:`InvalidOutput` with the reason."""
    description = parse_description(extract_json_object(raw), n_frames=n_frames)
    first, end = span
    for f in description.facts:
        bad = [e for e in f.evidence_frames if e >= n_frames]
        if bad:
            raise InvalidOutput(f"fact {f.id}: evidence frame {bad[0]} is after the video's {n_frames} frames", raw)
        if f.end_frame <= first or f.start_frame >= end:
            raise InvalidOutput(f"fact {f.id}: interval [{f.start_frame}, {f.end_frame}) lies outside the "
                                f"trajectory's observed frames [{first}, {end})", raw)
    return description


class Stopwatch:
    """Wall time since construction, in seconds."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    def seconds(self) -> float:
        return round(time.perf_counter() - self._start, 4)
