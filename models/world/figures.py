"""Drawing for the world's renderer: textured static backgrounds ("plaza", "park") with shading
and sensor noise, the ground surface under them, the scene objects queries name (benches, doors,
trees, lamp posts, lawns), night and rain, and people-like figures with a walking stride, seen
from the side or the front.

Every scene object is drawn inside the box its :class:`~models.world.scene.SceneObjectTruth`
declares, so the recorded box is the object's extent by construction.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

SHOE_BGR = (25, 25, 30)
# Stride: one full walking cycle (two steps) covers this many figure heights.
STRIDE_HEIGHTS = 0.85
# -- backgrounds ---------------------------------------------------------------------------------
def _smooth_noise(rng: np.random.Generator, h: int, w: int, cells: int) -> np.ndarray:
    """Low-frequency noise in [-1, 1], HxW."""
    small = rng.uniform(-1, 1, size=(max(2, h * cells // max(w, 1)), cells)).astype(np.float32)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_CUBIC)


# Where the ground begins, as a fraction of the frame height: the foot of the plaza's wall and of
# the park's hedge. Doors stand on this row.
GROUND_LINES = {"plaza": 0.42, "park": 0.35}
# The park's paved path across the lower half: first and last row, fractions of the frame height.
PARK_PATH = (0.55, 0.97)
# Ground surface codes of :func:`ground_map`.
NO_GROUND, GRASS, PAVEMENT = 0, 1, 2
SURFACE_NAMES = {GRASS: "grass", PAVEMENT: "pavement"}
GRASS_BGR = (80, 140, 105)                      # the park's lawn; lawn patches on the plaza too


def ground_row(background: str, h: int) -> int:
    """The first ground row of a background (the foot of the wall or hedge)."""
    return int(h * GROUND_LINES[background])


def ground_map(background: str, w: int, h: int) -> np.ndarray:
    """[h, w] uint8 surface codes of the bare background: ``PAVEMENT`` (the plaza's paving, the
    park's path), ``GRASS`` (the park's lawn), ``NO_GROUND`` (the wall, the hedge). Lawn patches
    are painted over it by the renderer (:func:`paint_lawn`)."""
    out = np.zeros((h, w), np.uint8)
    out[ground_row(background, h):] = PAVEMENT if background == "plaza" else GRASS
    if background == "park":
        out[int(h * PARK_PATH[0]):int(h * PARK_PATH[1]) + 1] = PAVEMENT
    return out


def _background_plaza(rng: np.random.Generator, w: int, h: int, *, benches: bool = True) -> np.ndarray:
    """Wall with windows over tiled paving (``benches`` is for the park's signature: the plaza
    draws no unnamed benches)."""
    img = np.zeros((h, w, 3), np.float32)
    ground_y = ground_row("plaza", h)
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


def _background_park(rng: np.random.Generator, w: int, h: int, *, benches: bool = True) -> np.ndarray:
    """Hedge over a lawn with a paved path across it; with ``benches``, three unnamed benches
    below the hedge (a scene with a named bench draws none, so "the bench" is one thing)."""
    img = np.zeros((h, w, 3), np.float32)
    hedge_y = ground_row("park", h)
    img[:hedge_y] = np.array([70, 115, 80], np.float32) + rng.uniform(-10, 10, 3)
    img[hedge_y:] = np.array(GRASS_BGR, np.float32) + rng.uniform(-10, 10, 3)
    # a paved path across the lower half
    path = np.array([140, 160, 175], np.float32) + rng.uniform(-10, 10, 3)
    cv2.rectangle(img, (0, int(h * PARK_PATH[0])), (w, int(h * PARK_PATH[1])), path.tolist(), -1)
    img[:hedge_y] += 30 * _smooth_noise(rng, hedge_y, w, 40)[..., None]
    img += 14 * _smooth_noise(rng, h, w, 10)[..., None]
    img += 8 * _smooth_noise(rng, h, w, 90)[..., None]
    if not benches:
        return img
    # a few benches and bins
    for _ in range(3):
        bx = int(rng.integers(0, w - w // 8))
        by = int(rng.uniform(0.4, 0.5) * h)
        cv2.rectangle(img, (bx, by), (bx + w // 9, by + h // 40), (40, 60, 90), -1)
    return img


BACKGROUNDS = {"plaza": _background_plaza, "park": _background_park}


# -- scene objects -------------------------------------------------------------------------------
WOOD_BGR = (45, 80, 125)
METAL_BGR = (55, 55, 60)
BARK_BGR = (40, 60, 85)
LEAVES_BGR = (45, 110, 55)
LAMP_GLASS_DAY = (200, 215, 220)
LAMP_GLASS_NIGHT = (170, 235, 255)              # a lit lamp: not darkened at night
# Layered objects stand on the ground and are drawn in depth order with the people; flat ones
# (doors on the wall, lawns on the ground) are painted into the background once.
LAYERED = ("bench", "tree", "lamp_post")


def _canvas_of(box) -> tuple[int, int, int, int]:
    """Integer origin and size ``(x0, y0, w, h)`` of a local canvas holding a frame-pixel box."""
    x0, y0 = math.floor(box[0]), math.floor(box[1])
    return x0, y0, max(1, math.ceil(box[2]) - x0), max(1, math.ceil(box[3]) - y0)


def _jitter(rng: np.random.Generator, bgr, amount: float = 8.0) -> tuple[float, float, float]:
    return tuple(float(np.clip(c + rng.uniform(-amount, amount), 0, 255)) for c in bgr)


def draw_object(kind: str, box, rng: np.random.Generator, *, colour=None, night: bool = False
                ) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Draw a bench, tree or lamp post on its own canvas covering ``box`` (xyxy, frame pixels).

    Returns ``(bgr, mask, (x0, y0))``: float32 colours [h, w, 3], the boolean silhouette [h, w]
    and the frame pixel of the canvas origin. ``night`` gives the night palette
    (:func:`darken_for_night`) to everything but a lamp post's glass, which is lit.
    """
    x0, y0, cw, ch = _canvas_of(box)
    bgr = np.zeros((ch, cw, 3), np.float32)
    mask = np.zeros((ch, cw), np.uint8)
    ox, oy = box[0] - x0, box[1] - y0                   # sub-pixel offset of the box in the canvas
    bw, bh = box[2] - box[0], box[3] - box[1]

    def rect(fx0, fy0, fx1, fy1, col) -> None:
        """A filled rectangle given in fractions of the box."""
        p0 = _pt(ox + fx0 * bw, oy + fy0 * bh)
        p1 = _pt(ox + fx1 * bw, oy + fy1 * bh)
        cv2.rectangle(bgr, p0, p1, col, -1, cv2.LINE_8, SHIFT)
        cv2.rectangle(mask, p0, p1, 255, -1, cv2.LINE_8, SHIFT)

    if kind == "bench":
        wood, metal = _jitter(rng, WOOD_BGR), _jitter(rng, METAL_BGR, 4)
        for fx in (0.08, 0.87):                                            # legs and back supports
            rect(fx, 0.0, fx + 0.05, 1.0, metal)
        rect(0.02, 0.02, 0.98, 0.17, wood)                                 # two backrest slats
        rect(0.02, 0.21, 0.98, 0.36, wood)
        rect(0.0, 0.46, 1.0, 0.6, wood)                                    # the seat
        rect(0.0, 0.58, 1.0, 0.62, _shade(wood, 0.7))                      # its front edge
    elif kind == "tree":
        bark, leaves = _jitter(rng, BARK_BGR, 5), _jitter(rng, LEAVES_BGR, 10)
        rect(0.43, 0.42, 0.57, 1.0, bark)
        centre, axes = _pt(ox + 0.5 * bw, oy + 0.3 * bh), (round(0.49 * bw * _ONE), round(0.29 * bh * _ONE))
        cv2.ellipse(bgr, centre, axes, 0, 0, 360, leaves, -1, cv2.LINE_8, SHIFT)
        cv2.ellipse(mask, centre, axes, 0, 0, 360, 255, -1, cv2.LINE_8, SHIFT)
        for _ in range(5):                                                 # darker clumps inside the crown
            cx, cy = rng.uniform(0.3, 0.7) * bw, rng.uniform(0.15, 0.42) * bh
            r = rng.uniform(0.08, 0.14) * bw
            cv2.circle(bgr, _pt(ox + cx, oy + cy), round(r * _ONE), _shade(leaves, 0.75), -1, cv2.LINE_8, SHIFT)
    elif kind == "lamp_post":
        metal = _jitter(rng, METAL_BGR, 4)
        rect(0.4, 0.08, 0.6, 1.0, metal)                                   # the pole
        rect(0.2, 0.93, 0.8, 1.0, metal)                                   # its foot
        rect(0.0, 0.0, 1.0, 0.03, metal)                                   # the lamp's cap
    else:
        raise ValueError(f"draw_object draws {LAYERED}, not {kind!r}")
    if night:
        darken_for_night(bgr)
    if kind == "lamp_post":
        rect(0.1, 0.03, 0.9, 0.09, LAMP_GLASS_NIGHT if night else LAMP_GLASS_DAY)
    return bgr, mask > 0, (x0, y0)


def paint_door(img: np.ndarray, box, colour, rng: np.random.Generator) -> None:
    """Paint a door (frame, two panels, a handle, a step) into ``img`` over ``box``."""
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    frame_bgr = _jitter(rng, (60, 60, 65), 4)
    cv2.rectangle(img, _pt(x1, y1), _pt(x2, y2), frame_bgr, -1, cv2.LINE_8, SHIFT)
    cv2.rectangle(img, _pt(x1 + 0.08 * w, y1 + 0.05 * h), _pt(x2 - 0.08 * w, y2 - 0.03 * h), colour, -1,
                  cv2.LINE_8, SHIFT)
    panel = _shade(colour, 0.8)
    for fy0, fy1 in ((0.12, 0.45), (0.55, 0.9)):
        cv2.rectangle(img, _pt(x1 + 0.22 * w, y1 + fy0 * h), _pt(x2 - 0.22 * w, y1 + fy1 * h), panel, -1,
                      cv2.LINE_8, SHIFT)
    cv2.circle(img, _pt(x1 + 0.8 * w, y1 + 0.52 * h), round(max(1.0, 0.05 * w) * _ONE), (60, 180, 200), -1,
               cv2.LINE_8, SHIFT)


def lawn_region(box, w: int, h: int) -> tuple[slice, slice] | None:
    """Rows and columns of the frame a lawn's box covers (None when it is off the frame)."""
    xa, ya = max(0, round(box[0])), max(0, round(box[1]))
    xb, yb = min(w, round(box[2])), min(h, round(box[3]))
    return (slice(ya, yb), slice(xa, xb)) if xb > xa and yb > ya else None


def paint_lawn(img: np.ndarray, box, rng: np.random.Generator) -> None:
    """Paint a patch of grass with a kerb into ``img`` over ``box`` (:func:`lawn_region`)."""
    h, w = img.shape[:2]
    region = lawn_region(box, w, h)
    if region is None:
        return
    rows, cols = region
    grass = np.array(_jitter(rng, GRASS_BGR), np.float32)
    n_rows, n_cols = rows.stop - rows.start, cols.stop - cols.start
    img[rows, cols] = grass + 16 * _smooth_noise(rng, n_rows, n_cols, max(4, n_cols // 6))[..., None]
    cv2.rectangle(img, (cols.start, rows.start), (cols.stop - 1, rows.stop - 1), (105, 115, 120), 2)  # the kerb


# -- night and rain ------------------------------------------------------------------------------
NIGHT_GAIN = 0.4                                # the background and objects at night
NIGHT_TINT = (14.0, 4.0, 0.0)                   # added after the gain: a bluish dark (BGR)
FIGURE_NIGHT_GAIN = 0.85                        # people are lit by the lamps: darkened less
RAIN_STREAKS_PER_MPX = 900                      # streaks per frame per million pixels
RAIN_LENGTH = 0.05                              # streak length, fraction of the frame height
RAIN_SLANT = 0.3                                # horizontal drift per unit of streak length
RAIN_GAIN = 55.0                                # grey levels a streak adds to what is under it


def darken_for_night(img: np.ndarray) -> None:
    """In place: the night palette of a float32 BGR image."""
    img *= NIGHT_GAIN
    img += np.asarray(NIGHT_TINT, np.float32)


def add_glow(img: np.ndarray, x: float, y: float, radius: float, strength: float = 110.0) -> None:
    """In place: warm lamp light around (x, y), falling off as a Gaussian of ``radius`` px."""
    h, w = img.shape[:2]
    xa, xb = max(0, int(x - 2.5 * radius)), min(w, int(x + 2.5 * radius) + 1)
    ya, yb = max(0, int(y - 2.5 * radius)), min(h, int(y + 2.5 * radius) + 1)
    if xb <= xa or yb <= ya:
        return
    yy, xx = np.mgrid[ya:yb, xa:xb].astype(np.float32)
    fall = np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * radius * radius))          # [h', w']
    img[ya:yb, xa:xb] += strength * fall[..., None] * np.array([0.55, 0.85, 1.0], np.float32)


def rain_streaks(rng: np.random.Generator, w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of this frame's rain streak pixels: thin slanted lines at random places."""
    n = max(1, round(RAIN_STREAKS_PER_MPX * w * h / 1e6))
    length = max(3.0, RAIN_LENGTH * h)
    x0 = rng.uniform(-RAIN_SLANT * length, w, n)
    y0 = rng.uniform(-length, h, n)
    segments = np.stack([np.stack([x0, y0], 1), np.stack([x0 + RAIN_SLANT * length, y0 + length], 1)], 1)
    canvas = np.zeros((h, w), np.uint8)
    cv2.polylines(canvas, list(np.round(segments).astype(np.int32)), False, 255, 1, cv2.LINE_8)
    return np.nonzero(canvas)


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


@dataclass(frozen=True)
class Build:
    """A figure's proportions and gait, as factors of the typical figure's (all 1: typical)."""

    width: float = 1.0                           # girth: every width across the body
    legs: float = 1.0                            # leg length (the torso takes up the rest of the height)
    head: float = 1.0                            # head size
    stride: float = 1.0                          # ground covered by one walking cycle
    swing: float = 1.0                           # leg swing angle
    arms: float = 1.0                            # arm swing angle


def draw_figure(height: float, phase: float, amplitude: float, view: str, upper, lower, skin, hair,
                sub: tuple[float, float] = (0.0, 0.0), build: Build = Build()
                ) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    """Draw one person-like figure on its own canvas.

    ``phase`` is the walking-cycle angle (radians), ``amplitude`` in [0, 1] scales the swing
    (0 = standing), ``view`` is "side-left", "side-right", "front" or "back". ``sub`` is the
    sub-pixel offset of the foot point; ``build`` its proportions and gait. Returns ``(bgr, mask, (fx, fy))``: the figure's colours,
    its silhouette (uint8 0/255) and the integer pixel of the canvas that is the foot point.
    """
    H = float(height)
    G = H * build.width                          # unit of the widths across the body
    pad = 3
    cw = math.ceil(H * 0.8) + 2 * pad
    ch = math.ceil(H * 1.02) + 2 * pad
    canvas = np.zeros((ch, cw, 3), np.uint8)
    mask = np.zeros((ch, cw), np.uint8)
    fx_i, fy_i = cw // 2, pad + math.ceil(H)
    cx, ground = fx_i + sub[0], fy_i + sub[1]
    side = view.startswith("side")
    facing = 1.0 if view == "side-right" else -1.0
    swing = amplitude * math.sin(phase)

    leg_len = 0.47 * H * build.legs
    hip_y_rest = ground - leg_len
    if side:
        # the body bobs: the lower foot stays on the ground
        theta = math.radians(26.0) * build.swing * swing
        stance = math.radians(6.0)  # a standing person's feet are a little apart
        if abs(theta) < stance:
            theta = math.copysign(stance, theta) if theta else stance
        bob = leg_len * (1 - math.cos(theta))
        hip_y = hip_y_rest + bob
        legs = [(cx, hip_y, cx + leg_len * math.sin(s * theta), hip_y + leg_len * math.cos(theta)) for s in (1, -1)]
    else:
        lift = 0.035 * H * amplitude
        hip_y = hip_y_rest
        legs = [(cx + s * 0.05 * G, hip_y, cx + s * 0.06 * G, ground - lift * max(0.0, s * math.sin(phase)))
                for s in (1, -1)]
    top = hip_y - (H - leg_len)
    shoulder_y = top + 0.17 * H
    head_r = 0.062 * H * build.head
    head_c = (cx + (0.01 * H * facing if side else 0.0), top + 0.07 * H)

    # back limbs first (darker), then torso, then front limbs
    back, front = (legs[1], legs[0]) if side else (legs[0], legs[1])
    lower_back = _shade(lower, 0.72 if side else 0.9)
    upper_back = _shade(upper, 0.72)
    arm_len = 0.36 * H
    if side:
        alpha = math.radians(22.0) * build.arms * swing
        arms = [(cx, shoulder_y + 0.02 * H, cx - arm_len * math.sin(s * alpha), shoulder_y + 0.02 * H + arm_len * math.cos(alpha))
                for s in (1, -1)]
        arm_back, arm_front = arms[0], arms[1]
    else:
        sw = 0.12 * G
        arm_back = (cx - sw, shoulder_y + 0.02 * H, cx - sw - 0.035 * H, shoulder_y + arm_len * (0.97 + 0.03 * swing))
        arm_front = (cx + sw, shoulder_y + 0.02 * H, cx + sw + 0.035 * H, shoulder_y + arm_len * (0.97 - 0.03 * swing))

    def leg(segment, col):
        x0, y0, x1, y1 = segment
        _limb(canvas, mask, (x0, y0), (x1, y1 - 0.02 * H), 0.095 * G, 0.06 * G, col)
        shoe_dx = 0.035 * H * facing if side else 0.0
        _limb(canvas, mask, (x1 - 0.01 * H * facing if side else x1, y1 - 0.025 * H), (x1 + shoe_dx, y1 - 0.02 * H),
              0.045 * H, 0.045 * H, SHOE_BGR)

    def arm(a, col):
        x0, y0, x1, y1 = a
        _limb(canvas, mask, (x0, y0), (x1, y1), 0.065 * G, 0.05 * G, col)
        cv2.circle(canvas, _pt(x1, y1 + 0.01 * H), int(0.028 * H * _ONE), skin, -1, cv2.LINE_8, SHIFT)
        cv2.circle(mask, _pt(x1, y1 + 0.01 * H), int(0.028 * H * _ONE), 255, -1, cv2.LINE_8, SHIFT)

    if side:
        arm(arm_back, upper_back)
    leg(back, lower_back)
    leg(front, lower)
    # hips / pelvis in lower colour
    hw = (0.075 if side else 0.1) * G
    _limb(canvas, mask, (cx - hw + 0.03 * G, hip_y + 0.01 * H), (cx + hw - 0.03 * G, hip_y + 0.01 * H), 0.09 * G, 0.09 * G, lower)
    # torso
    sw = (0.1 if side else 0.125) * G
    tw = (0.085 if side else 0.1) * G
    poly = np.array([_pt(cx - sw, shoulder_y), _pt(cx + sw, shoulder_y), _pt(cx + tw, hip_y + 0.02 * H),
                     _pt(cx - tw, hip_y + 0.02 * H)], np.int32)
    cv2.fillPoly(canvas, [poly], upper, cv2.LINE_8, SHIFT)
    cv2.fillPoly(mask, [poly], 255, cv2.LINE_8, SHIFT)
    for s in (-1, 1):  # rounded shoulders
        for target, col in ((canvas, upper), (mask, 255)):
            cv2.circle(target, _pt(cx + s * (sw - 0.03 * G), shoulder_y + 0.03 * H), int(0.035 * G * _ONE), col, -1, cv2.LINE_8, SHIFT)
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
