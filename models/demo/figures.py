"""Drawing for the demo renderer: textured static backgrounds ("plaza", "park") with shading
and sensor noise, and people-like figures with a walking stride, seen from the side or the front.
"""
from __future__ import annotations

import math

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
