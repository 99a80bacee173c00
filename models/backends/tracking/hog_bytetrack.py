"""The embedded default tracker: a category-prompted detector plus ByteTrack association.

``hog-bytetrack`` runs on a CPU with nothing downloaded. For every category prompt it builds one
detector (:mod:`models.backends.tracking.detectors`) and one ``sv.ByteTrack`` (supervision's maintained
implementation), walks the video in order, runs the detector on every ``anchor_stride``-th frame
(the *anchors*) and lets ByteTrack link the detections into identities.

What the detector sees: the decoded frame at its original size and colours (BGR), one frame at a
time, nothing else: no masks, no text, no neighbouring frames (the ``moving object`` detector keeps
a background model learnt from earlier frames and a primer sample spread over the video).
``person`` is OpenCV's HOG people detector: upright, mostly unoccluded people at least
``min_height`` px tall (72 by default), seen from the front, back or side. ``moving object`` is
background subtraction and needs a static camera.

Observations: on an anchor a trajectory gets an observation where ByteTrack matched one of that
frame's detections to it, and the box is that detection's box, exactly as the detector gave it
(clipped to the frame). Kalman predictions carry identities across missed anchors but are never
written out there, and nothing is interpolated, so a trajectory may have gaps. What the frames
between two anchors get is the ``between_anchors`` setting:

- ``"kalman"``: every track matched on an anchor gets a box on each following frame up to the next
  anchor: the anchor's detection box moved by the velocity (centre, aspect ratio and height) of the
  track's ByteTrack Kalman filter, a prediction from that anchor and earlier ones only (never from
  a later frame), with the anchor's score. These frames are not decoded (the reader only skips
  over them). ``TrackProposal.extra["detected"]`` marks which observations are detections.
- ``"none"``: no observation and no step; only anchors are processed.

Speed settings: ``anchor_stride`` (how often the detector runs), the detector's resolution
(HOG: the frame is resized so that ``min_height`` px becomes 96 px; the DNN backend: its network's
``input_size``) and what HOG scans (its ``regions`` setting). By default HOG scans only regions
around the foreground of a background model and around its boxes of the last two anchors, and the
whole frame on the first anchor and every ``full_frame_every``-th (16) after, so a person standing
still since before is found within 32 frames (:mod:`models.backends.tracking.regions`); on
vtest.avi that is a fifth to a third of the pixels. ``{"detectors": {"person": {"regions":
"frame"}}}`` scans every anchor whole. ``min_track_length`` counts detections, so a track's anchor observations and
whether it is kept do not depend on ``between_anchors``. Between two anchors a person moves
``anchor_stride`` times as far as between two frames, so ByteTrack matches boxes widened by
``match_buffer`` of their size on every side (the buffered IoU of C-BIoU, Yang et al., WACV 2023):
a fast walker's next detection still overlaps its track, and a new track is confirmed on its second
anchor. The detections' own boxes are what the trajectory records.

Defaults (``anchor_stride`` 2, ``"kalman"``, ``match_buffer`` 0.3, HOG on motion regions) run
vtest.avi at more than 20 video frames per second end to end on two cores and keep at least 90 %
of the people of the rendered demo scenes covered, which ``tests/benchmarks/bench_tracking.py``
checks on every run; ``anchor_stride`` 1 with
``match_buffer`` 0 runs the detector on every frame and matches its boxes as they are.

Default category prompts: ``person`` for both the rendered static-camera demo videos and real
pedestrian footage such as ``vtest.avi`` (HOG fires on the rendered figures and on real people);
``moving object`` is the fallback for static-camera videos of things HOG cannot see (it also
finds the rendered distractors, which are not people).
"""
from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
import supervision as sv

from models.backends.tracking.appearance import APPEARANCE_EMBEDDERS, AppearanceByteTrack
from models.backends.tracking.base import (
    FrameObjects,
    FrameSource,
    TrackerConfigError,
    TrackProposal,
)
from models.backends.tracking.detectors import (
    DETECTOR_SETTINGS,
    KNOWN_CATEGORIES,
    Detector,
    build_detector,
    normalize_category,
)
from models.config import PlainConfig

DEFAULT_CATEGORIES: tuple[str, ...] = ("person",)
# What the frames between two anchors get (see the module docstring).
BETWEEN_ANCHORS: tuple[str, ...] = ("kalman", "none")


# The tracker's detector settings over the detectors' own defaults: HOG scans around movement
# and its last boxes, and the whole frame every 16th anchor (see the module docstring).
TRACKER_DETECTOR_DEFAULTS: dict[str, dict] = {"person": {"regions": "motion"}}


def _default_detector_settings() -> dict[str, dict]:
    """Every detector's full default settings, as JSON-ready data (recorded with each run)."""
    return {category: json.loads(json.dumps(asdict(settings_cls(**TRACKER_DETECTOR_DEFAULTS.get(category, {})))))
            for category, settings_cls in DETECTOR_SETTINGS.items()}


@dataclass
class HogByteTrackConfig(PlainConfig):
    """Configuration of the hog-bytetrack tracker (plain data: round-trips through JSON)."""

    unknown_keys_message = "hog-bytetrack config: unknown key(s) {key_list}; known: {known_list}"
    backend_name: ClassVar[str] = "hog-bytetrack"  # how messages name the backend

    @classmethod
    def known_categories(cls) -> tuple[str, ...]:
        """The category prompts this backend has a detector for."""
        return KNOWN_CATEGORIES

    def check_detector(self, category: str, settings: dict) -> None:
        """Raise for an unknown category or bad detector settings (nothing is loaded)."""
        build_detector(category, settings)

    categories: list[str] = field(default_factory=lambda: list(DEFAULT_CATEGORIES))  # default category-prompt inventory of a proposal run
    anchor_stride: int = 2                       # the detector runs on every k-th frame (0, k, 2k, ...): the anchors
    between_anchors: str = "kalman"              # frames between anchors: "kalman" (boxes predicted from the last anchor) or "none"
    track_activation_threshold: float = 0.25     # ByteTrack: detections scoring at least this are "high" (first association); new tracks need +0.1
    lost_track_buffer: int = 45                  # ByteTrack: how long a lost track waits to be re-found, in frames at 30 fps (scaled by frame_rate/30)
    minimum_matching_threshold: float = 0.8      # ByteTrack: highest 1 - IoU*score cost accepted in the first association
    frame_rate: float | None = None              # ByteTrack's frame rate; None: the video's fps / anchor_stride (the rate it is fed at)
    minimum_consecutive_frames: int = 1          # ByteTrack: matched frames before a track gets an id (its earlier matches are not reported)
    match_buffer: float = 0.3                    # ByteTrack matches boxes widened by this fraction of their size on every side (buffered IoU); 0: as they are
    min_track_length: int = 3                    # proposals with fewer detections (anchor observations) are dropped
    detectors: dict[str, dict] = field(default_factory=_default_detector_settings)  # per-category detector settings (see detectors.py)
    appearance: str | None = None                # crop embedder weighed in ByteTrack's first association ("mobilenetv2-imagenet"); None: IoU only
    appearance_weight: float = 0.5              # weight of the cosine distance in that cost (the rest: 1 - IoU * score)
    appearance_gate: float = 0.3                 # pairs farther apart in appearance (cosine distance) are not matched on appearance
    appearance_ema: float = 0.9                  # a track's vector: this times the old one plus (1 - this) times each new match's

    @classmethod
    def from_dict(cls, data: dict | None) -> HogByteTrackConfig:
        """Build from plain data, rejecting unknown keys and bad values with a ValueError."""
        config = super().from_dict(data)
        config.validate()
        return config

    def validate(self) -> None:
        def need(ok: bool, name: str, message: str) -> None:
            if not ok:
                raise ValueError(f"{self.backend_name} config: {name} {message}, got {getattr(self, name)!r}")

        def is_int(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        def is_num(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

        need(isinstance(self.categories, (list, tuple)) and len(self.categories) > 0
             and all(isinstance(c, str) and c.strip() for c in self.categories), "categories",
             "must be a non-empty list of category names")
        for c in self.categories:
            if normalize_category(c) not in self.known_categories():
                raise TrackerConfigError(f"{self.backend_name} config: unknown category {c!r}; "
                                         f"known: {list(self.known_categories())}")
        need(is_int(self.anchor_stride) and self.anchor_stride >= 1, "anchor_stride", "must be an int >= 1")
        need(self.between_anchors in BETWEEN_ANCHORS, "between_anchors",
             f"must be one of {', '.join(repr(v) for v in BETWEEN_ANCHORS)}")
        need(is_num(self.track_activation_threshold) and 0 < self.track_activation_threshold < 1,
             "track_activation_threshold", "must be in (0, 1)")
        need(is_int(self.lost_track_buffer) and self.lost_track_buffer >= 0, "lost_track_buffer", "must be an int >= 0")
        need(is_num(self.minimum_matching_threshold) and 0 < self.minimum_matching_threshold <= 1,
             "minimum_matching_threshold", "must be in (0, 1]")
        need(self.frame_rate is None or (is_num(self.frame_rate) and self.frame_rate > 0), "frame_rate",
             "must be None or a number > 0")
        need(is_int(self.minimum_consecutive_frames) and self.minimum_consecutive_frames >= 1,
             "minimum_consecutive_frames", "must be an int >= 1")
        need(is_int(self.min_track_length) and self.min_track_length >= 1, "min_track_length", "must be an int >= 1")
        need(is_num(self.match_buffer) and 0 <= self.match_buffer <= 2, "match_buffer", "must be a number in [0, 2]")
        need(isinstance(self.detectors, dict) and all(isinstance(v, dict) for v in self.detectors.values()),
             "detectors", "must map category names to settings dicts")
        for c, settings in self.detectors.items():
            self.check_detector(c, settings)  # raises for an unknown category or bad settings
        need(self.appearance is None or self.appearance in APPEARANCE_EMBEDDERS, "appearance",
             f"must be null or one of {', '.join(repr(v) for v in APPEARANCE_EMBEDDERS)}")
        need(is_num(self.appearance_weight) and 0 <= self.appearance_weight <= 1, "appearance_weight",
             "must be a number in [0, 1]")
        need(is_num(self.appearance_gate) and 0 < self.appearance_gate <= 2, "appearance_gate",
             "must be a number in (0, 2]")
        need(is_num(self.appearance_ema) and 0 <= self.appearance_ema < 1, "appearance_ema", "must be a number in [0, 1)")


def default_config() -> HogByteTrackConfig:
    """The configuration proposal runs use unless they say otherwise (category prompt: person)."""
    return HogByteTrackConfig()


@dataclass
class _Observation:
    frame: int
    box: np.ndarray        # [4] float32, xyxy
    score: float
    detected: bool = True  # False: predicted between anchors


def kalman_boxes(boxes: np.ndarray, velocities: np.ndarray, fraction: float) -> np.ndarray:
    """Boxes moved ``fraction`` of one Kalman step ahead along their tracks' velocities.

    ``boxes`` [n, 4] xyxy; ``velocities`` [n, 4] the ByteTrack filter's per-step rates of
    (centre x, centre y, aspect ratio w/h, height). Returns [n, 4] float32 xyxy (not clipped).
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)                  # [n, 4]
    v = np.asarray(velocities, np.float64).reshape(-1, 4)                 # [n, 4]
    h = boxes[:, 3] - boxes[:, 1]                                         # [n]
    xyah = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2,
                     (boxes[:, 2] - boxes[:, 0]) / np.maximum(h, 1e-9), h], axis=1)  # [n, 4]
    cx, cy, a, h = (xyah + float(fraction) * v).T                         # [n] each
    h = np.maximum(h, 0.0)
    w = np.maximum(a, 0.0) * h
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1).astype(np.float32)


@dataclass
class HogByteTrackState:
    """The state of one video (what ``init_state`` returns)."""

    frames: FrameSource
    categories: list[str] = field(default_factory=list)           # prompts in the order added
    tracks: dict[int, dict] = field(default_factory=dict)         # track id -> {"category", "local_id", "obs": [..]}
    processed_frames: list[int] = field(default_factory=list)     # frames the detectors ran on
    started: bool = False
    finished: bool = False


class HogByteTrackTracker:
    """HOG (or background subtraction) detections linked by ByteTrack. See the module docstring."""

    name = "hog-bytetrack"

    def __init__(self, config: HogByteTrackConfig | None = None, *,
                 detector_factory: Callable[[str, dict], Detector] = build_detector):
        """``detector_factory(category, settings)`` builds one detector per category prompt and run
        (default: :func:`models.backends.tracking.detectors.build_detector`)."""
        self.config = config or default_config()
        self.config.validate()
        self.detector_factory = detector_factory

    # -- Tracker protocol ----------------------------------------------------------------------
    def init_state(self, frames: FrameSource) -> HogByteTrackState:
        if not isinstance(frames, FrameSource):
            raise ValueError(f"init_state needs a FrameSource (read, iter_frames, fps, frame_count, "
                             f"width, height), got {type(frames).__name__}")
        if int(frames.frame_count) < 1:
            raise ValueError("init_state: the video has no frames")
        if not (float(frames.fps) > 0):
            raise ValueError(f"init_state: the video has no usable frame rate ({frames.fps!r})")
        return HogByteTrackState(frames=frames)

    def add_prompt(self, state: HogByteTrackState, *, category: str, frame_index: int | None = None,
                   boxes: np.ndarray | None = None) -> None:
        self._check_state(state)
        if state.started:
            raise ValueError("add_prompt: propagation has already started for this state; make a new one with init_state")
        if boxes is not None:
            raise ValueError(f"{self.name} takes category prompts only; box prompts need a promptable "
                             "tracker (sam2)")
        if frame_index is not None:
            raise ValueError(f"{self.name} category prompts apply to the whole video; frame_index must be None")
        name = normalize_category(category)
        known = self.config.known_categories()
        if name not in known:
            raise TrackerConfigError(f"{self.name} has no detector for category {category!r}; "
                                     f"known categories: {list(known)}")
        if name in state.categories:
            raise ValueError(f"add_prompt: category {name!r} was already added")
        state.categories.append(name)

    def propagate(self, state: HogByteTrackState) -> Iterator[FrameObjects]:
        """Run the detectors and ByteTrack over the video, yielding each processed frame.

        Calling it again re-runs the whole video from a clean slate.
        """
        self._check_state(state)
        if not state.categories:
            raise ValueError("propagate: add at least one category prompt with add_prompt first")
        return self._propagate(state)

    def proposals(self, state: HogByteTrackState) -> list[TrackProposal]:
        self._check_state(state)
        if not state.finished:
            raise ValueError("proposals: propagate(state) has not run to the end")
        frames = state.frames
        width, height = float(frames.width), float(frames.height)
        out = []
        for track_id in sorted(state.tracks):
            t = state.tracks[track_id]
            obs: list[_Observation] = t["obs"]
            if sum(o.detected for o in obs) < self.config.min_track_length:
                continue
            f = np.array([o.frame for o in obs], np.int32)                  # [N]
            if np.any(np.diff(f) <= 0):
                raise AssertionError(f"track {track_id}: frames are not strictly increasing")
            b = np.stack([o.box for o in obs]).astype(np.float32)           # [N, 4]
            b[:, [0, 2]] = np.clip(b[:, [0, 2]], 0, width)
            b[:, [1, 3]] = np.clip(b[:, [1, 3]], 0, height)
            s = np.array([o.score for o in obs], np.float32)                # [N]
            detected = np.array([o.detected for o in obs], bool)            # [N]
            out.append(TrackProposal(track_id=track_id, category=t["category"], frames=f, boxes=b, scores=s,
                                     extra={"backend": self.name, "bytetrack_id": t["local_id"],
                                            "anchor_stride": self.config.anchor_stride,
                                            "between_anchors": self.config.between_anchors,
                                            "detected": detected}))
        return out

    # -- internals -----------------------------------------------------------------------------
    @staticmethod
    def _check_state(state) -> None:
        if not isinstance(state, HogByteTrackState):
            raise ValueError(f"expected the state returned by init_state, got {type(state).__name__}")

    def _new_bytetrack(self, fps: float) -> sv.ByteTrack:
        c = self.config
        rate = c.frame_rate if c.frame_rate is not None else fps / c.anchor_stride
        settings = dict(track_activation_threshold=float(c.track_activation_threshold),
                        lost_track_buffer=int(c.lost_track_buffer),
                        minimum_matching_threshold=float(c.minimum_matching_threshold),
                        frame_rate=float(rate), minimum_consecutive_frames=int(c.minimum_consecutive_frames))
        if c.appearance is not None:
            return AppearanceByteTrack(weight=float(c.appearance_weight), gate=float(c.appearance_gate),
                                       ema=float(c.appearance_ema), **settings)
        with warnings.catch_warnings():
            # supervision marks ByteTrack as moving to the `trackers` package; it is still the
            # maintained implementation in the pinned supervision (< 0.31)
            warnings.simplefilter("ignore", FutureWarning)
            return sv.ByteTrack(**settings)

    def _new_embedder(self):
        """The appearance embedder the config names (None: IoU only), loaded once per run."""
        if self.config.appearance is None:
            return None
        # imported here: the encoders package loads torch, which the default (IoU only) never needs
        from models.backends.encoders.mobilenetv2 import MobileNetV2Embedder

        return MobileNetV2Embedder()  # "mobilenetv2-imagenet", the one APPEARANCE_EMBEDDERS names

    def _build_detectors(self, state: HogByteTrackState) -> dict[str, Detector]:
        detectors = {}
        for category in state.categories:
            settings = {}
            for key, value in self.config.detectors.items():
                if normalize_category(key) == category:
                    settings = value
            detectors[category] = self.detector_factory(category, settings)
        return detectors

    def _prime(self, detector: Detector, frames: FrameSource) -> None:
        prime = getattr(detector, "prime", None)
        n = int(getattr(getattr(detector, "settings", None), "warmup_frames", 0) or 0)
        if prime is None or n <= 0:
            return
        count = int(frames.frame_count)
        indices = np.unique(np.linspace(0, count - 1, num=min(n, count)).round().astype(int))
        prime([frames.read(int(i)) for i in indices])

    def _propagate(self, state: HogByteTrackState) -> Iterator[FrameObjects]:
        frames = state.frames
        stride, n_frames = self.config.anchor_stride, int(frames.frame_count)
        fill = self.config.between_anchors == "kalman"
        buffer = float(self.config.match_buffer)
        width, height = float(frames.width), float(frames.height)
        state.started, state.finished = True, False
        state.tracks, state.processed_frames = {}, []
        detectors = self._build_detectors(state)
        for detector in detectors.values():
            self._prime(detector, frames)
        trackers = {c: self._new_bytetrack(float(frames.fps)) for c in state.categories}
        embedder = self._new_embedder()
        global_ids: dict[tuple[str, int], int] = {}
        total = len(range(0, n_frames, stride))
        for k, (index, frame) in enumerate(frames.iter_frames(0, None, stride)):
            ids, boxes, scores, cats, velocities = [], [], [], [], []
            for category in state.categories:
                det_boxes, det_scores = detectors[category].detect(frame, index)
                det_boxes = np.asarray(det_boxes, np.float32).reshape(-1, 4)          # [n, 4]
                detections = sv.Detections(
                    xyxy=widen_boxes(det_boxes, buffer) if buffer else det_boxes,
                    confidence=np.asarray(det_scores, np.float32).reshape(-1),
                    class_id=np.zeros(len(det_boxes), dtype=int),
                    data={"row": np.arange(len(det_boxes))},
                )
                bytetrack = trackers[category]
                if embedder is not None:  # crops of the detector's own boxes, one batch per frame and category
                    features = embedder.encode_boxes(frame, det_boxes) if len(det_boxes) else None
                    tracked = bytetrack.update_with_detections(detections, features)
                else:
                    tracked = bytetrack.update_with_detections(detections)
                # supervision selects the matched detections from the input (data["row"]), so the
                # boxes below are the detector's own, never the Kalman state
                rows = np.asarray(tracked.data.get("row", []), dtype=int)              # [m] (none without a track)
                rates = _track_velocities(bytetrack, buffer) if fill else {}
                for box, score, local_id in zip(det_boxes[rows], tracked.confidence, tracked.tracker_id):
                    key = (category, int(local_id))
                    if key not in global_ids:
                        global_ids[key] = len(global_ids) + 1
                        state.tracks[global_ids[key]] = {"category": category, "local_id": int(local_id), "obs": []}
                    track = state.tracks[global_ids[key]]
                    if track["obs"] and track["obs"][-1].frame >= index:
                        continue  # one observation per frame and track
                    track["obs"].append(_Observation(index, np.asarray(box, np.float32).copy(), float(score)))
                    ids.append(global_ids[key])
                    boxes.append(np.asarray(box, np.float32))
                    scores.append(float(score))
                    cats.append(category)
                    velocities.append(rates.get(int(local_id), np.zeros(4)))
            state.processed_frames.append(index)
            anchor_boxes = np.asarray(boxes, np.float32).reshape(-1, 4)           # [n, 4]
            anchor_scores = np.asarray(scores, np.float32)                        # [n]
            yield FrameObjects(frame_index=index, object_ids=ids, boxes=anchor_boxes, scores=anchor_scores,
                               categories=cats,
                               fraction_done=(index + 1) / n_frames if fill else (k + 1) / total)
            if not fill:
                continue
            rates = np.asarray(velocities, np.float64).reshape(-1, 4)             # [n, 4]
            for j in range(1, min(stride, n_frames - index)):
                moved = kalman_boxes(anchor_boxes, rates, j / stride)             # [n, 4]
                moved[:, [0, 2]] = np.clip(moved[:, [0, 2]], 0, width)
                moved[:, [1, 3]] = np.clip(moved[:, [1, 3]], 0, height)
                keep = np.flatnonzero((moved[:, 2] - moved[:, 0] >= 1) & (moved[:, 3] - moved[:, 1] >= 1))
                for i in keep:
                    state.tracks[ids[i]]["obs"].append(
                        _Observation(index + j, moved[i].copy(), float(anchor_scores[i]), detected=False))
                yield FrameObjects(frame_index=index + j, object_ids=[ids[i] for i in keep], boxes=moved[keep],
                                   scores=anchor_scores[keep], categories=[cats[i] for i in keep],
                                   fraction_done=(index + j + 1) / n_frames)
        state.finished = True


def widen_boxes(boxes: np.ndarray, buffer: float) -> np.ndarray:
    """Boxes [n, 4] xyxy widened by ``buffer`` times their width and height on every side."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)                  # [n, 4]
    pad = float(buffer) * np.concatenate([boxes[:, 2:] - boxes[:, :2]] * 2, axis=1)  # [n, 4]
    return boxes + pad * np.array([-1, -1, 1, 1], np.float32)


def _track_velocities(bytetrack: sv.ByteTrack, buffer: float) -> dict[int, np.ndarray]:
    """The Kalman velocity ``(vx, vy, va, vh)`` per Kalman step of each confirmed track, by the id
    ``update_with_detections`` reports (supervision < 0.31 keeps these on its ``STrack`` objects);
    the height rate is of the detector's box (ByteTrack saw boxes widened by ``buffer``)."""
    return {int(t.external_track_id): np.asarray(t.mean[4:8], np.float64) / [1, 1, 1, 1 + 2 * buffer]
            for t in bytetrack.tracked_tracks if t.is_activated and t.mean is not None}


def build_hog_bytetrack(config: dict | HogByteTrackConfig | None = None) -> HogByteTrackTracker:
    """Factory: a tracker from plain config data (None: :func:`default_config`)."""
    if config is None:
        return HogByteTrackTracker(default_config())
    if isinstance(config, HogByteTrackConfig):
        return HogByteTrackTracker(config)
    return HogByteTrackTracker(HogByteTrackConfig.from_dict(config))
