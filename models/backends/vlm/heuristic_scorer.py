"""The heuristic pixel scorer: SCOUT's reranking scores measured from pixels and boxes, no model.

The embedded default scoring backend. It reads the query text into *cues* and scores each cue on
0–100 from the trajectory's own crops, boxes and full frames (model-side inputs only, DESIGN
4.4):

- the query's reading is ``models.query_reading.read_query`` (the deterministic
  reading against ``models.vocabulary``): ``upper_colour`` / ``lower_colour`` are appearance
  cues; ``walks``, ``speed`` and ``stands`` are action cues. Scene cues are the query's words
  for what the pixels can show: the ground (``grass``, ``lawn`` → grass; ``pavement``,
  ``paving``, ``sidewalk`` → pavement), the weather (``rain``, ``rainy``, ``raining``; ``dry``
  → clear) and the light (``night``; ``day``, ``daylight``). Other predicates (size, category,
  entering, crossing, nearby objects) are not measured and do not count;
- colour: on each crop (``select_inputs``: spread over the observations wholly in view and at
  least ``min_colour_height`` tall), the central columns of the box at torso rows and at thigh
  rows (the heuristic describer's regions) are read in CIELAB; pixels within
  ``foreground_delta_e`` (CIE76) of the median background (per-pixel median of
  ``background_frames`` frames spread over the video) are dropped unless that leaves less than
  ``min_foreground_share`` of them. The rest are white-balanced (grey-world gains of the median
  background) and each takes a basic colour term (``models.colour_naming``: the group of its
  nearest CSS/X11 name under CIEDE2000); the region's *histogram* is the share of its pixels per
  term, averaged over the crops. A colour
  cue scores ``100 · h[c] / (h[c] + max_{k≠c} h[k])`` (a contest with the strongest rival: 50
  for a tie); unknown when fewer than ``min_colour_share`` of the pixels match any name;
- motion: the foot point (bottom centre) of the observations wholly in view (all of them when
  fewer than ``min_observations`` are) is differentiated over ``velocity_window_s`` (the
  difference of the first and the last observation in the window); the ground velocity is
  ``(vx / h, focal · Δ(1/h) / Δt)`` in body heights per second (across: a box height is one body
  height; in depth: a pinhole camera over a ground plane sees the person at ``focal / h``
  heights, ``focal`` from ``hfov_deg``), moving from ``stand_speed``.
  ``walks d`` scores ``100 · mean_i moving_i · max(0, cos(v_i, d))`` (right/left: ±x; towards:
  down the frame; away: up); ``speed w`` scores ``100 · mean over moving observations of
  exp(-½ (ln(|v_i| / pace_w) / pace_tolerance)²)`` with ``pace_w`` the word's typical walking
  speed over an adult's height (``models.pace_norms``; 0 when the target never moves); ``stands still``
  scores ``100 · min(1, longest standing run / min_stand_s)``. Unknown with fewer than
  ``min_observations`` velocities;
- ground, light and weather: the heuristic describer's measures (``scene_reading``, settings
  ``scene``: the same strip under the feet, the same median L* and rain share of the full frames),
  ramped between the thresholds at which the describer claims a fact instead of cut at them.
  Ground: the strip's median a* ramped from ``pavement_min_a`` (0) to ``grass_max_a`` (1) is the
  observation's grass share; its complement is pavement where the chroma is at most
  ``pavement_max_chroma``; the cue scores 100 × the mean share over the observations. From the
  full frames of the trajectory (``max_full_frames``, centres of equal parts of it; none:
  unknown): night is the median L* ramped from ``day_from`` (0) to ``night_below`` (100), day its
  complement; rain the rain share ramped from ``clear_below`` (0) to ``rain_from`` (100), clear
  its complement.

An axis scores the mean of its cues, ``unmentioned_score`` (100: nothing to contradict) when the
query names none of its cues; a cue that cannot be measured scores ``unknown_score`` (50). The
holistic score is derived from the decomposed ones (``holistic_source: "heuristic"``):
``P(yes) = clip(Π_axes score / 100, p_floor, 1 - p_floor)``, the chance that every axis holds
when the axes are independent, clipped like the answer fallback. Nothing is invalid unless the
rules fail; the per-cue scores are in ``details["cues"]``. The query-independent measurements of
a trajectory are cached (the last ``cache_size`` trajectories), so scoring a shortlist against
many queries reads each trajectory's pixels once.
"""
from __future__ import annotations

import hashlib
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from models.backends.tracking.base import FrameSource
from models.backends.vlm.base import (
    DescribeRequest,
    Stopwatch,
    check_against_video,
    clean_observations,
    select_inputs,
)
from models.backends.vlm.scene_reading import (
    MedianBackgrounds,
    SceneReadingConfig,
    bgr_to_lab,
    condition_measures,
    ground_ab,
)
from models.backends.vlm.scoring import AXES, ScoreCounts, ScoreRequest, ScoreResult
from models.body_norms import LOWER_GARMENT_ROWS, UPPER_GARMENT_ROWS
from models.colour_naming import TERMS, colour_namer, grey_world_gains
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.facts import canonical_json
from models.media.video import FrameReader
from models.pace_norms import (
    STANDING_BELOW_M_S,
    TYPICAL_HFOV_DEG,
    TYPICAL_PACE_M_S,
    focal_px,
    heights_per_s,
)
from models.query_reading import read_query

RULES_VERSION = "heuristic-score-v2"            # v2: basic colour terms, pace norms
# Query words for the scene the pixels can show: word -> (scene reading, value).
SCENE_CUES: dict[str, tuple[str, str]] = {
    "grass": ("ground", "grass"), "lawn": ("ground", "grass"),
    "pavement": ("ground", "pavement"), "paving": ("ground", "pavement"), "sidewalk": ("ground", "pavement"),
    "rain": ("weather", "rain"), "rainy": ("weather", "rain"), "raining": ("weather", "rain"),
    "dry": ("weather", "clear"),
    "night": ("light", "night"), "day": ("light", "day"), "daylight": ("light", "day"),
}
# The axis of each cue the query reading gives.
CUE_AXES = {"upper_colour": "appearance", "lower_colour": "appearance", "walks": "action", "speed": "action",
            "stands": "action", "ground": "scene", "weather": "scene", "light": "scene"}
# Ground-plane directions of the walking words: (across the camera, towards it).
DIRECTION_VECTORS = {"right": (1.0, 0.0), "left": (-1.0, 0.0), "towards": (0.0, 1.0), "away": (0.0, -1.0)}
_WORD = re.compile(r"[a-z]+")


@dataclass
class HeuristicScorerConfig(PlainConfig):
    """Settings of the heuristic pixel scorer (plain data; hashed into the result's prompt_sha256)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # crops of the target read for its colours, spread over its observations
    max_crops: int = 8
    # full frames read for the light and the weather (centres of equal parts of the trajectory)
    max_full_frames: int = 2
    # frames spread evenly over the whole video whose per-pixel median is the background
    background_frames: int = 15
    # box rows (fractions of its height from the top) read as the upper and the lower garment, inside
    # the published torso and leg segments (models.body_norms)
    upper_rows: tuple[float, float] = UPPER_GARMENT_ROWS
    lower_rows: tuple[float, float] = LOWER_GARMENT_ROWS
    # central fraction of the box width read for both regions
    column_fraction: float = 0.5
    # boxes shorter than this (pixels) are too small to read colours from
    min_colour_height: float = 40.0
    # a pixel is the target's when its CIE76 difference from the background exceeds this
    foreground_delta_e: float = 12.0
    # below this foreground share of a crop's regions every pixel is kept (the background holds the target)
    min_foreground_share: float = 0.12
    # grey-world white balance from the median background: gains clipped to [1 / g, g]
    white_balance_max_gain: float = 1.5
    # a region whose matched pixels are fewer than this share cannot be read
    min_colour_share: float = 0.05
    # width (seconds) of the window the foot point's velocity is taken over
    velocity_window_s: float = 1.0
    # ground speed (figure heights per second) from which the target moves (models.pace_norms)
    stand_speed: float = heights_per_s(STANDING_BELOW_M_S)
    # horizontal field of view (degrees) assumed for the camera: depth motion in heights per second
    # is focal_px * (dh/dt) / h^2 for a box of height h (pinhole camera over a ground plane)
    hfov_deg: float = TYPICAL_HFOV_DEG
    # fewer velocities than this: the motion cues are unknown
    min_observations: int = 4
    # a standing run this long (seconds) fully supports "stands still"
    min_stand_s: float = 1.0
    # standard deviation of ln(speed / pace) of a pace word's score
    pace_tolerance: float = 0.3
    # observations more than this apart (seconds) are not differenced and break a standing run
    max_gap_s: float = 1.0
    # the scene measures and their thresholds, shared with the heuristic describer: a score ramps
    # linearly between the thresholds the describer's facts take (grass from pavement_min_a to
    # grass_max_a of a*; night from day_from to night_below of L*; rain from clear_below to rain_from)
    scene: SceneReadingConfig = field(default_factory=SceneReadingConfig)
    # an axis whose cues the query does not name; a cue the pixels cannot show
    unmentioned_score: float = 100.0
    unknown_score: float = 50.0
    # the holistic P(yes) is clipped to [p_floor, 1 - p_floor]
    p_floor: float = 0.01
    # trajectories whose measurements are kept
    cache_size: int = 64

    def __post_init__(self) -> None:
        self.upper_rows = tuple(float(v) for v in self.upper_rows)
        self.lower_rows = tuple(float(v) for v in self.lower_rows)
        problems = []
        for name in ("max_crops", "background_frames", "min_observations", "cache_size"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        if self.max_full_frames < 0:
            problems.append("max_full_frames must be >= 0")
        for name in ("upper_rows", "lower_rows"):
            a, b = getattr(self, name)
            if not 0 <= a < b <= 1:
                problems.append(f"{name} must be 0 <= start < end <= 1, got {getattr(self, name)}")
        if not 0 < self.column_fraction <= 1:
            problems.append("column_fraction must be in (0, 1]")
        for name in ("min_colour_height", "foreground_delta_e", "velocity_window_s",
                     "stand_speed", "min_stand_s", "pace_tolerance", "max_gap_s"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0")
        for name in ("min_foreground_share", "min_colour_share"):
            if not 0 <= getattr(self, name) < 1:
                problems.append(f"{name} must be in [0, 1)")
        if not 10 <= self.hfov_deg <= 170:
            problems.append("hfov_deg must be in [10, 170]")
        if not self.white_balance_max_gain >= 1:
            problems.append("white_balance_max_gain must be >= 1")
        for name in ("unmentioned_score", "unknown_score"):
            if not 0 <= getattr(self, name) <= 100:
                problems.append(f"{name} must be in [0, 100]")
        if not 0 < self.p_floor < 0.5:
            problems.append("p_floor must be in (0, 0.5)")
        if problems:
            raise ValueError("HeuristicScorerConfig: " + "; ".join(problems))


@dataclass
class TrackReading:
    """The query-independent measurements of one trajectory."""

    colours: dict                                # "upper" / "lower" -> [T] pixel share per basic colour term (None: unread)
    speed: np.ndarray                            # [M] ground speed, box heights per second (NaN: no velocity)
    heading: np.ndarray                          # [M, 2] unit ground-velocity direction (0 where standing or unknown)
    standing_s: float                            # longest standing run, seconds
    grass: np.ndarray                            # [N] grass share under the feet per observation
    pavement: np.ndarray                         # [N] pavement share under the feet per observation
    light: float | None                          # median L* of the full frames (None: no full frames)
    rain: float | None                           # median bright-streak share (None: no full frames)
    crop_frames: list[int]
    full_frames: list[int]
    context_frames: list[int]                    # the background's frames


def _ramp(x: float | np.ndarray, zero: float, one: float):
    """0 at ``zero``, 1 at ``one``, linear between, clipped (either order)."""
    return np.clip((np.asarray(x, np.float64) - zero) / (one - zero), 0.0, 1.0)


class HeuristicPixelScorer:
    """Scores (query, trajectory) pairs from pixels and boxes (see the module docstring)."""

    name = "heuristic"
    model = ""

    def __init__(self, config: HeuristicScorerConfig | None = None):
        self.config = config or HeuristicScorerConfig()
        self.counts = ScoreCounts()
        self.names = list(TERMS)
        self._namer = colour_namer()
        self.rules_sha256 = hashlib.sha256(canonical_json(
            {"version": RULES_VERSION, "settings": self.config.to_dict()}).encode()).hexdigest()
        self._backgrounds = MedianBackgrounds(self.config.background_frames)
        self._readings: OrderedDict[tuple, TrackReading] = OrderedDict()

    # -- public API ------------------------------------------------------------------------------
    def cues(self, query: str) -> list[tuple[str, str]]:
        """The ``(cue, value)`` pairs of a query text that this scorer measures, in reading order."""
        out = [(p.name, p.value) for p in read_query(query).predicates if p.name in CUE_AXES]
        for word in _WORD.findall(query.lower()):
            cue = SCENE_CUES.get(word)
            if cue is not None and cue not in out and all(c[0] != cue[0] for c in out):
                out.append(cue)
        return out

    def score(self, request: ScoreRequest, *, reader: FrameSource | None = None) -> ScoreResult:
        """Score one pair. ``reader``: an open frame source of ``request.video_path`` (opened here
        when None and the trajectory is not cached)."""
        clock = Stopwatch()
        cues = self.cues(request.query)
        reading = self.measure(request, reader=reader)
        cfg = self.config
        measured = [self._cue_score(c, v, reading) for c, v in cues]
        axes = {}
        for axis in AXES:
            values = [cfg.unknown_score if s is None else s for (c, _), s in zip(cues, measured) if CUE_AXES[c] == axis]
            axes[axis] = float(np.mean(values)) if values else cfg.unmentioned_score
        cue_scores = {f"{c}={v}": s for (c, v), s in zip(cues, measured)}
        p = float(np.clip(np.prod([axes[a] / 100.0 for a in AXES]), cfg.p_floor, 1.0 - cfg.p_floor))
        result = ScoreResult(
            log_p_yes=math.log(p), holistic_source="heuristic", invalid=[], raw_texts=[], calls=0,
            crop_frames=reading.crop_frames, full_frames=reading.full_frames, prompt_version=RULES_VERSION,
            prompt_sha256=self.rules_sha256, backend=self.name, model=self.model,
            trajectory_id=request.trajectory_id, seconds=clock.seconds(),
            details={"cues": cue_scores, "context_frames": reading.context_frames}, **axes)
        self.counts.add(result)
        return result

    def measure(self, request: ScoreRequest, *, reader: FrameSource | None = None) -> TrackReading:
        """The trajectory's measurements (cached by video, frames, boxes and fps)."""
        key = (str(request.video_path), request.fps,
               hashlib.sha1(np.ascontiguousarray(request.frames, "<i8").tobytes()
                            + np.ascontiguousarray(request.boxes, "<f8").tobytes()).hexdigest())
        hit = self._readings.get(key)
        if hit is not None:
            self._readings.move_to_end(key)
            return hit
        own = reader is None
        source = FrameReader(request.video_path, fps=request.fps) if own else reader
        try:
            reading = self._measure(request, source)
        finally:
            if own:
                source.close()
        self._readings[key] = reading
        if len(self._readings) > self.config.cache_size:
            self._readings.popitem(last=False)
        return reading

    # -- measurements ----------------------------------------------------------------------------
    def _measure(self, request: ScoreRequest, source: FrameSource) -> TrackReading:
        cfg = self.config
        track: DescribeRequest = request.track(max_crops=cfg.max_crops, max_full_frames=cfg.max_full_frames)
        width, height = int(source.width), int(source.height)
        check_against_video(track, int(source.frame_count), width, height)
        fps = float(request.fps or source.fps)
        crops, full = select_inputs(track, width, height, min_crop_height=cfg.min_colour_height)
        background, bg_frames, background_lab = self._backgrounds.get(request.video_path, source)   # [H, W, 3]
        colours = self._colours(track, source, crops, background_lab,
                                grey_world_gains(background, cfg.white_balance_max_gain))
        speed, heading, standing_s = self._motion(track, fps, width, height)
        grass, pavement = self._ground(track.boxes, background_lab)
        light, rain = condition_measures([bgr_to_lab(source.read(int(track.frames[p]))) for p in full],
                                         background_lab, cfg.scene) or (None, None)
        return TrackReading(colours=colours, speed=speed, heading=heading, standing_s=standing_s, grass=grass,
                            pavement=pavement, light=light, rain=rain,
                            crop_frames=[int(track.frames[p]) for p in crops],
                            full_frames=[int(track.frames[p]) for p in full], context_frames=bg_frames)

    def _colours(self, track: DescribeRequest, source: FrameSource, crops: list[int],
                 background_lab: np.ndarray, gains: np.ndarray) -> dict:
        """Per body part, the basic-term histogram of the white-balanced pixels (``gains`` [3]),
        averaged over the readable crops (None: none)."""
        cfg = self.config
        width, height = int(source.width), int(source.height)
        hists: dict[str, list[np.ndarray]] = {"upper": [], "lower": []}
        for pos in crops:
            x1, y1, x2, y2 = (float(v) for v in track.boxes[pos])
            if y2 - y1 < cfg.min_colour_height:
                continue
            frame = source.read(int(track.frames[pos]))
            half = (x2 - x1) * cfg.column_fraction / 2
            cx = (x1 + x2) / 2
            xs = slice(max(0, round(cx - half)), min(width, round(cx + half)))
            labs, pix, fgs = {}, {}, {}
            for part, (r0, r1) in (("upper", cfg.upper_rows), ("lower", cfg.lower_rows)):
                ys = slice(max(0, round(y1 + r0 * (y2 - y1))), min(height, round(y1 + r1 * (y2 - y1))))
                lab = bgr_to_lab(frame[ys, xs]).reshape(-1, 3)                   # [P, 3]
                if len(lab) == 0:
                    continue
                bg = background_lab[ys, xs].reshape(-1, 3)                       # [P, 3]
                labs[part] = lab
                pix[part] = frame[ys, xs].reshape(-1, 3)                         # [P, 3] BGR
                fgs[part] = np.linalg.norm(lab - bg, axis=1) > cfg.foreground_delta_e   # [P]
            total = sum(len(m) for m in fgs.values())
            keep_all = sum(int(m.sum()) for m in fgs.values()) < cfg.min_foreground_share * max(total, 1)
            for part in labs:
                pixels = pix[part] if keep_all else pix[part][fgs[part]]         # [P', 3]
                if len(pixels) == 0:
                    continue
                hists[part].append(self._namer.shares(pixels, gains))            # [T]
        return {part: np.mean(h, axis=0) if h else None for part, h in hists.items()}

    def _motion(self, track: DescribeRequest, fps: float, width: int, height: int
                ) -> tuple[np.ndarray, np.ndarray, float]:
        """Ground speed ``[M]`` and heading ``[M, 2]`` of the observations used, and the longest
        standing run in seconds."""
        cfg = self.config
        clean = np.flatnonzero(clean_observations(track.boxes, width, height))
        use = clean if len(clean) >= cfg.min_observations else np.arange(len(track.frames))
        b = track.boxes[use]                                                     # [M, 4]
        t = track.frames[use] / fps                                              # [M] seconds
        x, h = (b[:, 0] + b[:, 2]) / 2, np.maximum(b[:, 3] - b[:, 1], 1.0)      # [M] each
        half = cfg.velocity_window_s / 2
        lo = np.searchsorted(t, t - half - 1e-9, side="left")                    # [M] first in the window
        hi = np.searchsorted(t, t + half + 1e-9, side="right") - 1               # [M] last in the window
        dt = t[hi] - t[lo]                                                       # [M]
        ok = dt >= min(half, 2.0 / fps) - 1e-9                                   # [M] a window with a span
        safe = np.where(ok, dt, 1.0)
        gx = np.where(ok, (x[hi] - x[lo]) / safe, np.nan) / h                    # [M] heights/s across
        # depth: a pinhole camera over a ground plane sees the person at focal / h heights
        focal = focal_px(width, cfg.hfov_deg)
        gy = np.where(ok, focal * (1.0 / h[lo] - 1.0 / h[hi]) / safe, np.nan)  # [M] heights/s, + towards
        speed = np.hypot(gx, gy)                                                 # [M], NaN where unknown
        moving = np.nan_to_num(speed, nan=0.0) >= cfg.stand_speed                # [M]
        heading = np.where(moving[:, None], np.stack([gx, gy], 1) / np.where(moving, speed, 1.0)[:, None], 0.0)
        standing = ok & ~moving                                                  # [M]
        longest, start = 0.0, None
        for i in range(len(t) + 1):
            broken = i == len(t) or not standing[i] or (start is not None and t[i] - t[i - 1] > cfg.max_gap_s)
            if broken and start is not None:
                longest = max(longest, t[i - 1] - t[start] + 1.0 / fps)
                start = None
            if i < len(t) and standing[i] and start is None:
                start = i
        return speed, np.nan_to_num(heading), float(longest)

    def _ground(self, boxes: np.ndarray, background_lab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Grass and pavement shares ``[N]`` of the median background under each box's feet
        (``scene_reading.ground_ab``, ramped between the describer's thresholds)."""
        scene = self.config.scene
        grass, pavement = np.zeros(len(boxes)), np.zeros(len(boxes))
        for i, box in enumerate(boxes):
            ab = ground_ab(box, background_lab, scene)
            if ab is None:
                continue
            grass[i] = float(_ramp(ab[0], scene.pavement_min_a, scene.grass_max_a))
            pavement[i] = (1.0 - grass[i]) * float(math.hypot(*ab) <= scene.pavement_max_chroma)
        return grass, pavement

    # -- cue scores ------------------------------------------------------------------------------
    def _cue_score(self, cue: str, value: str, r: TrackReading) -> float | None:
        """0..100 support of one cue by the measurements; None when they cannot show it."""
        cfg = self.config
        if cue in ("upper_colour", "lower_colour"):
            hist = r.colours[cue.split("_")[0]]
            if hist is None or value not in self.names or hist.sum() < cfg.min_colour_share:
                return None
            k = self.names.index(value)
            rival = float(np.delete(hist, k).max()) if len(hist) > 1 else 0.0
            return 100.0 * float(hist[k]) / (float(hist[k]) + rival) if hist[k] + rival > 0 else 0.0
        known = ~np.isnan(r.speed)
        if cue in ("walks", "speed", "stands") and known.sum() < cfg.min_observations:
            return None
        if cue == "walks":
            d = DIRECTION_VECTORS.get(value)
            if d is None:
                return None
            return 100.0 * float(np.clip(r.heading[known] @ np.array(d), 0.0, None).mean())
        if cue == "speed":
            pace = heights_per_s(TYPICAL_PACE_M_S[value]) if value in TYPICAL_PACE_M_S else None
            moving = known & (np.nan_to_num(r.speed) >= cfg.stand_speed)
            if pace is None:
                return None
            if not moving.any():
                return 0.0
            z = np.log(r.speed[moving] / pace) / cfg.pace_tolerance
            return 100.0 * float(np.exp(-0.5 * z * z).mean())
        if cue == "stands":
            return 100.0 * min(1.0, r.standing_s / cfg.min_stand_s)
        if cue == "ground":
            return 100.0 * float((r.grass if value == "grass" else r.pavement).mean()) if len(r.grass) else None
        if cue == "light":
            if r.light is None:
                return None
            night = float(_ramp(r.light, cfg.scene.day_from, cfg.scene.night_below))
            return 100.0 * (night if value == "night" else 1.0 - night)
        if cue == "weather":
            if r.rain is None:
                return None
            wet = float(_ramp(r.rain, cfg.scene.clear_below, cfg.scene.rain_from))
            return 100.0 * (wet if value == "rain" else 1.0 - wet)
        return None
