"""Scene context the heuristic describer reads from pixels: the ground under a box's feet, and the
light and rain of full frames, and the median background both read against. Everything here reads
images in CIELAB (:func:`bgr_to_lab`) and nothing else: no ground truth, no model. The heuristic
describer (:mod:`models.backends.vlm.heuristic`) thresholds these readings into facts; the
heuristic pixel scorer (:mod:`models.backends.vlm.heuristic_scorer`) ramps the same measures into
0-100 scores.

Settings are a :class:`SceneReadingConfig` (the heuristic describer's ``scene`` settings).

- **Ground** ("grass" / "pavement"): the median background (where the target is not, most of the
  time) in a strip ``ground_rows`` box heights deep just below the box's bottom edge, across the
  central half of its columns (beside the feet, a third of the box width each side, when the box
  touches the frame's bottom edge). A median a* of at most ``grass_max_a`` is green: grass; an a*
  of at least ``pavement_min_a`` with a chroma of at most ``pavement_max_chroma`` is grey:
  pavement; anything else is not read. Runs of one reading over consecutive observations are
  claimed when they last at least ``min_run_s``; an observation gap longer than ``max_gap_s``
  ends a run (the describer's own run settings).
- **Light** ("night" / "day"): the median L* of the full frames, their median below
  ``night_below`` is night, from ``day_from`` day, unknown between.
- **Weather** ("rain" / "clear"): each full frame against the median background, from which
  falling streaks are gone (they are somewhere else on every frame): the share of pixels brighter
  by more than ``rain_delta`` L* in each cell of a ``rain_grid`` grid, its median over the cells
  (people and other movers fill a few cells; rain falls on all of them) and then over the frames:
  rain from ``rain_from``, clear up to ``clear_below``, unknown between.
"""
from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass

import cv2
import numpy as np

from models.backends.vlm.base import uniform_positions
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.vocabulary import GROUND_PHRASES, LIGHT_PHRASES, WEATHER_PHRASES


@dataclass
class SceneReadingConfig(PlainConfig):
    """Thresholds of the scene readings (plain data; part of the heuristic describer's settings)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # ground: the strip of the median background below the box, this many box heights deep (>= 3 px)
    ground_rows: float = 0.05
    # its median CIELAB a* at most this is grass; a* from pavement_min_a with a chroma of at most
    # pavement_max_chroma is pavement
    grass_max_a: float = -8.0
    pavement_min_a: float = -6.0
    pavement_max_chroma: float = 22.0
    # light: the median L* of the full frames below night_below is night, from day_from day
    night_below: float = 35.0
    day_from: float = 42.0
    # rain: pixels brighter than the median background by more than rain_delta L*, their share per
    # cell of a rain_grid (rows, columns) grid, median over cells and frames: rain from rain_from,
    # clear up to clear_below
    rain_delta: float = 8.0
    rain_grid: tuple[int, int] = (8, 8)
    rain_from: float = 0.004
    clear_below: float = 0.001

    def __post_init__(self) -> None:
        self.rain_grid = tuple(int(v) for v in self.rain_grid)
        problems = []
        if not self.grass_max_a < self.pavement_min_a or self.pavement_max_chroma <= 0 or self.ground_rows <= 0:
            problems.append("need grass_max_a < pavement_min_a, pavement_max_chroma > 0 and ground_rows > 0")
        if not 0 < self.night_below <= self.day_from <= 100:
            problems.append(f"need 0 < night_below <= day_from <= 100, got {self.night_below}, {self.day_from}")
        if len(self.rain_grid) != 2 or min(self.rain_grid) < 1 or self.rain_delta <= 0:
            problems.append(f"need a rain_grid of two counts >= 1 and rain_delta > 0, got {self.rain_grid}")
        if not 0 <= self.clear_below <= self.rain_from <= 1:
            problems.append(f"need 0 <= clear_below <= rain_from <= 1, got {self.clear_below}, {self.rain_from}")
        if problems:
            raise ValueError("SceneReadingConfig: " + "; ".join(problems))


def bgr_to_lab(bgr: np.ndarray) -> np.ndarray:
    """CIELAB (L in 0..100) of uint8 BGR pixels, any leading shape [..., 3] -> float32 [..., 3]."""
    arr = np.asarray(bgr, np.uint8)
    flat = arr.reshape(-1, 1, 3).astype(np.float32) / 255.0
    return cv2.cvtColor(flat, cv2.COLOR_BGR2Lab).reshape(arr.shape).astype(np.float32)



class MedianBackgrounds:
    """The per-pixel median of ``n_frames`` frames spread evenly over a video (where the people are
    not, most of the time): ``get(path, source)`` gives it as BGR [H, W, 3] uint8, the frames it
    took and its CIELAB [H, W, 3], computed once per video and kept for the last ``keep`` videos."""

    def __init__(self, n_frames: int, keep: int = 4):
        self.n_frames, self.keep = n_frames, keep
        self._cache: OrderedDict[tuple, tuple[np.ndarray, list[int], np.ndarray]] = OrderedDict()

    def get(self, path, source) -> tuple[np.ndarray, list[int], np.ndarray]:
        key = (str(path), int(source.frame_count), int(source.width), int(source.height))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        indices = uniform_positions(int(source.frame_count), self.n_frames)
        stack = np.stack([source.read(i) for i in indices])                # [F, H, W, 3]
        median = np.median(stack, axis=0).astype(np.uint8)                 # [H, W, 3]
        self._cache[key] = (median, indices, bgr_to_lab(median))
        if len(self._cache) > self.keep:
            self._cache.popitem(last=False)
        return self._cache[key]


def ground_ab(box: np.ndarray, background_lab: np.ndarray, cfg: SceneReadingConfig) -> tuple[float, float] | None:
    """The median CIELAB (a*, b*) of the median background [H, W, 3] under one box's feet (the
    strip of the module docstring), or None where fewer than three pixels lie there."""
    height, width = background_lab.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box)
    w, depth = x2 - x1, max(3, round(cfg.ground_rows * (y2 - y1)))
    if round(y2) + 2 <= height:                        # below the feet, across the central columns
        xa, xb = max(0, round(x1 + 0.25 * w)), min(width, round(x2 - 0.25 * w))
        pixels = background_lab[round(y2):min(height, round(y2) + depth), xa:xb].reshape(-1, 3)   # [P, 3]
    else:                                              # the feet are at the bottom edge: beside them
        rows = slice(max(0, round(y2) - depth), height)
        side = max(2, round(0.3 * w))
        left = background_lab[rows, max(0, round(x1) - side):max(0, round(x1))].reshape(-1, 3)
        right = background_lab[rows, min(width, round(x2)):min(width, round(x2) + side)].reshape(-1, 3)
        pixels = np.concatenate([left, right])                                                     # [P, 3]
    if len(pixels) < 3:
        return None
    _, a, b = np.median(pixels, axis=0)
    return float(a), float(b)


def ground_at(box: np.ndarray, background_lab: np.ndarray, cfg: SceneReadingConfig) -> str | None:
    """"grass", "pavement" or None for the median background [H, W, 3] (CIELAB) under one box's feet."""
    ab = ground_ab(box, background_lab, cfg)
    if ab is None:
        return None
    a, b = ab
    if a <= cfg.grass_max_a:
        return "grass"
    if a >= cfg.pavement_min_a and math.hypot(a, b) <= cfg.pavement_max_chroma:
        return "pavement"
    return None


def ground_runs(frames: np.ndarray, boxes: np.ndarray, background_lab: np.ndarray, fps: float,
                cfg: SceneReadingConfig, *, min_run_s: float, max_gap_s: float
                ) -> list[tuple[str, int, int, list[int]]]:
    """``(value, start_frame, end_frame, evidence_frames)`` per claimed run of one ground reading
    over the observations ``frames`` [N] with ``boxes`` [N, 4] (half-open frame intervals; the
    evidence is the run's start, middle and end)."""
    readings = [ground_at(b, background_lab, cfg) for b in boxes]
    runs, start = [], 0
    for i in range(1, len(frames) + 1):
        gap = i < len(frames) and (frames[i] - frames[i - 1]) / fps > max_gap_s
        if i == len(frames) or readings[i] != readings[start] or gap:
            runs.append((start, i))
            start = i
    out = []
    for a, b in runs:
        value = readings[a]
        if value is None or (frames[b - 1] - frames[a] + 1) / fps < min_run_s:
            continue
        out.append((value, int(frames[a]), int(frames[b - 1]) + 1,
                    [int(frames[a + p]) for p in uniform_positions(b - a, 3)]))
    return out


def rain_share(frame_lab: np.ndarray, background_lab: np.ndarray, cfg: SceneReadingConfig) -> float:
    """The median over the cells of a ``rain_grid`` grid of the share of pixels of one frame
    [H, W, 3] brighter than the background [H, W, 3] by more than ``rain_delta`` L*."""
    brighter = (frame_lab[..., 0] - background_lab[..., 0]) > cfg.rain_delta              # [H, W]
    h, w = brighter.shape
    rows = np.linspace(0, h, cfg.rain_grid[0] + 1).astype(int)
    cols = np.linspace(0, w, cfg.rain_grid[1] + 1).astype(int)
    shares = [float(brighter[r0:r1, c0:c1].mean()) for r0, r1 in itertools.pairwise(rows) if r1 > r0
              for c0, c1 in itertools.pairwise(cols) if c1 > c0]
    return float(np.median(shares))


def condition_measures(full_lab: list[np.ndarray], background_lab: np.ndarray, cfg: SceneReadingConfig
                       ) -> tuple[float, float] | None:
    """(median L*, median :func:`rain_share`) over the full frames (CIELAB, [H, W, 3] each); None
    without full frames."""
    if not full_lab:
        return None
    lit = float(np.median([np.median(lab[..., 0]) for lab in full_lab]))
    wet = float(np.median([rain_share(lab, background_lab, cfg) for lab in full_lab]))
    return lit, wet


def read_conditions(full_lab: list[np.ndarray], background_lab: np.ndarray, cfg: SceneReadingConfig
                    ) -> dict[str, str | None]:
    """``{"light": ..., "weather": ...}`` from the full frames (CIELAB, [H, W, 3] each), None where
    the reading falls between its thresholds; ``{}`` without full frames."""
    measured = condition_measures(full_lab, background_lab, cfg)
    if measured is None:
        return {}
    lit, wet = measured
    light = "night" if lit < cfg.night_below else ("day" if lit >= cfg.day_from else None)
    weather = "rain" if wet >= cfg.rain_from else ("clear" if wet <= cfg.clear_below else None)
    return {"light": light, "weather": weather}


def scene_facts(scene: dict, first: int, end: int) -> tuple[list[tuple], list[str]]:
    """The facts of the readings over the span ``[first, end)`` as ``(kind, name, value, start,
    end, evidence, scope, known)`` tuples, and the words that say them ("at night", "on the grass
    (frames 3-20)"). ``scene``: ``ground`` (:func:`ground_runs`), ``full_frames`` and, when read,
    ``light`` and ``weather`` (:func:`read_conditions`); an unreadable light or weather is an
    unknown fact."""
    items, words = [], []
    for name, phrases in (("light", LIGHT_PHRASES), ("weather", WEATHER_PHRASES)):
        if name in scene:
            value = scene[name]
            items.append(("attribute", name, value or "", first, end, scene["full_frames"], "whole", value is not None))
            if value is not None:
                words.append(phrases[value])
    for value, a, b, evidence in scene["ground"]:
        items.append(("attribute", "ground", value, a, b, evidence, "interval", True))
        words.append(f"{GROUND_PHRASES[value]} (frames {a}-{b - 1})")
    return items, words
