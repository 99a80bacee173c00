"""The heuristic describer: clothing colours, motion and scene context read from pixels and
boxes, no model.

The embedded default describing backend (DESIGN 3): it runs on a CPU with nothing downloaded and
says only what it measured. Per trajectory it proposes

- ``upper_colour`` / ``lower_colour`` (attributes over the observed span): on each crop, the
  central columns of the box at torso rows and at thigh rows are read in CIELAB. Pixels that do
  not differ from a median background frame (the per-pixel median of frames spread over the whole
  video: a static camera shows the background there most of the time) are dropped; when almost
  nothing differs (a person who never moves is part of that median) every pixel of the region is
  kept. The foreground threshold adapts to each crop: a multiple of the median difference
  beside the box, where the frame shows the background. The remaining pixels are white-balanced
  (grey-world gains of the median background) and each takes a basic colour term: the group of
  its nearest CSS/X11 colour name under CIEDE2000 (:mod:`models.colour_naming`); the crop votes
  for the term that holds the largest share of its pixels. The colour is known when enough crops vote and most of them agree; otherwise it is
  reported as unknown (too small, too few readable crops, or no agreement);
- ``walks`` (left / right / towards / away) and ``speed`` (slow / normal / fast) per moving run,
  ``stands`` ("still") per standing run: the foot point (bottom centre of the box, completed from
  the typical box size where the box is cut by the frame edge) and the box height are
  differentiated by a local linear fit over ``velocity_window_s``; the ground speed in body
  heights per second is ``hypot(vx / h, focal * (dh/dt) / h^2)``: across the camera a box height
  is one body height, and in depth a pinhole camera over a ground plane sees a person at
  ``focal / h`` heights, ``focal`` from an assumed field of view (``hfov_deg``). Runs shorter than
  ``min_run_s`` are absorbed by their neighbours; a gap in the observations longer than
  ``max_gap_s`` splits the runs and nothing is claimed inside it. The direction is the dominant
  axis of the run's mean velocity (image-relative: "left" is the frame's left), the pace word
  comes from walking norms over an adult's height (:mod:`models.pace_norms`: slow below 1.0 m/s,
  fast from 1.8 m/s);
  "towards" / "away" must agree with the change of box height (a figure walking towards the
  camera grows), or the direction is reported as unknown;
- ``enters`` / ``leaves`` ("from the left", "to the bottom", ...) when the first / last
  observations touch a frame edge (entering needs the trajectory to start after frame 0 or in
  motion; leaving needs the video to go on), over the frames that touch it;
- ``size`` (small / medium / large, median box height against the frame height) and ``position``
  (left / centre / right of the frame) for the whole span when the target stays in one third of
  the width, and for each standing run.

- ``ground`` ("grass" / "pavement") per run of observations, from the median background under
  the box's feet; ``light`` ("night" / "day") and ``weather`` ("rain" / "clear") for the whole
  span, from the budget's full frames (none: neither is claimed). The rules are those of
  :mod:`models.backends.vlm.scene_reading`.

Facts carry their evidence frames (the voting crops; start, middle and end of a run; the full
frames) and their scope ("whole" for attributes of the span, "interval" otherwise). What one
trajectory cannot show (who crosses or occludes whom) and what it would need to recognise
objects for (which scene object the target is near) is not claimed.
"""
from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from models.backends.tracking.base import FrameSource
from models.backends.vlm.base import (
    DescribeRequest,
    DescribeResult,
    Stopwatch,
    check_against_video,
    check_description,
    select_inputs,
    uniform_positions,
)
from models.backends.vlm.scene_reading import (
    MedianBackgrounds,
    SceneReadingConfig,
    bgr_to_lab,
    ground_runs,
    read_conditions,
    scene_facts,
)
from models.body_norms import LOWER_GARMENT_ROWS, UPPER_GARMENT_ROWS
from models.colour_naming import TERMS, colour_namer, grey_world_gains
from models.config import UNKNOWN_SETTINGS, PlainConfig
from models.facts import InvalidOutput, canonical_json
from models.media.video import FrameReader
from models.pace_norms import (
    FAST_FROM_M_S,
    SLOW_BELOW_M_S,
    STANDING_BELOW_M_S,
    TYPICAL_HFOV_DEG,
    focal_px,
    heights_per_s,
)

RULES_VERSION = "heuristic-v3"                   # v2: ground, light and weather; v3: basic colour terms, pace norms


@dataclass
class HeuristicDescriberConfig(PlainConfig):
    """Settings of the heuristic describer (plain data; hashed into the result's prompt_sha256)."""

    unknown_keys_message = UNKNOWN_SETTINGS

    # frames spread evenly over the whole video whose per-pixel median is the background
    background_frames: int = 15
    # a pixel belongs to the target when its CIE76 difference from the background exceeds
    # noise_factor x the median difference beside the box (the crop's own noise level),
    # clipped to [min_delta_e, max_delta_e]
    noise_factor: float = 3.0
    min_delta_e: float = 5.0
    max_delta_e: float = 20.0
    # below this foreground share of a crop's regions, the background holds the target: keep all pixels
    min_foreground_share: float = 0.12
    # box rows (fractions of its height from the top) read as the upper and the lower garment, inside
    # the published torso and leg segments (models.body_norms)
    upper_rows: tuple[float, float] = UPPER_GARMENT_ROWS
    lower_rows: tuple[float, float] = LOWER_GARMENT_ROWS
    # central fraction of the box width read for both regions
    column_fraction: float = 0.5
    # boxes shorter than this (pixels) are too small to read clothing colours from
    min_colour_height: float = 40.0
    # a region with fewer target pixels than this gives no vote
    min_region_pixels: int = 25
    # the crop's vote needs at least this share of the region's pixels on one name
    min_pixel_share: float = 0.35
    # grey-world white balance from the median background: gains clipped to [1 / g, g]
    white_balance_max_gain: float = 1.5
    # at least this many crops must vote for the winning name
    min_colour_votes: int = 2
    # and the winner needs more than this share of the votes cast
    min_vote_share: float = 0.5
    # width (seconds) of the local linear fit that gives the foot point's velocity
    velocity_window_s: float = 1.0
    # ground speed (figure heights per second) below which the target stands (models.pace_norms)
    stand_speed: float = heights_per_s(STANDING_BELOW_M_S)
    # runs of walking or standing shorter than this (seconds) are absorbed by their neighbours
    min_run_s: float = 0.6
    # an observation gap longer than this (seconds) splits the runs; nothing is claimed inside it
    max_gap_s: float = 1.0
    # fewer observations than this in a stretch: its motion is unknown
    min_observations: int = 4
    # a walk must move the foot point at least this many box heights in the image to name a direction
    min_displacement: float = 0.25
    # towards/away also needs the box height to agree (grow towards, shrink away): a change of
    # more than this log-ratio the other way makes the direction unknown
    max_scale_disagreement: float = 0.05
    # pace words: "slow" below, "fast" from (heights per second): walking norms over an adult's
    # height (models.pace_norms)
    slow_below: float = heights_per_s(SLOW_BELOW_M_S)
    fast_from: float = heights_per_s(FAST_FROM_M_S)
    # horizontal field of view (degrees) assumed for the camera: depth motion in heights per second
    # is focal_px * (dh/dt) / h^2 for a box of height h (pinhole camera over a ground plane)
    hfov_deg: float = TYPICAL_HFOV_DEG
    # a box side within this many pixels of the frame edge touches it
    edge_margin: float = 1.5
    # size words by median box height over frame height: "small" below, "large" from
    small_below: float = 0.2
    large_from: float = 0.45
    # ground, light and rain readings (their runs use min_run_s and max_gap_s above)
    scene: SceneReadingConfig = field(default_factory=SceneReadingConfig)

    def __post_init__(self) -> None:
        problems = []
        self.upper_rows = tuple(float(v) for v in self.upper_rows)
        self.lower_rows = tuple(float(v) for v in self.lower_rows)
        for name in ("upper_rows", "lower_rows"):
            a, b = getattr(self, name)
            if not 0.0 <= a < b <= 1.0:
                problems.append(f"{name} must be 0 <= start < end <= 1, got {(a, b)}")
        if self.background_frames < 3:
            problems.append(f"background_frames must be >= 3, got {self.background_frames}")
        if self.max_delta_e < self.min_delta_e:
            problems.append("max_delta_e must be >= min_delta_e")
        if not 0 < self.column_fraction <= 1:
            problems.append(f"column_fraction must be in (0, 1], got {self.column_fraction}")
        if not 0 <= self.min_vote_share < 1 or not 0 < self.min_pixel_share <= 1:
            problems.append("min_vote_share must be in [0, 1) and min_pixel_share in (0, 1]")
        if self.min_colour_votes < 1 or self.min_observations < 2:
            problems.append("min_colour_votes must be >= 1 and min_observations >= 2")
        if not self.white_balance_max_gain >= 1:
            problems.append(f"white_balance_max_gain must be >= 1, got {self.white_balance_max_gain}")
        if not 0 < self.slow_below < self.fast_from:
            problems.append(f"need 0 < slow_below < fast_from, got {self.slow_below}, {self.fast_from}")
        if not 10 <= self.hfov_deg <= 170:
            problems.append(f"hfov_deg must be in [10, 170], got {self.hfov_deg}")
        for name in ("velocity_window_s", "stand_speed", "min_run_s", "max_gap_s", "min_delta_e", "noise_factor",
                     "min_colour_height"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be > 0")
        if not 0 < self.small_below < self.large_from:
            problems.append("need 0 < small_below < large_from")
        if problems:
            raise ValueError("HeuristicDescriberConfig: " + "; ".join(problems))


# -- the describer -------------------------------------------------------------------------------
class HeuristicDescriber:
    """Colours from pixels, motion from boxes (see the module docstring)."""

    name = "heuristic"
    model = ""

    def __init__(self, config: HeuristicDescriberConfig | None = None):
        self.config = config or HeuristicDescriberConfig()
        self._namer = colour_namer()
        self._backgrounds = MedianBackgrounds(self.config.background_frames)
        self.rules_sha256 = hashlib.sha256(canonical_json(
            {"version": RULES_VERSION, "settings": self.config.to_dict()}).encode()).hexdigest()

    # -- public API ------------------------------------------------------------------------------
    def describe(self, request: DescribeRequest, *, reader: FrameSource | None = None) -> DescribeResult:
        """Describe one trajectory. ``reader``: an open frame source of ``request.video_path``
        (opened here when None). The heuristic has no prompt: it records its rule version and the
        SHA-256 of its settings instead."""
        if request.prompt_version not in (None, RULES_VERSION):
            raise ValueError(f"the heuristic describer has no prompt versions; it follows {RULES_VERSION!r} "
                             f"(got {request.prompt_version!r})")
        clock = Stopwatch()
        own = reader is None
        source = FrameReader(request.video_path, fps=request.fps) if own else reader
        try:
            n_frames = int(source.frame_count)
            check_against_video(request, n_frames, source.width, source.height)
            fps = float(request.fps or source.fps)
            crops, full = select_inputs(request, source.width, source.height,
                                        min_crop_height=self.config.min_colour_height)
            background, bg_frames, background_lab = self._backgrounds.get(request.video_path, source)
            colours = self._colours(request, source, crops, background)
            full_lab = [bgr_to_lab(source.read(int(request.frames[p]))) for p in full]   # [H, W, 3] each
            cfg = self.config
            scene = {"ground": ground_runs(request.frames, request.boxes, background_lab, fps, cfg.scene,
                                           min_run_s=cfg.min_run_s, max_gap_s=cfg.max_gap_s),
                     **read_conditions(full_lab, background_lab, cfg.scene),
                     "full_frames": [int(request.frames[p]) for p in full]}
            data = self._facts(request, fps, n_frames, source.width, source.height, colours, scene)
        finally:
            if own:
                source.close()
        raw = canonical_json(data)
        try:
            description = check_description(raw, n_frames=n_frames, span=request.span)
            errors, failed = [], False
        except InvalidOutput as exc:  # a defect of these rules: recorded like any invalid answer
            description, errors, failed = None, [f"attempt 1: {exc}"], True
        return DescribeResult(
            description=description, failed=failed, raw_texts=[raw], errors=errors, attempts=1,
            crop_frames=[int(request.frames[i]) for i in crops], full_frames=[int(request.frames[i]) for i in full],
            context_frames=bg_frames, prompt_version=RULES_VERSION, prompt_sha256=self.rules_sha256,
            backend=self.name, model=self.model, budget=request.budget.to_dict(),
            settings=self.config.to_dict(), seconds=clock.seconds())

    # -- colours ---------------------------------------------------------------------------------
    def _regions(self, box: np.ndarray, width: int, height: int) -> dict[str, tuple[slice, slice]]:
        x1, y1, x2, y2 = (float(v) for v in box)
        w, h = x2 - x1, y2 - y1
        cx = (x1 + x2) / 2
        half = w * self.config.column_fraction / 2
        xa, xb = max(0, round(cx - half)), min(width, round(cx + half))
        out = {}
        for part, (r0, r1) in (("upper", self.config.upper_rows), ("lower", self.config.lower_rows)):
            ya, yb = max(0, round(y1 + r0 * h)), min(height, round(y1 + r1 * h))
            out[part] = (slice(ya, yb), slice(xa, xb))
        return out

    def _colours(self, request: DescribeRequest, source: FrameSource, crops: list[int],
                 background: np.ndarray) -> dict[str, dict]:
        """Per body part: the winning name (or None) and the frames that voted for it (the crops
        tried when there is no winner)."""
        cfg = self.config
        gains = grey_world_gains(background, cfg.white_balance_max_gain)   # [3] the scene's white balance
        votes: dict[str, list[tuple[int, str]]] = {"upper": [], "lower": []}
        for pos in crops:
            box = request.boxes[pos]
            if box[3] - box[1] < cfg.min_colour_height:
                continue
            frame = source.read(int(request.frames[pos]))
            threshold = self._foreground_threshold(frame, background, box)
            pixels_bgr, masks = {}, {}
            for part, (ys, xs) in self._regions(box, source.width, source.height).items():
                pix = frame[ys, xs]
                if pix.size == 0:
                    continue
                lab = bgr_to_lab(pix).reshape(-1, 3)                       # [P, 3]
                bg = bgr_to_lab(background[ys, xs]).reshape(-1, 3)         # [P, 3]
                pixels_bgr[part] = pix.reshape(-1, 3)                      # [P, 3]
                masks[part] = np.linalg.norm(lab - bg, axis=1) > threshold  # [P]
            if not pixels_bgr:
                continue
            total = sum(len(m) for m in masks.values())
            share = sum(int(m.sum()) for m in masks.values()) / max(total, 1)
            keep_all = share < cfg.min_foreground_share
            for part, pix in pixels_bgr.items():
                name = self._read_region(pix if keep_all else pix[masks[part]], gains)
                if name is not None:
                    votes[part].append((int(request.frames[pos]), name))
        out = {}
        for part in ("upper", "lower"):
            cast = votes[part]
            counts = Counter(name for _, name in cast)
            winner = None
            if counts:
                name, n = counts.most_common(1)[0]
                tied = sum(1 for v in counts.values() if v == n) > 1
                if n >= cfg.min_colour_votes and n / len(cast) > cfg.min_vote_share and not tied:
                    winner = name
            out[part] = {"value": winner,
                         "evidence": [f for f, name in cast if name == winner] if winner else
                         [int(request.frames[p]) for p in crops]}
        return out

    def _foreground_threshold(self, frame: np.ndarray, background: np.ndarray, box: np.ndarray) -> float:
        """The crop's foreground threshold from the noise beside the box (strips a quarter of the
        box wide to its left and right, over its rows)."""
        cfg = self.config
        height, width = frame.shape[:2]
        x1, y1, x2, y2 = (float(v) for v in box)
        strip = max(2, round((x2 - x1) * 0.25))
        ya, yb = max(0, round(y1)), min(height, round(y2))
        diffs = []
        for xa, xb in ((max(0, round(x1) - strip), max(0, round(x1))), (min(width, round(x2)), min(width, round(x2) + strip))):
            if xb > xa and yb > ya:
                a = bgr_to_lab(frame[ya:yb, xa:xb]).reshape(-1, 3)
                b = bgr_to_lab(background[ya:yb, xa:xb]).reshape(-1, 3)
                diffs.append(np.linalg.norm(a - b, axis=1))
        if not diffs:
            return cfg.max_delta_e
        noise = float(np.median(np.concatenate(diffs)))
        return float(np.clip(cfg.noise_factor * noise, cfg.min_delta_e, cfg.max_delta_e))

    def _read_region(self, bgr_pixels: np.ndarray, gains: np.ndarray) -> str | None:
        """The region's colour name: the basic colour term holding the largest share of its
        white-balanced pixels (``models.colour_naming``), if that share is large enough; None for
        too few pixels or no clear name."""
        if len(bgr_pixels) < self.config.min_region_pixels:
            return None
        shares = self._namer.shares(bgr_pixels, gains)                     # [T]
        best = int(shares.argmax())
        return TERMS[best] if shares[best] >= self.config.min_pixel_share else None

    # -- motion ----------------------------------------------------------------------------------
    def _foot_points(self, boxes: np.ndarray, width: int, height: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Foot x, foot y and height per observation, completed from the typical box size where
        the box is cut by a frame edge."""
        m = self.config.edge_margin
        b = boxes
        w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
        cut_l, cut_r = b[:, 0] <= m, b[:, 2] >= width - m
        cut_t, cut_b = b[:, 1] <= m, b[:, 3] >= height - m
        whole = np.flatnonzero(~(cut_l | cut_r | cut_t | cut_b))
        if len(whole):  # the size of the nearest observation that is wholly in view
            right = np.clip(np.searchsorted(whole, np.arange(len(b))), 0, len(whole) - 1)
            left = np.clip(right - 1, 0, len(whole) - 1)
            pick = np.where(np.abs(whole[left] - np.arange(len(b))) <= np.abs(whole[right] - np.arange(len(b))),
                            whole[left], whole[right])
            typ_w, typ_h = w[pick], h[pick]
        else:
            typ_w, typ_h = np.full(len(b), np.median(w)), np.full(len(b), np.median(h))
        x = (b[:, 0] + b[:, 2]) / 2
        x = np.where(cut_l & ~cut_r, b[:, 2] - np.maximum(w, typ_w) / 2, x)
        x = np.where(cut_r & ~cut_l, b[:, 0] + np.maximum(w, typ_w) / 2, x)
        y = np.where(cut_b & ~cut_t, b[:, 1] + np.maximum(h, typ_h), b[:, 3])
        hh = np.where(cut_t | cut_b, np.maximum(h, typ_h), h)
        return x, y, hh

    @staticmethod
    def _local_velocity(t: np.ndarray, v: np.ndarray, half: float) -> np.ndarray:
        """Slope of the least-squares line through the points within ``half`` seconds of each one
        (0 where fewer than two distinct times fall in the window), from windowed running sums."""
        t = np.asarray(t, np.float64) - float(t[0])                        # [n] seconds from the start
        v = np.asarray(v, np.float64)                                      # [n]
        lo = np.searchsorted(t, t - half - 1e-9, side="left")              # [n] first index in the window
        hi = np.searchsorted(t, t + half + 1e-9, side="right")             # [n] one past the last

        def window_sum(x: np.ndarray) -> np.ndarray:
            c = np.concatenate([[0.0], np.cumsum(x)])                      # [n + 1]
            return c[hi] - c[lo]                                           # [n]

        n = (hi - lo).astype(np.float64)                                   # [n]
        st, sv, stt, stv = window_sum(t), window_sum(v), window_sum(t * t), window_sum(t * v)
        den = n * stt - st * st                                            # [n] n^2 x variance of t
        ok = (n >= 2) & (den > 1e-12 * np.maximum(n * n, 1.0))
        return np.where(ok, (n * stv - st * sv) / np.where(ok, den, 1.0), 0.0)

    def _runs(self, moving: np.ndarray, t: np.ndarray, frame_s: float) -> list[list[int]]:
        """[start, end, moving] position runs of one label, runs shorter than ``min_run_s``
        absorbed by their neighbours (shortest first). ``frame_s``: the duration of one frame."""
        runs = []
        start = 0
        for i in range(1, len(moving) + 1):
            if i == len(moving) or moving[i] != moving[start]:
                runs.append([start, i, bool(moving[start])])
                start = i

        def duration(r):
            return t[r[1] - 1] - t[r[0]] + frame_s

        while len(runs) > 1:
            short = [k for k, r in enumerate(runs) if duration(r) < self.config.min_run_s]
            if not short:
                break
            k = min(short, key=lambda j: duration(runs[j]))
            runs[k][2] = not runs[k][2]
            merged = [runs[0]]
            for r in runs[1:]:
                if r[2] == merged[-1][2]:
                    merged[-1][1] = r[1]
                else:
                    merged.append(r)
            runs = merged
        return runs

    def _pace(self, speed: float) -> str:
        if speed < self.config.slow_below:
            return "slow"
        return "normal" if speed < self.config.fast_from else "fast"

    def _position(self, x: np.ndarray, width: int) -> str | None:
        """'left'/'centre'/'right' of the frame when every x lies within one third of it."""
        thirds = np.clip((x / width * 3).astype(int), 0, 2)
        if (thirds == thirds[0]).all():
            return ("left", "centre", "right")[int(thirds[0])] + " of the frame"
        return None

    # -- facts -----------------------------------------------------------------------------------
    def _facts(self, request: DescribeRequest, fps: float, n_frames: int, width: int, height: int,
               colours: dict[str, dict], scene: dict) -> dict:
        cfg = self.config
        frames, boxes = request.frames, request.boxes
        first, end = request.span
        facts: list[dict] = []

        def add(kind, name, value, a, b, evidence, scope="interval", known=True):
            evidence = sorted({int(e) for e in evidence if a <= e < b})
            if len(evidence) > 64:
                evidence = [evidence[p] for p in uniform_positions(len(evidence), 64)]
            facts.append({"id": "", "kind": kind, "name": name, "value": value if known else "",
                          "start_frame": int(a), "end_frame": int(b), "evidence_frames": evidence,
                          "scope": scope, "known": bool(known)})

        for part, name in (("upper", "upper_colour"), ("lower", "lower_colour")):
            c = colours[part]
            add("attribute", name, c["value"] or "", first, end, c["evidence"], scope="whole",
                known=c["value"] is not None)
        heights = boxes[:, 3] - boxes[:, 1]
        size_ratio = float(np.median(heights)) / height
        size = "small" if size_ratio < cfg.small_below else ("large" if size_ratio >= cfg.large_from else "medium")
        add("attribute", "size", size, first, end, [frames[p] for p in uniform_positions(len(frames), 3)], "whole")

        x, y, h = self._foot_points(boxes, width, height)
        where = self._position(x, width)
        if where is not None:
            add("attribute", "position", where, first, end, [frames[p] for p in uniform_positions(len(frames), 3)],
                "whole")
        scene_items, scene_words = scene_facts(scene, first, end)
        for item in scene_items:
            add(*item)
        t = frames / fps
        focal = focal_px(width, cfg.hfov_deg)                             # camera focal length, pixels
        motion_sentences = []
        # stretches between observation gaps longer than max_gap_s
        cuts = np.flatnonzero(np.diff(t) > cfg.max_gap_s) + 1
        stretches = np.split(np.arange(len(frames)), cuts)
        any_motion = False
        for idx in stretches:
            if len(idx) < cfg.min_observations or t[idx[-1]] - t[idx[0]] < cfg.min_run_s:
                continue
            any_motion = True
            ts, xs, ys, hs = t[idx], x[idx], y[idx], h[idx]
            half = cfg.velocity_window_s / 2
            vx = self._local_velocity(ts, xs, half)                        # [n] px/s
            vy = self._local_velocity(ts, ys, half)                        # [n] px/s
            vh = self._local_velocity(ts, hs, half)                        # [n] px/s of box height
            hs1 = np.maximum(hs, 1.0)                                      # [n]
            across = vx / hs1                                              # [n] heights/s across the camera
            depth = focal * vh / (hs1 * hs1)                               # [n] heights/s, + towards the camera
            ground = np.hypot(across, depth)                               # [n] heights/s on the ground
            for r0, r1, moving in self._runs(ground >= cfg.stand_speed, ts, 1.0 / fps):
                run = idx[r0:r1]
                ra, rb = int(frames[run[0]]), int(frames[run[-1]]) + 1
                ev = [frames[run[p]] for p in uniform_positions(len(run), 3)]
                if not moving:
                    add("event", "stands", "still", ra, rb, ev)
                    motion_sentences.append(f"stands still (frames {ra}-{rb - 1})")
                    spot = self._position(x[run], width)
                    if spot is not None and spot != where:   # not already said for the whole span
                        add("attribute", "position", spot, ra, rb, ev)
                    continue
                h_run = float(np.median(h[run]))
                mvx = float(np.median(vx[r0:r1]))
                mvy = float(np.median(vy[r0:r1]))
                lateral, in_depth = abs(float(np.median(across[r0:r1]))), abs(float(np.median(depth[r0:r1])))
                # distance covered on the ground, in heights: across from the foot point, in depth
                # from the box heights (focal / h at each end)
                depth_moved = focal * abs(1.0 / max(float(h[run[0]]), 1.0) - 1.0 / max(float(h[run[-1]]), 1.0))
                moved = max(np.ptp(x[run]) / max(h_run, 1.0), depth_moved)
                if moved < cfg.min_displacement:
                    direction = None
                elif lateral >= in_depth:
                    direction = "right" if mvx > 0 else "left"
                else:
                    direction = "towards" if mvy > 0 else "away"
                    third = max(1, len(run) // 3)
                    growth = math.log(float(np.median(h[run[-third:]])) / max(float(np.median(h[run[:third]])), 1.0))
                    if abs(growth) > cfg.max_scale_disagreement and (growth > 0) != (mvy > 0):
                        direction = None             # the foot point and the box size disagree
                pace = self._pace(float(np.median(ground[r0:r1])))
                add("event", "walks", direction or "", ra, rb, ev, known=direction is not None)
                add("attribute", "speed", pace, ra, rb, ev)
                where_to = {"left": "to the left", "right": "to the right", "towards": "towards the camera",
                            "away": "away from the camera"}.get(direction, "in an unclear direction")
                motion_sentences.append(f"walks {where_to} at a {pace} pace (frames {ra}-{rb - 1})")
        if not any_motion:
            add("event", "walks", "", first, end, [frames[p] for p in uniform_positions(len(frames), 3)],
                known=False)
            motion_sentences.append("too few observations to tell how it moves")

        # entering and leaving through a frame edge
        m = cfg.edge_margin

        def edge(box) -> str | None:
            x1, y1, x2, y2 = box
            if x1 <= m:
                return "left"
            if x2 >= width - m:
                return "right"
            if y2 >= height - m:
                return "bottom"
            if y1 <= m:
                return "top"
            return None

        sides = [edge(b) for b in boxes]
        first_moving = any(f["name"] == "walks" and f["known"] and f["start_frame"] == first for f in facts)
        if sides[0] is not None and (first > 0 or first_moving):
            k = 0
            while k + 1 < len(sides) and sides[k + 1] == sides[0]:
                k += 1
            add("event", "enters", f"from the {sides[0]}", first, int(frames[k]) + 1, frames[:k + 1])
            motion_sentences.insert(0, f"enters from the {sides[0]}")
        if sides[-1] is not None and end < n_frames:
            k = len(sides) - 1
            while k - 1 >= 0 and sides[k - 1] == sides[-1]:
                k -= 1
            add("event", "leaves", f"to the {sides[-1]}", int(frames[k]), end, frames[k:])
            motion_sentences.append(f"leaves to the {sides[-1]}")

        attributes = [f for f in facts if f["kind"] == "attribute"]
        events = sorted((f for f in facts if f["kind"] == "event"), key=lambda f: (f["start_frame"], f["name"]))
        ordered = attributes + events
        for i, f in enumerate(ordered, 1):
            f["id"] = f"f{i}"

        def colour_words(part: str, garment: str) -> str:
            value = colours[part]["value"]
            return f"{value} {garment}" if value else f"{garment} of unclear colour"

        appearance = (f"A {size} figure with {colour_words('upper', 'upper-body clothing')} and "
                      f"{colour_words('lower', 'lower-body clothing')}.")
        seconds = (end - first) / fps
        motion = (f"Visible from frame {first} to {end - 1} ({seconds:.1f} s); "
                  + "; ".join(motion_sentences) + "."
                  + (f" Scene: {', '.join(scene_words)}." if scene_words else ""))
        return {"appearance": appearance, "motion": motion, "facts": ordered}

