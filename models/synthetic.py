"""Synthetic static-camera videos of walking people, with exact ground truth.

The project cannot download data sets, so accuracy figures for tracking (and later for the
heuristic describer and the retrievers) are measured on videos rendered here. A scene is plain
data (:class:`SceneSpec` with a list of :class:`PersonSpec`); :func:`render_scene` draws it with
NumPy/OpenCV into an ``.mp4`` and returns the :class:`GroundTruth` it also saves next to the
video as ``<name>.gt.json``.

What is drawn:

- a static camera over a textured background ("plaza": a wall with windows above tiled paving;
  "park": a hedge, a lawn, a gravel path and benches), with low-frequency shading and per-frame
  sensor noise (never a flat colour);
- people-like figures: head with hair, neck, torso and sleeves in the upper-body clothing colour,
  legs in the lower-body colour, hands, shoes. Seen from the side (walking left or right) the
  legs and arms swing with the stride; seen from the front or back (walking towards or away from
  the camera) the figure is wider, the feet alternate and the figure grows or shrinks with a
  simple ground-plane perspective (height proportional to the foot's distance below the horizon);
- optional non-person distractors (a rolling ball, a sliding crate) that move but are not people;
- figures are drawn far to near (by foot position), so a person walking higher in the image
  passes *behind* one walking lower down, and the occluded person's visible fraction drops.

Ground truth per person: clothing colour names and BGR values, direction, speed in px/s and as a
word, stop intervals, per-frame amodal boxes (the full silhouette's extent, clipped to the frame)
and per-frame visible fraction (pixels of the silhouette that end up on screen and are not covered
by a nearer figure, divided by the silhouette's full area), and a list of :class:`Fact` records
(attributes and events with frame intervals) for a describer that reads facts from the truth:
attributes ``upper_colour``, ``lower_colour``, ``speed`` (slow/normal/fast, while walking); events
``walks`` (left/right/towards/away), ``stands``, ``enters`` / ``leaves`` ("from the left", "to the
bottom", ...), ``crosses`` (another person, when their left-right order flips), ``occluded_by`` and
``passes_in_front_of`` (a nearer person covers at least 30% of the silhouette).

Frame intervals are half-open ``[start, end)`` everywhere in this module.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import cv2
import numpy as np

# Clothing colours, BGR. Names are the vocabulary the describer and the queries use.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (40, 35, 200),
    "blue": (190, 85, 30),
    "green": (55, 150, 40),
    "yellow": (40, 215, 235),
    "white": (238, 238, 238),
    "black": (28, 28, 28),
    "orange": (20, 125, 245),
    "purple": (135, 40, 125),
    "grey": (130, 130, 130),
    "brown": (35, 70, 120),
}
SKIN_TONES: list[tuple[int, int, int]] = [(150, 180, 225), (110, 150, 200), (70, 105, 150), (45, 70, 105)]
HAIR_COLOURS: list[tuple[int, int, int]] = [(20, 20, 25), (30, 50, 80), (60, 110, 160), (150, 150, 155)]
SHOE_BGR = (25, 25, 30)

DIRECTIONS = ("left", "right", "towards", "away", "none")
# Walking pace, in figure heights per second on the ground (a person ~1.7 m tall walks ~1.3 m/s).
SPEED_HEIGHTS_PER_S: dict[str, float] = {"slow": 0.35, "normal": 0.7, "fast": 1.25}
# Motion towards/away from a camera looks slower in the image than the same pace across it.
DEPTH_FORESHORTENING = 0.3
# A nearer person covering at least this fraction of a silhouette makes an "occluded_by" fact.
OCCLUSION_FACT = 0.3
# Stride: one full walking cycle (two steps) covers this many figure heights.
STRIDE_HEIGHTS = 0.85


@dataclass
class PersonSpec:
    """One person in a scene. Positions are the point between the feet, in frame pixels."""

    upper: str                                   # upper-body clothing colour, a key of COLOURS
    lower: str                                   # lower-body clothing colour, a key of COLOURS
    direction: str                               # "left" | "right" | "towards" | "away" | "none" (stands)
    start: tuple[float, float]                   # foot point (x, y) at enter_frame; may be off-frame
    height: float = 160.0                        # figure height in pixels at the start foot point
    speed: str = "normal"                        # walking pace word: "slow" | "normal" | "fast"
    speed_px_s: float | None = None              # image-plane speed override in px/s (None: from the word)
    enter_frame: int = 0                         # first frame on which the person exists
    exit_frame: int | None = None                # first frame on which the person no longer exists (None: never)
    stops: list[tuple[int, int]] = field(default_factory=list)  # [start, end) frames standing still
    skin: int = 0                                # index into SKIN_TONES
    hair: int = 0                                # index into HAIR_COLOURS


@dataclass
class DistractorSpec:
    """A moving thing that is not a person (the 'moving object' detector sees it, HOG should not)."""

    kind: str                                    # "ball" (a disc that bounces along) or "crate" (a box)
    colour: str                                  # a key of COLOURS
    start: tuple[float, float]                   # centre of its bottom edge at frame 0, pixels
    velocity: tuple[float, float]                # px/s in x and y
    size: float = 40.0                           # diameter (ball) or side (crate), pixels


@dataclass
class SceneSpec:
    """A whole synthetic video: camera frame, timing, background and the things in it."""

    name: str                                    # file stem of the rendered video
    width: int = 640                             # frame width, pixels
    height: int = 360                            # frame height, pixels
    fps: float = 12.0                            # frames per second
    n_frames: int = 120                          # number of frames
    seed: int = 0                                # seeds the background, noise and figure details
    people: list[PersonSpec] = field(default_factory=list)           # the people, any order
    background: str = "plaza"                    # "plaza" (wall + paving) or "park" (hedge + lawn + path)
    distractors: list[DistractorSpec] = field(default_factory=list)  # non-person movers
    horizon: float = -0.6                        # horizon line as a fraction of height (negative: above the frame)
    noise: float = 3.0                           # std-dev of per-frame Gaussian sensor noise, grey levels

    def validate(self) -> None:
        if self.width < 64 or self.height < 64:
            raise ValueError(f"scene {self.name!r}: frame {self.width}x{self.height} is too small (min 64x64)")
        if not (0 < self.fps <= 120):
            raise ValueError(f"scene {self.name!r}: fps must be in (0, 120], got {self.fps}")
        if self.n_frames < 1:
            raise ValueError(f"scene {self.name!r}: n_frames must be >= 1, got {self.n_frames}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"scene {self.name!r}: unknown background {self.background!r}; known: {sorted(BACKGROUNDS)}")
        if self.horizon * self.height >= self.height:
            raise ValueError(f"scene {self.name!r}: the horizon must lie above the bottom of the frame")
        for i, p in enumerate(self.people):
            where = f"scene {self.name!r}, person {i}"
            for part in (p.upper, p.lower):
                if part not in COLOURS:
                    raise ValueError(f"{where}: unknown colour {part!r}; known: {sorted(COLOURS)}")
            if p.direction not in DIRECTIONS:
                raise ValueError(f"{where}: unknown direction {p.direction!r}; known: {list(DIRECTIONS)}")
            if p.speed not in SPEED_HEIGHTS_PER_S:
                raise ValueError(f"{where}: unknown speed {p.speed!r}; known: {sorted(SPEED_HEIGHTS_PER_S)}")
            if p.height < 16:
                raise ValueError(f"{where}: height {p.height} px is too small (min 16)")
            if p.start[1] <= self.horizon * self.height:
                raise ValueError(f"{where}: the foot point must lie below the horizon")
            if p.exit_frame is not None and p.exit_frame <= p.enter_frame:
                raise ValueError(f"{where}: exit_frame must be after enter_frame")
            for a, b in p.stops:
                if not (0 <= a < b):
                    raise ValueError(f"{where}: stop interval [{a}, {b}) is not a valid half-open interval")
            if not (0 <= p.skin < len(SKIN_TONES)) or not (0 <= p.hair < len(HAIR_COLOURS)):
                raise ValueError(f"{where}: skin/hair index out of range")
        for i, d in enumerate(self.distractors):
            if d.kind not in ("ball", "crate"):
                raise ValueError(f"scene {self.name!r}, distractor {i}: unknown kind {d.kind!r}")
            if d.colour not in COLOURS:
                raise ValueError(f"scene {self.name!r}, distractor {i}: unknown colour {d.colour!r}")


@dataclass
class Fact:
    """An attribute or event of one person that the ground truth supports."""

    kind: str                                    # "attribute" or "event"
    name: str                                    # e.g. "upper_colour", "walks", "stands", "enters", "occluded_by"
    value: str                                   # e.g. "red", "left", "from the right", "person 2"
    start_frame: int                             # first frame of the supporting interval
    end_frame: int                               # frame after the last one (half-open)


@dataclass
class PersonTruth:
    """The ground truth of one rendered person."""

    id: int                                      # index of the person in SceneSpec.people
    upper_colour: str                            # upper-body clothing colour name
    lower_colour: str                            # lower-body clothing colour name
    upper_bgr: tuple[int, int, int]              # its BGR value as drawn (before noise and compression)
    lower_bgr: tuple[int, int, int]              # likewise for the lower body
    direction: str                               # "left" | "right" | "towards" | "away" | "none"
    speed_px_s: float                            # median image-plane foot speed while walking, px/s
    speed_word: str                              # "slow" | "normal" | "fast" ("none" for a standing person)
    stops: list[tuple[int, int]]                 # [start, end) frame intervals standing still (clipped to the video)
    boxes: list[list[float] | None]              # per frame: amodal box xyxy clipped to the frame, or None
    visible: list[float]                         # per frame: visible fraction of the silhouette in [0, 1]
    facts: list[Fact] = field(default_factory=list)  # attributes and events with intervals

    def frames(self) -> np.ndarray:
        """The frame indices on which the person has a box (is at least partly in the frame)."""
        return np.array([i for i, b in enumerate(self.boxes) if b is not None], dtype=np.int32)

    def boxes_array(self) -> np.ndarray:
        """[n_frames, 4] float32 boxes, NaN where the person is not in the frame."""
        out = np.full((len(self.boxes), 4), np.nan, dtype=np.float32)
        for i, b in enumerate(self.boxes):
            if b is not None:
                out[i] = b
        return out


@dataclass
class GroundTruth:
    """Everything known about a rendered video."""

    scene: str                                   # SceneSpec.name
    video: str                                   # file name of the video (next to the .gt.json)
    width: int                                   # frame width, pixels
    height: int                                  # frame height, pixels
    fps: float                                   # frames per second
    n_frames: int                                # number of frames
    people: list[PersonTruth]                    # indexed like SceneSpec.people (PersonTruth.id)
    distractor_boxes: list[list[list[float] | None]] = field(default_factory=list)  # per distractor, per frame: box or None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> GroundTruth:
        data = json.loads(text)
        people = []
        for p in data.pop("people"):
            facts = [Fact(**f) for f in p.pop("facts")]
            p["stops"] = [tuple(s) for s in p["stops"]]
            p["upper_bgr"] = tuple(p["upper_bgr"])
            p["lower_bgr"] = tuple(p["lower_bgr"])
            people.append(PersonTruth(**p, facts=facts))
        return cls(**data, people=people)

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> GroundTruth:
        return cls.from_json(Path(path).read_text())


def gt_path_for(video_path: str | os.PathLike) -> Path:
    """Where the ground truth of a rendered video lives: ``<name>.gt.json`` next to it."""
    p = Path(video_path)
    return p.with_name(p.stem + ".gt.json")


def speed_word(px_per_s: float, height_px: float) -> str:
    """The pace word for an across-the-camera speed, relative to the figure's height."""
    if px_per_s <= 0:
        return "none"
    rel = px_per_s / max(height_px, 1e-6)
    if rel < (SPEED_HEIGHTS_PER_S["slow"] + SPEED_HEIGHTS_PER_S["normal"]) / 2:
        return "slow"
    if rel < (SPEED_HEIGHTS_PER_S["normal"] + SPEED_HEIGHTS_PER_S["fast"]) / 2:
        return "normal"
    return "fast"


# -- backgrounds ---------------------------------------------------------------------------------
def _smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Low-frequency noise in [-1, 1], HxW."""
    small = rng.uniform(-1, 1, size=(max(2, h * cells // max(w, 1)), cells)).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


def _background_plaza(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    img = np.zeros((h, w, 3), np.float32)
    ground_y = int(h * 0.42)
    wall = np.array([150, 165, 178], np.float32) + rng.uniform(-15, 15, 3)
    pave = np.array([118, 132, 140], np.float32) + rng.uniform(-12, 12, 3)
    img[:ground_y] = wall
    img[ground_y:] = pave
    # windows and panels on the wall
    x = int(rng.integers(5, 40))
    while x < w - 20:
        ww = int(rng.integers(w // 16, w // 8))
        wy0 = int(rng.integers(h // 30, h // 10))
        wy1 = int(ground_y * rng.uniform(0.55, 0.8))
        shade = np.array([95, 85, 70], np.float32) + rng.uniform(-20, 20, 3)
        cv2.rectangle(img, (x, wy0), (min(w - 1, x + ww), wy1), shade.tolist(), -1)
        cv2.rectangle(img, (x, wy0), (min(w - 1, x + ww), wy1), (60, 60, 60), 2)
        x += ww + int(rng.integers(w // 20, w // 6))
    cv2.line(img, (0, ground_y), (w, ground_y), (70, 80, 85), 3)
    # paving tiles, converging a little towards the top
    step = max(12, w // 14)
    for y in range(ground_y + 8, h, max(8, h // 18)):
        cv2.line(img, (0, y), (w, y), (pave * 0.82).tolist(), 1)
    for x0 in range(-w, 2 * w, step):
        cv2.line(img, (x0, h), (int(w / 2 + (x0 - w / 2) * 0.7), ground_y), (pave * 0.82).tolist(), 1)
    img += 18 * _smooth_noise(rng, h, w, 12)[..., None]
    img += 6 * _smooth_noise(rng, h, w, 60)[..., None]
    return img


def _background_park(rng: np.random.Generator, w: int, h: int) -> np.ndarray:
    img = np.zeros((h, w, 3), np.float32)
    hedge_y = int(h * 0.35)
    img[:hedge_y] = np.array([70, 115, 80], np.float32) + rng.uniform(-10, 10, 3)
    img[hedge_y:] = np.array([80, 140, 105], np.float32) + rng.uniform(-10, 10, 3)
    # a gravel path across the lower half
    path = np.array([140, 160, 175], np.float32) + rng.uniform(-10, 10, 3)
    cv2.rectangle(img, (0, int(h * 0.55)), (w, int(h * 0.97)), path.tolist(), -1)
    img[:hedge_y] += 30 * _smooth_noise(rng, hedge_y, w, 40)[..., None]
    img += 14 * _smooth_noise(rng, h, w, 10)[..., None]
    img += 8 * _smooth_noise(rng, h, w, 90)[..., None]
    # a few benches and bins
    for _ in range(3):
        bx = int(rng.integers(0, w - w // 8))
        by = int(rng.uniform(0.4, 0.5) * h)
        cv2.rectangle(img, (bx, by), (bx + w // 9, by + h // 40), (40, 60, 90), -1)
    return img


BACKGROUNDS = {"plaza": _background_plaza, "park": _background_park}


# -- figures -------------------------------------------------------------------------------------
SHIFT = 4                                       # fixed-point bits for sub-pixel drawing
_ONE = 1 << SHIFT


def _pt(x: float, y: float) -> tuple[int, int]:
    return round(x * _ONE), round(y * _ONE)


def _limb(canvas: np.ndarray, mask: np.ndarray, p0, p1, w0: float, w1: float, colour) -> None:
    """A tapered limb from p0 (width w0) to p1 (width w1) with rounded ends."""
    (x0, y0), (x1, y1) = p0, p1
    dx, dy = x1 - x0, y1 - y0
    n = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / n, dx / n
    poly = np.array([_pt(x0 + nx * w0 / 2, y0 + ny * w0 / 2), _pt(x1 + nx * w1 / 2, y1 + ny * w1 / 2),
                     _pt(x1 - nx * w1 / 2, y1 - ny * w1 / 2), _pt(x0 - nx * w0 / 2, y0 - ny * w0 / 2)], np.int32)
    for target, col in ((canvas, colour), (mask, 255)):
        cv2.fillPoly(target, [poly], col, cv2.LINE_8, SHIFT)
        cv2.circle(target, _pt(x0, y0), round(w0 / 2 * _ONE), col, -1, cv2.LINE_8, SHIFT)
        cv2.circle(target, _pt(x1, y1), round(w1 / 2 * _ONE), col, -1, cv2.LINE_8, SHIFT)


def _shade(bgr, factor: float) -> tuple[int, ...]:
    return tuple(int(np.clip(c * factor, 0, 255)) for c in bgr)


def draw_figure(height: float, phase: float, amplitude: float, view: str, upper, lower, skin, hair,
                sub: tuple[float, float] = (0.0, 0.0)) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Draw one person-like figure on its own canvas.

    ``phase`` is the walking-cycle angle (radians), ``amplitude`` in [0, 1] scales the swing
    (0 = standing), ``view`` is "side-left", "side-right", "front" or "back". ``sub`` is the
    sub-pixel offset of the foot point. Returns ``(bgr, mask, (fx, fy))``: the figure's colours,
    its silhouette (uint8 0/255) and the integer pixel of the canvas that is the foot point.
    """
    H = float(height)
    pad = 3
    cw = math.ceil(H * 0.75) + 2 * pad
    ch = math.ceil(H * 1.02) + 2 * pad
    canvas = np.zeros((ch, cw, 3), np.uint8)
    mask = np.zeros((ch, cw), np.uint8)
    fx_i, fy_i = cw // 2, pad + math.ceil(H)
    cx, ground = fx_i + sub[0], fy_i + sub[1]
    side = view.startswith("side")
    facing = 1.0 if view == "side-right" else -1.0
    swing = amplitude * math.sin(phase)

    leg_len = 0.47 * H
    hip_y_rest = ground - leg_len
    if side:
        # the body bobs: the lower foot stays on the ground
        theta = math.radians(26.0) * swing
        stance = math.radians(6.0)  # a standing person's feet are a little apart
        if abs(theta) < stance:
            theta = math.copysign(stance, theta) if theta else stance
        bob = leg_len * (1 - math.cos(theta))
        hip_y = hip_y_rest + bob
        legs = [(cx, hip_y, cx + leg_len * math.sin(s * theta), hip_y + leg_len * math.cos(theta)) for s in (1, -1)]
    else:
        lift = 0.035 * H * amplitude
        hip_y = hip_y_rest
        legs = [(cx + s * 0.05 * H, hip_y, cx + s * 0.06 * H, ground - lift * max(0.0, s * math.sin(phase)))
                for s in (1, -1)]
    top = hip_y - 0.53 * H
    shoulder_y = top + 0.17 * H
    head_r = 0.062 * H
    head_c = (cx + (0.01 * H * facing if side else 0.0), top + 0.07 * H)

    # back limbs first (darker), then torso, then front limbs
    back, front = (legs[1], legs[0]) if side else (legs[0], legs[1])
    lower_back = _shade(lower, 0.72 if side else 0.9)
    upper_back = _shade(upper, 0.72)
    arm_len = 0.36 * H
    if side:
        alpha = math.radians(22.0) * swing
        arms = [(cx, shoulder_y + 0.02 * H, cx - arm_len * math.sin(s * alpha), shoulder_y + 0.02 * H + arm_len * math.cos(alpha))
                for s in (1, -1)]
        arm_back, arm_front = arms[0], arms[1]
    else:
        sw = 0.12 * H
        arm_back = (cx - sw, shoulder_y + 0.02 * H, cx - sw - 0.035 * H, shoulder_y + arm_len * (0.97 + 0.03 * swing))
        arm_front = (cx + sw, shoulder_y + 0.02 * H, cx + sw + 0.035 * H, shoulder_y + arm_len * (0.97 - 0.03 * swing))

    def leg(segment, col):
        x0, y0, x1, y1 = segment
        _limb(canvas, mask, (x0, y0), (x1, y1 - 0.02 * H), 0.095 * H, 0.06 * H, col)
        shoe_dx = 0.035 * H * facing if side else 0.0
        _limb(canvas, mask, (x1 - 0.01 * H * facing if side else x1, y1 - 0.025 * H), (x1 + shoe_dx, y1 - 0.02 * H),
              0.045 * H, 0.045 * H, SHOE_BGR)

    def arm(a, col):
        x0, y0, x1, y1 = a
        _limb(canvas, mask, (x0, y0), (x1, y1), 0.065 * H, 0.05 * H, col)
        cv2.circle(canvas, _pt(x1, y1 + 0.01 * H), int(0.028 * H * _ONE), skin, -1, cv2.LINE_8, SHIFT)
        cv2.circle(mask, _pt(x1, y1 + 0.01 * H), int(0.028 * H * _ONE), 255, -1, cv2.LINE_8, SHIFT)

    if side:
        arm(arm_back, upper_back)
    leg(back, lower_back)
    leg(front, lower)
    # hips / pelvis in lower colour
    hw = (0.075 if side else 0.1) * H
    _limb(canvas, mask, (cx - hw + 0.03 * H, hip_y + 0.01 * H), (cx + hw - 0.03 * H, hip_y + 0.01 * H), 0.09 * H, 0.09 * H, lower)
    # torso
    sw = (0.1 if side else 0.125) * H
    tw = (0.085 if side else 0.1) * H
    poly = np.array([_pt(cx - sw, shoulder_y), _pt(cx + sw, shoulder_y), _pt(cx + tw, hip_y + 0.02 * H),
                     _pt(cx - tw, hip_y + 0.02 * H)], np.int32)
    cv2.fillPoly(canvas, [poly], upper, cv2.LINE_8, SHIFT)
    cv2.fillPoly(mask, [poly], 255, cv2.LINE_8, SHIFT)
    for s in (-1, 1):  # rounded shoulders
        for target, col in ((canvas, upper), (mask, 255)):
            cv2.circle(target, _pt(cx + s * (sw - 0.03 * H), shoulder_y + 0.03 * H), int(0.035 * H * _ONE), col, -1, cv2.LINE_8, SHIFT)
    if not side:
        arm(arm_back, upper_back)
    arm(arm_front, upper)
    # neck and head
    _limb(canvas, mask, (cx, shoulder_y - 0.045 * H), (cx, shoulder_y + 0.01 * H), 0.05 * H, 0.055 * H, skin)
    r = round(head_r * _ONE)
    for target, col in ((canvas, skin), (mask, 255)):
        cv2.ellipse(target, _pt(*head_c), (r, round(head_r * 1.12 * _ONE)), 0, 0, 360, col, -1,
                    cv2.LINE_8, SHIFT)
    # hair: the top of the head (and all of it from behind)
    hair_span = (180, 360) if view != "back" else (0, 360)
    cv2.ellipse(canvas, _pt(head_c[0], head_c[1] - 0.01 * H), (r, round(head_r * 1.05 * _ONE)), 0,
                hair_span[0], hair_span[1], hair, -1, cv2.LINE_8, SHIFT)
    canvas[mask == 0] = 0
    return canvas, mask, (fx_i, fy_i)


# -- scene state ---------------------------------------------------------------------------------
@dataclass
class _PersonState:
    x: float
    y: float
    h: float
    phase: float
    amplitude: float
    exists: bool
    moving: bool


def _scale_at(y: float, spec: SceneSpec, p: PersonSpec) -> float:
    """Figure height at foot row y, by ground-plane perspective anchored at the start point."""
    horizon = spec.horizon * spec.height
    return p.height * (y - horizon) / (p.start[1] - horizon)


def _person_states(spec: SceneSpec, p: PersonSpec) -> list[_PersonState]:
    """Foot position, height and gait of one person on every frame."""
    states = []
    x, y = float(p.start[0]), float(p.start[1])
    phase = 0.0
    amp = 0.0
    dt = 1.0 / spec.fps
    exit_frame = spec.n_frames if p.exit_frame is None else p.exit_frame
    for f in range(spec.n_frames):
        exists = p.enter_frame <= f < exit_frame
        stopped = any(a <= f < b for a, b in p.stops) or p.direction == "none"
        h = _scale_at(y, spec, p)
        moving = exists and not stopped
        # the swing amplitude eases in and out so a stop looks like a stop
        target = 1.0 if moving else 0.0
        amp += (target - amp) * 0.5
        if amp < 0.05 and not moving:
            amp = 0.0
        states.append(_PersonState(x, y, h, phase, amp, exists, moving))
        if moving:
            base = p.speed_px_s if p.speed_px_s is not None else SPEED_HEIGHTS_PER_S[p.speed] * h
            if p.direction in ("left", "right"):
                step = base * dt
                x += step if p.direction == "right" else -step
            else:
                step = (base if p.speed_px_s is not None else base * DEPTH_FORESHORTENING) * dt
                y += step if p.direction == "towards" else -step
                y = max(y, spec.horizon * spec.height + 1.0)
            # the legs cycle with distance walked on the ground, not in the image
            ground_step = SPEED_HEIGHTS_PER_S[p.speed] * h * dt if p.speed_px_s is None else step
            phase += 2 * math.pi * ground_step / (STRIDE_HEIGHTS * h)
    return states


def _view(direction: str) -> str:
    return {"left": "side-left", "right": "side-right", "towards": "front", "away": "back"}.get(direction, "front")


def _draw_distractor(frame: np.ndarray, d: DistractorSpec, t: float) -> tuple[list[float] | None, np.ndarray]:
    """Draw a distractor at time ``t``; returns its clipped box and its HxW boolean mask."""
    h, w = frame.shape[:2]
    bx = d.start[0] + d.velocity[0] * t
    by = d.start[1] + d.velocity[1] * t
    colour = COLOURS[d.colour]
    m = np.zeros((h, w), np.uint8)
    if d.kind == "ball":
        r = d.size / 2
        bounce = abs(math.sin(t * 4.0)) * d.size * 0.8
        cy = by - r - bounce
        cv2.circle(frame, _pt(bx, cy), int(r * _ONE), colour, -1, cv2.LINE_AA, SHIFT)
        cv2.circle(m, _pt(bx, cy), int(r * _ONE), 255, -1, cv2.LINE_8, SHIFT)
        box = [bx - r, cy - r, bx + r, cy + r]
    else:
        s = d.size
        cv2.rectangle(frame, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), colour, -1, cv2.LINE_8, SHIFT)
        cv2.rectangle(frame, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), _shade(colour, 0.6), 2, cv2.LINE_8, SHIFT)
        cv2.rectangle(m, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), 255, -1, cv2.LINE_8, SHIFT)
        box = [bx - s / 2, by - s, bx + s / 2, by]
    return _clip_box(box, w, h), m > 0


def _clip_box(box, w: int, h: int) -> list[float] | None:
    x1, y1, x2, y2 = (float(v) for v in box)
    x1, x2 = max(0.0, x1), min(float(w), x2)
    y1, y2 = max(0.0, y1), min(float(h), y2)
    if x2 - x1 < 1 or y2 - y1 < 1:
        return None
    return [round(x1, 2), round(y1, 2), round(x2, 2), round(y2, 2)]


@dataclass
class FrameTruth:
    """One rendered frame and what is true on it (lists indexed like ``spec.people``)."""

    frame: np.ndarray                            # HxWx3 BGR uint8, noise included
    boxes: list[list[float] | None]              # amodal box xyxy clipped to the frame, None if off-frame/absent
    visible: list[float]                         # visible fraction of each silhouette (0 when absent)
    hidden_by: list[dict[int, float]]            # per person: nearer person id -> fraction of the silhouette it covers
    distractor_boxes: list[list[float] | None]   # per distractor: its box clipped to the frame, or None


def render_frames(spec: SceneSpec) -> Iterator[FrameTruth]:
    """Render ``spec`` frame by frame (no file): the frames and their per-frame truth.

    Boxes are amodal (the whole silhouette, occluded parts included) and clipped to the frame.
    The visible fraction divides the silhouette pixels that end up on screen, not covered by
    anything nearer, by the silhouette's full area (parts outside the frame count as hidden).
    """
    spec.validate()
    rng = np.random.default_rng(spec.seed)
    W, H = spec.width, spec.height
    background = BACKGROUNDS[spec.background](rng, W, H)
    states = [_person_states(spec, p) for p in spec.people]
    noise_rng = np.random.default_rng(spec.seed + 7919)
    for f in range(spec.n_frames):
        frame = background.copy()
        owner = np.full((H, W), -1, np.int16)  # which figure each pixel shows, -1 background
        full_area = np.zeros(len(spec.people), np.float64)
        boxes: list[list[float] | None] = [None] * len(spec.people)
        # far to near: smaller foot y is further away; distractors sort by their bottom edge
        items = [(s[f].y, "p", i) for i, s in enumerate(states) if s[f].exists]
        t = f / spec.fps
        items += [(d.start[1] + d.velocity[1] * t, "d", j) for j, d in enumerate(spec.distractors)]
        items.sort(key=lambda it: (it[0], it[1], it[2]))
        dboxes: list[list[float] | None] = [None] * len(spec.distractors)
        hidden = np.zeros((len(spec.people), len(spec.people) + len(spec.distractors)), np.float64)

        def cover(region_owner: np.ndarray, m: np.ndarray, label: int, hidden: np.ndarray = hidden) -> None:
            """Paint ``label`` over the mask and count whose pixels it covers."""
            under = region_owner[m]
            under = under[(under >= 0) & (under < len(spec.people))]
            if len(under):
                hidden[:, label] += np.bincount(under, minlength=len(spec.people))
            region_owner[m] = label

        for _, kind, i in items:
            if kind == "d":
                dboxes[i], dmask = _draw_distractor(frame, spec.distractors[i], t)
                cover(owner, dmask, len(spec.people) + i)
                continue
            p, s = spec.people[i], states[i][f]
            fx, fy = math.floor(s.x), math.floor(s.y)
            bgr, mask, (ax, ay) = draw_figure(
                s.h, s.phase, s.amplitude, _view(p.direction), COLOURS[p.upper], COLOURS[p.lower],
                SKIN_TONES[p.skin], HAIR_COLOURS[p.hair], sub=(s.x - fx, s.y - fy))
            full_area[i] = float(np.count_nonzero(mask))
            ys, xs = np.nonzero(mask)
            if len(xs) == 0:
                continue
            ox, oy = fx - ax, fy - ay  # frame coordinates of the canvas origin
            box = [ox + xs.min(), oy + ys.min(), ox + xs.max() + 1, oy + ys.max() + 1]
            boxes[i] = _clip_box(box, W, H)
            # paste the visible part
            x0, y0 = max(0, ox), max(0, oy)
            x1, y1 = min(W, ox + mask.shape[1]), min(H, oy + mask.shape[0])
            if x1 <= x0 or y1 <= y0:
                continue
            m = mask[y0 - oy:y1 - oy, x0 - ox:x1 - ox] > 0
            region = frame[y0:y1, x0:x1]
            region[m] = bgr[y0 - oy:y1 - oy, x0 - ox:x1 - ox][m]
            cover(owner[y0:y1, x0:x1], m, i)
        visible = [0.0] * len(spec.people)
        hidden_by: list[dict[int, float]] = [{} for _ in spec.people]
        if spec.people:
            counts = np.bincount(owner[owner >= 0].ravel(), minlength=len(spec.people) + len(spec.distractors))
            for i in range(len(spec.people)):
                if full_area[i] > 0 and boxes[i] is not None:
                    visible[i] = round(float(counts[i] / full_area[i]), 4)
                    hidden_by[i] = {int(k): round(float(hidden[i, k] / full_area[i]), 4)
                                    for k in range(len(spec.people)) if hidden[i, k] > 0}
        if spec.noise > 0:
            frame += noise_rng.normal(0.0, spec.noise, frame.shape).astype(np.float32)
        yield FrameTruth(np.clip(frame, 0, 255).astype(np.uint8), boxes, visible, hidden_by, dboxes)


# -- facts ---------------------------------------------------------------------------------------
def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """Half-open runs of True in a list of booleans."""
    runs, start = [], None
    for i, v in enumerate([*flags, False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _facts(i: int, spec: SceneSpec, states: list[_PersonState], boxes, all_boxes,
           occluders: list[dict[int, list[int]]]) -> list[Fact]:
    p = spec.people[i]
    W, H = spec.width, spec.height
    present = [b is not None for b in boxes]
    runs = _runs(present)
    facts: list[Fact] = []
    if not runs:
        return facts
    first, last = runs[0][0], runs[-1][1]
    facts.append(Fact("attribute", "upper_colour", p.upper, first, last))
    facts.append(Fact("attribute", "lower_colour", p.lower, first, last))
    moving = [present[f] and states[f].moving for f in range(spec.n_frames)]
    for a, b in _runs(moving):
        facts.append(Fact("event", "walks", p.direction, a, b))
        facts.append(Fact("attribute", "speed", p.speed, a, b))
    standing = [present[f] and not states[f].moving for f in range(spec.n_frames)]
    for a, b in _runs(standing):
        facts.append(Fact("event", "stands", "still", a, b))

    def edge(box) -> str | None:
        x1, y1, x2, y2 = box
        if x1 <= 0.5:
            return "left"
        if x2 >= W - 0.5:
            return "right"
        if y2 >= H - 0.5:
            return "bottom"
        if y1 <= 0.5:
            return "top"
        return None

    for a, b in runs:
        side = edge(boxes[a])
        if side is not None and (a > 0 or states[a].moving):
            facts.append(Fact("event", "enters", f"from the {side}", a, a + 1))
        side = edge(boxes[b - 1])
        if side is not None and b < spec.n_frames and states[b - 1].exists:
            facts.append(Fact("event", "leaves", f"to the {side}", b - 1, b))
    # occlusions: a nearer person covers at least OCCLUSION_FACT of the silhouette
    def frame_runs(frames: list[int]) -> list[tuple[int, int]]:
        flags = [False] * spec.n_frames
        for f in frames:
            flags[f] = True
        return _runs(flags)

    for k, frames in sorted(occluders[i].items()):
        for a, b in frame_runs(frames):
            facts.append(Fact("event", "occluded_by", f"person {k}", a, b))
    for j in range(len(spec.people)):
        for a, b in frame_runs(occluders[j].get(i, [])) if j != i else []:
            facts.append(Fact("event", "passes_in_front_of", f"person {j}", a, b))
    # crossings: the horizontal order of two walking people flips while both are in the frame
    for j in range(len(spec.people)):
        if j == i:
            continue
        prev = None
        for f in range(spec.n_frames):
            bj = all_boxes[j][f]
            if boxes[f] is None or bj is None:
                prev = None
                continue
            order = (boxes[f][0] + boxes[f][2]) < (bj[0] + bj[2])
            if prev is not None and order != prev:
                facts.append(Fact("event", "crosses", f"person {j}", f - 1, f + 1))
            prev = order
    facts.sort(key=lambda fa: (fa.start_frame, fa.kind, fa.name, fa.value))
    return facts


# -- rendering to a file -------------------------------------------------------------------------
def render_scene(spec: SceneSpec, out_path: str | os.PathLike) -> GroundTruth:
    """Render ``spec`` to ``out_path`` (.mp4, MPEG-4 Part 2 'mp4v') and save ``<name>.gt.json``.

    Raises ValueError for an invalid spec and OSError when the video cannot be written.
    """
    spec.validate()
    out_path = Path(out_path)
    if out_path.suffix.lower() != ".mp4":
        raise ValueError(f"{out_path.name}: render_scene writes .mp4 files")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(out_path), cv2.VideoWriter_fourcc(*"mp4v"), float(spec.fps), (spec.width, spec.height))
    if not writer.isOpened():
        raise OSError(f"{out_path}: OpenCV could not open an mp4v writer")
    n_p = len(spec.people)
    boxes = [[None] * spec.n_frames for _ in range(n_p)]
    visible = [[0.0] * spec.n_frames for _ in range(n_p)]
    dboxes = [[None] * spec.n_frames for _ in spec.distractors]
    # occluders[i][k]: frames on which person k covers at least OCCLUSION_FACT of person i
    occluders: list[dict[int, list[int]]] = [{} for _ in range(n_p)]
    try:
        for f, truth in enumerate(render_frames(spec)):
            writer.write(truth.frame)
            for i in range(n_p):
                boxes[i][f] = truth.boxes[i]
                visible[i][f] = truth.visible[i]
                for k, frac in truth.hidden_by[i].items():
                    if frac >= OCCLUSION_FACT:
                        occluders[i].setdefault(k, []).append(f)
            for j, b in enumerate(truth.distractor_boxes):
                dboxes[j][f] = b
    finally:
        writer.release()
    states = [_person_states(spec, p) for p in spec.people]
    people = []
    for i, p in enumerate(spec.people):
        moving_speeds = []
        for f in range(1, spec.n_frames):
            a, b = states[i][f - 1], states[i][f]
            if a.moving and b.exists and boxes[i][f] is not None:
                moving_speeds.append(math.hypot(b.x - a.x, b.y - a.y) * spec.fps)
        speed_px_s = float(np.median(moving_speeds)) if moving_speeds else 0.0
        stops = [(a, min(b, spec.n_frames)) for a, b in p.stops if a < spec.n_frames]
        people.append(PersonTruth(
            id=i, upper_colour=p.upper, lower_colour=p.lower, upper_bgr=COLOURS[p.upper],
            lower_bgr=COLOURS[p.lower], direction=p.direction, speed_px_s=round(speed_px_s, 3),
            speed_word=p.speed if p.direction != "none" else "none", stops=stops, boxes=boxes[i],
            visible=visible[i], facts=_facts(i, spec, states[i], boxes[i], boxes, occluders)))
    gt = GroundTruth(scene=spec.name, video=out_path.name, width=spec.width, height=spec.height,
                     fps=float(spec.fps), n_frames=spec.n_frames, people=people, distractor_boxes=dboxes)
    gt.save(gt_path_for(out_path))
    return gt




# -- demo scenes ---------------------------------------------------------------------------------
def demo_scenes(seed: int = 0, n: int = 3) -> list[SceneSpec]:
    """Short scenes for the demo and the tests (3-6 people each, 640x360 or 960x540); ``n`` up to 6
    (the last three are shorter scenes that give every split of the demo two videos).

    ``seed`` varies textures, noise and skin/hair; the choreography (who walks where, stops,
    crossings, occlusions) is fixed so the scenes stay interesting for every seed.
    """
    rng = np.random.default_rng(seed)

    def looks() -> dict:
        return {"skin": int(rng.integers(0, len(SKIN_TONES))), "hair": int(rng.integers(0, len(HAIR_COLOURS)))}

    crossing = SceneSpec(
        name="crossing", width=640, height=360, fps=12, n_frames=120, seed=seed, background="plaza",
        people=[
            PersonSpec("red", "blue", "right", start=(-40, 300), height=150, speed="normal", **looks()),
            PersonSpec("yellow", "black", "left", start=(700, 338), height=165, speed="normal", **looks()),
            PersonSpec("green", "grey", "right", start=(120, 270), height=138, speed="slow",
                       stops=[(45, 75)], **looks()),
            PersonSpec("white", "brown", "towards", start=(520, 215), height=120, speed="normal", **looks()),
        ])
    stop_and_go = SceneSpec(
        name="stop_and_go", width=640, height=360, fps=10, n_frames=100, seed=seed + 1, background="park",
        people=[
            PersonSpec("orange", "blue", "left", start=(560, 320), height=160, speed="slow",
                       stops=[(20, 50)], **looks()),
            PersonSpec("purple", "grey", "right", start=(-30, 300), height=150, speed="fast", **looks()),
            PersonSpec("blue", "black", "away", start=(200, 350), height=175, speed="normal", **looks()),
        ],
        distractors=[DistractorSpec("ball", "red", start=(80, 355), velocity=(30, 0), size=28)])
    busy = SceneSpec(
        name="busy_plaza", width=960, height=540, fps=12, n_frames=150, seed=seed + 2, background="plaza",
        people=[
            PersonSpec("red", "black", "left", start=(1000, 470), height=200, speed="normal", **looks()),
            PersonSpec("blue", "white", "right", start=(-50, 430), height=185, speed="normal", **looks()),
            PersonSpec("green", "blue", "left", start=(820, 400), height=170, speed="slow",
                       stops=[(60, 95)], **looks()),
            PersonSpec("yellow", "grey", "towards", start=(300, 330), height=150, speed="normal",
                       enter_frame=10, **looks()),
            PersonSpec("black", "brown", "right", start=(-60, 505), height=210, speed="fast",
                       enter_frame=40, **looks()),
            PersonSpec("white", "purple", "none", start=(700, 380), height=165, exit_frame=150, **looks()),
        ],
        distractors=[DistractorSpec("crate", "brown", start=(-30, 520), velocity=(45, 0), size=36)])
    market = SceneSpec(
        name="market", width=640, height=360, fps=10, n_frames=80, seed=seed + 3, background="park",
        people=[
            PersonSpec("red", "grey", "left", start=(680, 330), height=160, speed="normal", **looks()),
            PersonSpec("green", "black", "right", start=(-40, 290), height=140, speed="slow", **looks()),
            PersonSpec("white", "blue", "towards", start=(420, 230), height=125, speed="normal", **looks()),
        ])
    corridor = SceneSpec(
        name="corridor", width=640, height=360, fps=10, n_frames=80, seed=seed + 4, background="plaza",
        people=[
            PersonSpec("blue", "blue", "right", start=(-40, 320), height=160, speed="fast", **looks()),
            PersonSpec("yellow", "brown", "left", start=(600, 280), height=140, speed="slow",
                       stops=[(30, 55)], **looks()),
            PersonSpec("purple", "black", "away", start=(250, 355), height=170, speed="normal", **looks()),
        ])
    evening = SceneSpec(
        name="evening", width=640, height=360, fps=10, n_frames=80, seed=seed + 5, background="park",
        people=[
            PersonSpec("orange", "black", "right", start=(-40, 310), height=155, speed="normal", **looks()),
            PersonSpec("grey", "white", "left", start=(690, 335), height=165, speed="normal", **looks()),
            PersonSpec("red", "blue", "none", start=(330, 250), height=130, **looks()),
        ])
    scenes = [crossing, stop_and_go, busy, market, corridor, evening]
    if not 1 <= n <= len(scenes):
        raise ValueError(f"there are {len(scenes)} demo scenes; n={n}")
    return scenes[:n]


# -- evaluation helpers --------------------------------------------------------------------------
def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU between every box of ``a`` [n, 4] and of ``b`` [m, 4] (xyxy) -> [n, m]."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy                                                        # [n, m]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])                     # [n]
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])                     # [m]
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def people_coverage(gt: GroundTruth, tracks: list[tuple[np.ndarray, np.ndarray]], *, iou: float = 0.5,
                    min_visible: float = 0.5, min_fraction: float = 0.5) -> dict:
    """How many people some single track follows for most of the time they are visible.

    ``tracks`` are ``(frames [N], boxes [N, 4])`` pairs. A person counts as covered when one track
    has a box with IoU >= ``iou`` against the person's box on at least ``min_fraction`` of the
    frames where the person's visible fraction is >= ``min_visible``. Frames a track has no
    observation on count as misses (nothing is interpolated). People never that visible are not
    counted. Returns ``{"covered", "counted", "coverage", "per_person": {id: best fraction}}``.
    """
    per_person: dict[int, float] = {}
    index = []
    for frames, boxes in tracks:
        index.append({int(f): np.asarray(b, np.float64) for f, b in zip(np.asarray(frames).reshape(-1), np.asarray(boxes).reshape(-1, 4))})
    for p in gt.people:
        visible_frames = [f for f in range(gt.n_frames) if p.boxes[f] is not None and p.visible[f] >= min_visible]
        if not visible_frames:
            continue
        best = 0.0
        for obs in index:
            hits = 0
            for f in visible_frames:
                box = obs.get(f)
                if box is not None and box_iou(box, np.asarray(p.boxes[f]))[0, 0] >= iou:
                    hits += 1
            best = max(best, hits / len(visible_frames))
        per_person[p.id] = best
    covered = sum(1 for v in per_person.values() if v >= min_fraction)
    counted = len(per_person)
    return {"covered": covered, "counted": counted, "coverage": covered / counted if counted else float("nan"),
            "per_person": per_person}
