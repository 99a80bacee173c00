"""Category-prompted detectors that run on a CPU with nothing downloaded.

A detector turns one BGR frame into boxes and confidences::

    detector = build_detector("person", {"min_height": 72})
    boxes, scores = detector.detect(frame_bgr, frame_index)   # [n, 4] float32 xyxy pixels, [n] float32

Categories:

- ``person`` — OpenCV's bundled HOG + linear SVM people detector (Dalal & Triggs, trained on
  INRIA pedestrians: upright people seen whole, roughly from the front, back or side, at least
  ~96 px tall inside its 64x128 window). The frame is resized so that the smallest person of
  interest (``min_height``) fills that window, the image pyramid is capped at ``max_height``,
  windows are grouped (OpenCV's ``groupRectangles``) and then suppressed (NMS), and each window is
  trimmed to the person inside it (the INRIA window holds a margin around the person). Scores
  squash the SVM margin ``m`` into [0, 1): ``1 - exp(-m / margin_scale)`` (with the default 0.5:
  margin 0.5 -> 0.63, 1 -> 0.86; people on the rendered scenes mostly get margins of 0.8-2.5).
  Sitting, heavily occluded, cut-off or very small people are mostly missed. With ``regions``
  ``"frame"`` (the default) every frame is scanned whole and the detector is stateless; with
  ``"motion"`` it scans only around moving things and its last boxes, and the whole frame every
  ``full_frame_every``-th call (a few times cheaper on a static camera; see ``HogPersonDetector``).
- ``moving object`` — background subtraction for a static camera (OpenCV's MOG2), then
  morphology, connected components and an area filter. It finds anything that moves and differs
  from the learnt background: people, vehicles, animals, balls; a person who stands still long
  enough fades into the background. Scores are the blob's fill ratio of its box. **Stateful**:
  the model learns the background from the frames it sees, so ``detect`` must be called with
  strictly increasing frame indices (gaps are fine), ideally after :meth:`prime` with frames
  spread over the video (it learns their per-pixel median as the initial background); call
  :meth:`reset` before reusing it on another video. It needs a static camera: a panning or
  shaking camera makes the whole frame "move".

Settings are plain dicts (from a proposal run's JSON config); unknown keys and bad values raise
``ValueError`` with a message naming the setting.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Protocol

import cv2
import numpy as np

from models.backends.tracking.base import TrackerConfigError
from models.backends.tracking.regions import (
    MotionBlobs,
    merge_regions,
    person_regions,
    scanned_fraction,
)

# The INRIA training crops are 64x128 with the person ~96 px tall in the middle.
HOG_WINDOW = (64, 128)
HOG_PERSON_HEIGHT = 96.0
# What the HOG people detector scans (HogPersonSettings.regions).
HOG_REGIONS = ("frame", "motion")


class Detector(Protocol):
    """What the tracker needs from a detector."""

    category: str                   # the category prompt it answers
    stateful: bool                  # True if detect() must see frames in increasing order

    def detect(self, frame_bgr: np.ndarray, frame_index: int) -> tuple[np.ndarray, np.ndarray]: ...

    def reset(self) -> None: ...


def _check_frame(frame_bgr: np.ndarray) -> None:
    if not isinstance(frame_bgr, np.ndarray) or frame_bgr.dtype != np.uint8 or frame_bgr.ndim != 3 \
            or frame_bgr.shape[2] != 3:
        got = getattr(frame_bgr, "shape", type(frame_bgr).__name__)
        raise ValueError(f"detect() needs a BGR uint8 frame of shape HxWx3, got {got}")


def _settings_from_dict(cls, category: str, settings: dict | None):
    settings = dict(settings or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"{category!r} detector: unknown setting(s) {unknown}; known: {sorted(known)}")
    for key, value in list(settings.items()):
        if isinstance(value, list):  # JSON has no tuples
            settings[key] = tuple(value)
    obj = cls(**settings)
    obj.validate()
    return obj


def _require(ok: bool, category: str, name: str, message: str, value) -> None:
    if not ok:
        raise ValueError(f"{category!r} detector: {name} {message}, got {value!r}")


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_pair(v) -> bool:
    return isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, max_containment: float = 1.0) -> np.ndarray:
    """Greedy non-maximum suppression; returns kept indices, best score first.

    A box is dropped when its IoU with a kept (better) box exceeds ``iou_threshold`` or when more
    than ``max_containment`` of its own area lies inside a kept box.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)  # [n, 4]
    scores = np.asarray(scores, np.float64).reshape(-1)   # [n]
    order = np.argsort(-scores, kind="stable")
    area = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(boxes[:, 3] - boxes[:, 1], 0, None)  # [n]
    keep = []
    while len(order):
        i, rest = order[0], order[1:]
        keep.append(int(i))
        xx1 = np.maximum(boxes[i, 0], boxes[rest, 0])
        yy1 = np.maximum(boxes[i, 1], boxes[rest, 1])
        xx2 = np.minimum(boxes[i, 2], boxes[rest, 2])
        yy2 = np.minimum(boxes[i, 3], boxes[rest, 3])
        inter = np.clip(xx2 - xx1, 0, None) * np.clip(yy2 - yy1, 0, None)  # [len(rest)]
        iou = inter / np.maximum(area[i] + area[rest] - inter, 1e-9)
        inside = inter / np.maximum(area[rest], 1e-9)                      # [len(rest)]
        order = rest[(iou <= iou_threshold) & (inside <= max_containment)]
    return np.array(keep, dtype=np.int64)


def _clip(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    boxes = boxes.copy()
    boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, width)
    boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, height)
    return boxes


# -- person: HOG ---------------------------------------------------------------------------------
@dataclass
class HogPersonSettings:
    """Settings of the HOG people detector (``person``)."""

    min_height: float = 72.0                     # smallest person to find, px of the original frame; the frame is resized by 96/min_height
    max_height: float | None = None              # largest person to find, px; caps the pyramid (None: as tall as the frame)
    win_stride: tuple[int, int] = (8, 8)         # window step in the resized image, px (multiples of 8 are fastest)
    padding: tuple[int, int] = (32, 32)          # border added around the resized image, px, so people cut by the frame edge still fit a window
    scale: float = 1.05                          # pyramid step between detection scales (> 1)
    hit_threshold: float = 0.0                   # SVM margin a window needs to count as a hit
    group_threshold: int = 2                     # OpenCV groupRectangles: a cluster needs > this many windows (0: raw windows)
    nms_iou: float = 0.4                         # boxes overlapping a better one by more than this IoU are dropped
    max_containment: float = 0.8                 # boxes with more than this fraction of their area inside a better box are dropped (half-body hits)
    box_trim: tuple[float, float, float, float] = (0.22, 0.11, 0.22, 0.14)  # fraction of the window cut off left, top, right, bottom
    margin_scale: float = 0.5                    # score = 1 - exp(-margin / margin_scale): SVM margin 0.5 -> 0.63, 1 -> 0.86
    min_score: float = 0.05                      # score below which a box is dropped
    regions: str = "frame"                       # what is scanned: "frame" (all of it) or "motion" (around movement and earlier detections)
    full_frame_every: int = 16                   # "motion": every n-th call scans the whole frame (the first call always does)
    motion_downscale: int = 4                    # "motion": the background model sees frames shrunk this many times
    motion_var_threshold: float = 16.0           # "motion": MOG2's squared Mahalanobis distance above which a pixel is foreground
    region_margin: float = 0.35                  # "motion": every side of a blob or earlier box moves out by this times the person's height
    region_memory: int = 2                       # "motion": the boxes of this many last calls are looked around again
    max_region_fraction: float = 0.5             # "motion": regions covering more of the frame than this scan the whole frame instead

    def validate(self) -> None:
        c = "person"
        _require(_is_number(self.min_height) and self.min_height >= 16, c, "min_height", "must be a number >= 16 px", self.min_height)
        _require(self.max_height is None or (_is_number(self.max_height) and self.max_height >= self.min_height),
                 c, "max_height", "must be None or a number >= min_height", self.max_height)
        _require(_is_pair(self.win_stride) and all(s >= 1 for s in self.win_stride), c, "win_stride", "must be two positive ints", self.win_stride)
        _require(_is_pair(self.padding) and all(s >= 0 for s in self.padding), c, "padding", "must be two non-negative ints", self.padding)
        _require(_is_number(self.scale) and 1.001 <= self.scale <= 2.0, c, "scale", "must be in [1.001, 2]", self.scale)
        _require(_is_number(self.hit_threshold), c, "hit_threshold", "must be a finite number", self.hit_threshold)
        _require(isinstance(self.group_threshold, int) and not isinstance(self.group_threshold, bool)
                 and self.group_threshold >= 0, c, "group_threshold", "must be an int >= 0", self.group_threshold)
        _require(_is_number(self.nms_iou) and 0 < self.nms_iou <= 1, c, "nms_iou", "must be in (0, 1]", self.nms_iou)
        _require(_is_number(self.max_containment) and 0 < self.max_containment <= 1, c, "max_containment",
                 "must be in (0, 1]", self.max_containment)
        _require(isinstance(self.box_trim, tuple) and len(self.box_trim) == 4 and all(_is_number(t) and 0 <= t < 0.5 for t in self.box_trim),
                 c, "box_trim", "must be four fractions in [0, 0.5)", self.box_trim)
        _require(_is_number(self.margin_scale) and self.margin_scale > 0, c, "margin_scale", "must be > 0", self.margin_scale)
        _require(_is_number(self.min_score) and 0 <= self.min_score < 1, c, "min_score", "must be in [0, 1)", self.min_score)
        _require(self.regions in HOG_REGIONS, c, "regions", f"must be one of {', '.join(map(repr, HOG_REGIONS))}", self.regions)
        _require(_is_int(self.full_frame_every) and self.full_frame_every >= 1, c, "full_frame_every",
                 "must be an int >= 1", self.full_frame_every)
        _require(_is_int(self.motion_downscale) and 1 <= self.motion_downscale <= 16, c, "motion_downscale",
                 "must be an int in [1, 16]", self.motion_downscale)
        _require(_is_number(self.motion_var_threshold) and self.motion_var_threshold > 0, c, "motion_var_threshold",
                 "must be > 0", self.motion_var_threshold)
        _require(_is_number(self.region_margin) and 0 <= self.region_margin <= 4, c, "region_margin",
                 "must be in [0, 4]", self.region_margin)
        _require(_is_int(self.region_memory) and 0 <= self.region_memory <= 64, c, "region_memory",
                 "must be an int in [0, 64]", self.region_memory)
        _require(_is_number(self.max_region_fraction) and 0 < self.max_region_fraction <= 1, c, "max_region_fraction",
                 "must be in (0, 1]", self.max_region_fraction)


class HogPersonDetector:
    """OpenCV's default HOG people detector.

    ``regions="frame"`` scans every frame whole and is stateless (frames in any order).
    ``regions="motion"`` scans only around the foreground of a background model and around the
    boxes of its last calls (:mod:`models.backends.tracking.regions`), and the whole frame on its
    first call and every ``full_frame_every``-th one after; it remembers the frames it saw, so a
    frame index that does not increase (or another frame size) starts it afresh. Inside a region
    it finds what a scan of the whole frame finds there, up to the window grid's alignment.
    """

    category = "person"
    stateful = False  # "motion" keeps a background model, but any frame order gives valid boxes

    def __init__(self, settings: HogPersonSettings | None = None):
        self.settings = settings or HogPersonSettings()
        self.settings.validate()
        self._hogs: dict[int, cv2.HOGDescriptor] = {}
        self.reset()

    def _hog(self, nlevels: int) -> cv2.HOGDescriptor:
        hog = self._hogs.get(nlevels)
        if hog is None:
            # the default descriptor geometry, with the pyramid depth as the only change
            hog = cv2.HOGDescriptor(HOG_WINDOW, (16, 16), (8, 8), (8, 8), 9, 1, -1.0,
                                    cv2.HOGDescriptor_L2Hys, 0.2, True, nlevels, False)
            hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
            self._hogs[nlevels] = hog
        return hog

    def reset(self) -> None:
        """Forget the frames seen ("motion": the background model and the last boxes)."""
        s = self.settings
        self._motion = MotionBlobs(s.motion_downscale, s.motion_var_threshold) if s.regions == "motion" else None
        self._recent: list[np.ndarray] = []  # the boxes of the last region_memory calls
        self._last_index: int | None = None
        self._since_full: int | None = None  # calls since the last whole-frame scan (None: none yet)
        self.scanned_fraction: list[float] = []  # per call, the fraction of the frame scanned

    def detect(self, frame_bgr: np.ndarray, frame_index: int) -> tuple[np.ndarray, np.ndarray]:
        _check_frame(frame_bgr)
        height, width = frame_bgr.shape[:2]
        whole = np.array([[0, 0, width, height]], np.float64)
        if self._motion is None:
            return self.scan(frame_bgr, whole)
        frame_index = int(frame_index)
        if self._last_index is not None and (frame_index <= self._last_index or self._motion.size != (height, width)):
            self.reset()
        self._last_index = frame_index
        s = self.settings
        blobs = self._motion.update(frame_bgr, min_area=_min_blob_area(s))
        regions = whole
        if self._since_full is not None and self._since_full + 1 < s.full_frame_every:
            near = person_regions(np.concatenate([blobs, *self._recent]), min_height=s.min_height,
                                  margin=s.region_margin, width=width, height=height)
            near = merge_regions(near)
            if scanned_fraction(near, width, height) <= s.max_region_fraction:
                regions = near
        self._since_full = 0 if regions is whole else self._since_full + 1
        self.scanned_fraction.append(scanned_fraction(regions, width, height))
        boxes, scores = self.scan(frame_bgr, regions)
        self._recent = [*self._recent, boxes.astype(np.float64)][-s.region_memory:] if s.region_memory else []
        return boxes, scores

    def scan(self, frame_bgr: np.ndarray, regions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """People inside ``regions`` [n, 4] (xyxy, original pixels; ``[[0, 0, w, h]]``: the frame):
        each region is resized and scanned on its own, then all boxes are suppressed together."""
        s = self.settings
        height, width = frame_bgr.shape[:2]
        factor = HOG_PERSON_HEIGHT / float(s.min_height)
        found_rects, found_margins = [], []
        for x1, y1, x2, y2 in np.asarray(regions, np.float64).reshape(-1, 4):
            x1, y1 = max(0, math.floor(x1)), max(0, math.floor(y1))
            x2, y2 = min(width, math.ceil(x2)), min(height, math.ceil(y2))
            # a region inside the frame holds the room around its people; one at an edge is padded
            inside = x1 > 0 and y1 > 0 and x2 < width and y2 < height
            rects, margins = self._scan_region(frame_bgr[y1:y2, x1:x2], factor, (0, 0) if inside else s.padding)
            if len(rects):
                found_rects.append(rects / factor + [x1, y1, 0, 0])          # [k, 4] x, y, w, h in the frame
                found_margins.append(margins)
        if not found_rects:
            return np.zeros((0, 4), np.float32), np.zeros((0,), np.float32)
        rects, margins = np.concatenate(found_rects), np.concatenate(found_margins)  # [n, 4], [n]
        left, top, right, bottom = s.box_trim
        x, y, w, h = rects[:, 0], rects[:, 1], rects[:, 2], rects[:, 3]
        boxes = np.stack([x + left * w, y + top * h, x + (1 - right) * w, y + (1 - bottom) * h], axis=1)  # [n, 4]
        scores = 1.0 - np.exp(-np.clip(margins, 0, None) / s.margin_scale)  # [n]
        keep = nms(boxes, scores, s.nms_iou, s.max_containment)
        boxes, scores = _clip(boxes[keep], width, height), scores[keep]
        ok = (scores >= s.min_score) & (boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)
        return boxes[ok].astype(np.float32), scores[ok].astype(np.float32)

    def _scan_region(self, crop: np.ndarray, factor: float, padding: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """HOG windows [n, 4] (x, y, w, h in the resized crop) and their SVM margins [n]."""
        s = self.settings
        height, width = crop.shape[:2]
        image = crop
        if abs(factor - 1.0) > 1e-3:
            size = (max(1, round(width * factor)), max(1, round(height * factor)))
            image = cv2.resize(crop, size, interpolation=cv2.INTER_LINEAR if factor > 1 else cv2.INTER_AREA)
        if image.shape[0] < HOG_WINDOW[1] or image.shape[1] < HOG_WINDOW[0]:
            return np.zeros((0, 4)), np.zeros((0,))
        tallest = min(float(s.max_height) if s.max_height else math.inf, float(height))
        # level k looks for people HOG_PERSON_HEIGHT * scale**k tall (in the resized image)
        nlevels = max(1, math.floor(math.log(max(tallest * factor / HOG_PERSON_HEIGHT, 1.0)) / math.log(s.scale)) + 1)
        rects, weights = self._hog(min(nlevels, 64)).detectMultiScale(
            image, hitThreshold=float(s.hit_threshold), winStride=tuple(s.win_stride),
            padding=tuple(padding), scale=float(s.scale), groupThreshold=int(s.group_threshold))
        return np.asarray(rects, np.float64).reshape(-1, 4), np.asarray(weights, np.float64).reshape(-1)


def _min_blob_area(s: HogPersonSettings) -> float:
    """Foreground blobs smaller than this (shrunk pixels) are noise: a twentieth of the square of
    the smallest person's height, at the background model's size."""
    return max(1.0, (float(s.min_height) / s.motion_downscale) ** 2 / 20)


# -- moving object: background subtraction -------------------------------------------------------
@dataclass
class MovingObjectSettings:
    """Settings of the background-subtraction detector (``moving object``)."""

    history: int = 300                           # frames the MOG2 background model remembers
    var_threshold: float = 24.0                  # squared Mahalanobis distance above which a pixel is foreground
    detect_shadows: bool = True                  # classify shadows separately and drop them from the foreground
    learning_rate: float = 0.003                 # background update rate per detect() call (-1: OpenCV's automatic 1/history)
    warmup_frames: int = 40                      # frames prime() learns from (the tracker samples them across the video)
    blur: int = 3                                # median blur aperture before subtraction (odd; 0 or 1 disables it)
    open_size: int = 3                           # opening kernel side, px: removes speckle
    close_size: int = 11                         # closing kernel side, px: joins the parts of one object
    min_area: float = 0.002                      # smallest blob, as a fraction of the frame area
    max_area: float = 0.5                        # largest blob, as a fraction of the frame area
    min_fill: float = 0.15                       # smallest fraction of its box a blob must fill

    def validate(self) -> None:
        c = "moving object"
        _require(isinstance(self.history, int) and not isinstance(self.history, bool) and self.history >= 1,
                 c, "history", "must be an int >= 1", self.history)
        _require(_is_number(self.var_threshold) and self.var_threshold > 0, c, "var_threshold", "must be > 0", self.var_threshold)
        _require(isinstance(self.detect_shadows, bool), c, "detect_shadows", "must be true or false", self.detect_shadows)
        _require(_is_number(self.learning_rate) and (self.learning_rate == -1 or 0 <= self.learning_rate <= 1),
                 c, "learning_rate", "must be -1 (automatic) or in [0, 1]", self.learning_rate)
        _require(isinstance(self.warmup_frames, int) and not isinstance(self.warmup_frames, bool) and self.warmup_frames >= 0,
                 c, "warmup_frames", "must be an int >= 0", self.warmup_frames)
        for name in ("blur", "open_size", "close_size"):
            v = getattr(self, name)
            _require(isinstance(v, int) and not isinstance(v, bool) and v >= 0, c, name, "must be an int >= 0", v)
        _require(self.blur <= 1 or self.blur % 2 == 1, c, "blur", "must be odd (or 0/1 to disable)", self.blur)
        _require(_is_number(self.min_area) and 0 <= self.min_area < 1, c, "min_area", "must be a fraction in [0, 1)", self.min_area)
        _require(_is_number(self.max_area) and self.min_area < self.max_area <= 1, c, "max_area", "must be in (min_area, 1]", self.max_area)
        _require(_is_number(self.min_fill) and 0 <= self.min_fill <= 1, c, "min_fill", "must be in [0, 1]", self.min_fill)


class MovingObjectDetector:
    """MOG2 background subtraction for static cameras. Stateful: see the module docstring."""

    category = "moving object"
    stateful = True

    def __init__(self, settings: MovingObjectSettings | None = None):
        self.settings = settings or MovingObjectSettings()
        self.settings.validate()
        self.reset()

    def reset(self) -> None:
        """Forget the learnt background (use before another video)."""
        s = self.settings
        self._mog = cv2.createBackgroundSubtractorMOG2(history=s.history, varThreshold=float(s.var_threshold),
                                                       detectShadows=s.detect_shadows)
        self._last_index: int | None = None
        self._size: tuple[int, int] | None = None
        self.primed_frames = 0

    def _prepare(self, frame_bgr: np.ndarray) -> np.ndarray:
        _check_frame(frame_bgr)
        size = frame_bgr.shape[:2]
        if self._size is None:
            self._size = size
        elif size != self._size:
            raise ValueError(f"frame size {size[1]}x{size[0]} differs from the first frame's "
                             f"{self._size[1]}x{self._size[0]}; call reset() for another video")
        b = self.settings.blur
        return cv2.medianBlur(frame_bgr, b) if b > 1 else frame_bgr

    def prime(self, frames: Iterable[np.ndarray], repeats: int = 20) -> None:
        """Start from a clean background learnt from ``frames`` (e.g. spread over the video).

        The per-pixel median of the frames removes whatever moves between them (a person is at
        different places in different frames), and MOG2 is taught that median image ``repeats``
        times. Something that stays put in more than half the frames becomes background.
        """
        if self._last_index is not None:
            raise ValueError("prime() must come before the first detect(); call reset() first")
        stack = np.stack([self._prepare(f) for f in frames])              # [T, H, W, 3]
        if len(stack) == 0:
            return
        median = np.median(stack, axis=0).astype(np.uint8)                # [H, W, 3]
        for _ in range(max(1, int(repeats))):
            self._mog.apply(median, learningRate=-1)
        self.primed_frames += len(stack)

    def detect(self, frame_bgr: np.ndarray, frame_index: int) -> tuple[np.ndarray, np.ndarray]:
        frame_index = int(frame_index)
        if self._last_index is not None and frame_index <= self._last_index:
            raise ValueError(f"the moving-object detector is stateful: frame {frame_index} came after "
                             f"frame {self._last_index}; frames must be in increasing order (reset() to restart)")
        image = self._prepare(frame_bgr)
        self._last_index = frame_index
        s = self.settings
        fg = self._mog.apply(image, learningRate=float(s.learning_rate))
        mask = (fg == 255).astype(np.uint8)  # shadows are 127
        if s.open_size > 1:
            mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (s.open_size, s.open_size)))
        if s.close_size > 1:
            mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (s.close_size, s.close_size)))
        n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        height, width = mask.shape
        frame_area = float(height * width)
        boxes, scores = [], []
        for k in range(1, n):
            x, y, w, h, area = (int(v) for v in stats[k])
            if not (s.min_area * frame_area <= area <= s.max_area * frame_area):
                continue
            fill = area / float(w * h)
            if fill < s.min_fill:
                continue
            boxes.append([x, y, x + w, y + h])
            scores.append(fill)
        if not boxes:
            return np.zeros((0, 4), np.float32), np.zeros((0,), np.float32)
        return np.asarray(boxes, np.float32), np.asarray(scores, np.float32)


# -- factory -------------------------------------------------------------------------------------
_DETECTORS = {
    "person": (HogPersonDetector, HogPersonSettings),
    "moving object": (MovingObjectDetector, MovingObjectSettings),
}
KNOWN_CATEGORIES: tuple[str, ...] = tuple(_DETECTORS)
DETECTOR_SETTINGS: dict[str, type] = {name: settings_cls for name, (_, settings_cls) in _DETECTORS.items()}


def normalize_category(category: str) -> str:
    """The canonical spelling of a category prompt ("  Person " -> "person")."""
    if not isinstance(category, str):
        raise TrackerConfigError(f"a category prompt must be a string, got {type(category).__name__}")
    return " ".join(category.strip().lower().split())


def build_detector(category: str, settings: dict | None = None) -> Detector:
    """The detector for a category prompt, configured by a plain dict of settings.

    Raises :class:`TrackerConfigError` for an unknown category and ``ValueError`` for unknown
    settings or bad values.
    """
    name = normalize_category(category)
    if name not in _DETECTORS:
        raise TrackerConfigError(f"no detector for category {category!r}; known categories: {list(KNOWN_CATEGORIES)}")
    cls, settings_cls = _DETECTORS[name]
    return cls(_settings_from_dict(settings_cls, name, settings))
