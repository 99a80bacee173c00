"""How a scene looks on video, drawn from its seed: the camera (height as a zoom over the scene's
reference view, a slow pan, shake), the light (colour temperature, a brightness gradient across
the frame, a cast shadow over part of the ground, shadows under the people), the sensor (noise,
motion blur, JPEG compression), a pole near the camera in front of everything, a moving band of
the background (foliage, reflections), and each person's clothing colours, build and gait.

Every draw comes from a stream of its own (``default_rng([seed, k])``, k = 7750 for the scene,
7751 the shake, 7752 the moving band, 7760 each person), so the background, the people's paths
and the other draws of a scene stay where they were; the scene's ``variation`` scales every
draw, and 0 gives the still, even, uncompressed camera of a plain static world. The renderer
draws a scene in its reference view and then through the camera: a point ``(x, y)`` of the
reference view lands on ``(s * x + tx, s * y + ty)`` of frame ``f``, with ``(s, tx, ty)`` the
frame's row of :func:`camera_path`. The camera's tilt is the scene's horizon (its ground-plane
perspective: a figure's height follows its foot row's distance below the horizon), which the
demo scenes draw from their seed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from models.world.figures import Build
from models.world.palette import COLOURS, sample_colour
from models.world.scene import SceneSpec

# The ranges each draw spans at variation 1 (a scene's variation scales them).
ZOOM = (1.03, 1.12)                             # a lower camera: the view's scale over the reference view
PAN_SHARE = 0.8                                 # the slow pan spans up to this share of the room the zoom leaves
JITTER_PX = 1.2                                 # camera shake, std-dev in reference pixels (smoothed over frames)
TEMPERATURE = 0.12                              # warm/cool light: blue and red gains move up to this much, opposite
GRADIENT = 0.25                                 # brightness change across the frame, up to this fraction
CAST_SHADOW = (0.55, 0.8)                       # light left in a cast shadow over the ground
CAST_SHADOW_CHANCE = 0.6
DROP_SHADOW = 0.45                              # darkening at the centre of a person's shadow on the ground
NOISE_GAIN = (0.8, 2.2)                         # sensor noise: the scene's noise level times this
SHUTTER = (0.2, 0.6)                            # open shutter, fraction of a frame interval: the blur per pixel of motion
QUALITY = (45, 85)                              # JPEG quality of the sensor's compression
OCCLUDER_CHANCE = 0.6                           # a pole near the camera
OCCLUDER_WIDTH = (0.025, 0.045)                 # its width, fraction of the frame width
SWAY_PX = (4.0, 14.0)                           # shift of the moving band, reference pixels
SWAY_GAIN = 18.0                                # grey levels of the moving band's texture
BUILD_SPREAD = {"width": 0.15, "legs": 0.04, "head": 0.1, "stride": 0.15, "swing": 0.25, "arms": 0.35}
PACE_SPREAD = 0.12                              # a person walks their pace word's pace times 1 +- this


@dataclass(frozen=True)
class Footage:
    """The scene-wide draws (see the module docstring)."""

    zoom: float                                  # view scale over the reference view, >= 1
    pan: tuple[float, float, float, float]       # view offset (x, y) at the first and the last frame, reference px
    jitter: float                                # camera shake std-dev, reference px
    gains: tuple[float, float, float]            # colour temperature: BGR multipliers
    gradient: tuple[float, float]                # brightness change left to right and top to bottom
    cast_shadow: tuple[float, float, float] | None  # (x at the ground's top, x at the bottom, light left): shade right of the line
    noise: float                                 # sensor noise std-dev, grey levels
    shutter: float                               # open shutter, fraction of a frame interval (0: no motion blur)
    quality: int                                 # JPEG quality (0: no compression)
    occluder: tuple[float, float] | None         # pole near the camera: (centre x, width), fractions of the width
    sway: float                                  # shift of the moving band, reference px (0: the background is still)


def footage_of(spec: SceneSpec) -> Footage:
    """The scene-wide draws of ``spec`` (``default_rng([seed, 7750])``), scaled by its variation."""
    v = spec.variation
    rng = np.random.default_rng([spec.seed, 7750])
    u = rng.uniform(0.0, 1.0, 19)                                          # every draw, whatever v is
    zoom = 1.0 + v * (ZOOM[0] - 1.0 + u[0] * (ZOOM[1] - ZOOM[0]))
    room = (1.0 - 1.0 / zoom) / 2 * PAN_SHARE                              # share of the frame left to pan in
    ends = (2 * u[1:5] - 1) * room * np.array([spec.width, spec.height, spec.width, spec.height])
    pan = tuple(float(e) for e in ends * np.array([1.0, 0.3, 1.0, 0.3]))   # mostly sideways
    warm = v * TEMPERATURE * (2 * u[5] - 1)
    shadow = None
    if v > 0 and u[6] < CAST_SHADOW_CHANCE:
        shadow = (float(u[7]), float(u[8]), float(1.0 - v * (1.0 - (CAST_SHADOW[0] + u[9] * (CAST_SHADOW[1] - CAST_SHADOW[0])))))
    occluder = None
    if v > 0 and u[10] < OCCLUDER_CHANCE:
        occluder = (0.12 + 0.76 * float(u[11]), OCCLUDER_WIDTH[0] + float(u[12]) * (OCCLUDER_WIDTH[1] - OCCLUDER_WIDTH[0]))
    return Footage(
        zoom=float(zoom), pan=pan, jitter=v * JITTER_PX, gains=(float(1.0 + warm * 0.8), 1.0, float(1.0 - warm)),
        gradient=(float(v * GRADIENT * (2 * u[13] - 1)), float(v * GRADIENT * (2 * u[14] - 1))),
        cast_shadow=shadow, noise=float(spec.noise) * float(1.0 + v * (NOISE_GAIN[0] - 1.0 + u[15] * (NOISE_GAIN[1] - NOISE_GAIN[0]))),
        shutter=float(v) * float(SHUTTER[0] + u[16] * (SHUTTER[1] - SHUTTER[0])),
        quality=round(QUALITY[0] + u[17] * (QUALITY[1] - QUALITY[0])) if v > 0 else 0,
        occluder=occluder, sway=float(v) * float(SWAY_PX[0] + u[18] * (SWAY_PX[1] - SWAY_PX[0])))


def camera_path(spec: SceneSpec, footage: Footage) -> np.ndarray:
    """[n_frames, 3] float64 rows ``(s, tx, ty)``: where the reference view lands on each frame.

    The view's offset moves linearly from the pan's first end to its last, plus a smoothed shake
    (``default_rng([seed, 7751])``), held inside the room the zoom leaves, so the view never
    leaves the reference view.
    """
    n, s = spec.n_frames, footage.zoom
    rng = np.random.default_rng([spec.seed, 7751])
    shake = rng.normal(0.0, 1.0, (n, 2))                                   # [n, 2]
    for f in range(1, n):                                                  # smooth: a camera sways, it does not flicker
        shake[f] = 0.6 * shake[f - 1] + 0.8 * shake[f]
    t = np.linspace(0.0, 1.0, n)[:, None]                                  # [n, 1]
    x0, y0, x1, y1 = footage.pan
    offset = (1 - t) * np.array([x0, y0]) + t * np.array([x1, y1]) + footage.jitter * shake  # [n, 2]
    room = np.array([spec.width, spec.height]) * (1.0 - 1.0 / s) / 2                         # [2]
    offset = np.clip(offset, -room, room)
    centre = np.array([spec.width, spec.height]) / 2                                         # [2]
    translation = centre - s * (centre + offset)                                             # [n, 2]
    return np.concatenate([np.full((n, 1), s), translation], axis=1)


def light_map(spec: SceneSpec, footage: Footage) -> np.ndarray | None:
    """[H, W, 3] float32 gains of the frame's light (colour temperature, brightness gradient),
    or None when the light is even."""
    W, H = spec.width, spec.height
    if footage.gains == (1.0, 1.0, 1.0) and footage.gradient == (0.0, 0.0):
        return None
    gx = np.linspace(-0.5, 0.5, W, dtype=np.float32) * footage.gradient[0]                  # [W]
    gy = np.linspace(-0.5, 0.5, H, dtype=np.float32) * footage.gradient[1]                  # [H]
    level = 1.0 + gy[:, None] + gx[None, :]                                                  # [H, W]
    return level[..., None] * np.asarray(footage.gains, np.float32)                         # [H, W, 3]


def shadow_map(spec: SceneSpec, footage: Footage, ground: int) -> np.ndarray | None:
    """[H, W, 3] float32 light left by a cast shadow over the ground of the reference view (a soft
    edge from a point on the ground's top row to one on the bottom row), or None."""
    if footage.cast_shadow is None:
        return None
    W, H = spec.width, spec.height
    top, bottom, left = footage.cast_shadow
    mask = np.ones((H, W), np.float32)
    poly = np.array([[top * W, ground], [W * 2, ground], [W * 2, H], [bottom * W, H]], np.int32)
    cv2.fillPoly(mask, [poly], float(left))
    edge = max(3, round(0.02 * W)) | 1
    return np.repeat(cv2.GaussianBlur(mask, (edge, edge), 0)[..., None], 3, axis=2)


def sway_texture(spec: SceneSpec, footage: Footage, rows: int) -> np.ndarray | None:
    """[rows, W + 2 * pad, 3] float32 texture of the moving band (the top ``rows`` rows of the
    reference view, ``default_rng([seed, 7752])``), or None when the background is still."""
    if footage.sway <= 0 or rows <= 0:
        return None
    rng = np.random.default_rng([spec.seed, 7752])
    pad = math.ceil(footage.sway)
    width = spec.width + 2 * pad
    small = rng.uniform(-1.0, 1.0, (max(2, rows // 6), max(2, width // 6))).astype(np.float32)
    texture = cv2.resize(small, (width, rows), interpolation=cv2.INTER_CUBIC)
    return (SWAY_GAIN * texture)[..., None] * np.ones(3, np.float32)


def sway_offset(footage: Footage, f: int, fps: float) -> int:
    """The moving band's shift on frame ``f``, whole reference pixels in ``[0, 2 * pad]``."""
    pad = math.ceil(footage.sway)
    return pad + round(footage.sway * math.sin(2 * math.pi * 0.35 * f / fps))


def occluder_layer(spec: SceneSpec, footage: Footage) -> tuple[np.ndarray, np.ndarray, tuple[int, int]] | None:
    """The pole near the camera as a layer ``(bgr, mask, origin)`` of the reference view: the
    whole height, a rounded metal shade across its width, a band of tape; None without one."""
    if footage.occluder is None:
        return None
    centre, share = footage.occluder
    w = max(3, round(share * spec.width))
    x0 = round(centre * spec.width - w / 2)
    across = np.cos(np.linspace(-1.2, 1.2, w, dtype=np.float32))                           # [w]
    bgr = np.empty((spec.height, w, 3), np.float32)
    bgr[:] = (40.0 + 70.0 * across)[None, :, None] * np.array([1.0, 1.02, 1.05], np.float32)
    band = slice(round(0.55 * spec.height), round(0.6 * spec.height))
    bgr[band] = (30.0 + 150.0 * across)[:, None] * np.array([0.2, 0.75, 1.0], np.float32)  # yellow tape
    return bgr, np.ones((spec.height, w), bool), (x0, 0)


@dataclass(frozen=True)
class Dress:
    """One person's draws: clothing colours as dyed, build and gait, pace."""

    upper: tuple[int, int, int]                  # upper-body BGR, in the range of the spec's colour name
    lower: tuple[int, int, int]                  # lower-body BGR
    build: Build                                 # body proportions and gait
    pace: float                                  # walking pace: the pace word's times this


def dress_of(spec: SceneSpec, i: int) -> Dress:
    """Person ``i``'s draws (``default_rng([seed, 7760, i])``), scaled by the scene's variation."""
    p, v = spec.people[i], spec.variation
    rng = np.random.default_rng([spec.seed, 7760, i])
    upper = sample_colour(p.upper, rng, v) if v > 0 else COLOURS[p.upper]
    lower = sample_colour(p.lower, rng, v) if v > 0 else COLOURS[p.lower]
    u = rng.uniform(-1.0, 1.0, len(BUILD_SPREAD) + 1)
    factors = {k: 1.0 + v * spread * u[j] for j, (k, spread) in enumerate(BUILD_SPREAD.items())}
    return Dress(upper, lower, Build(**factors), 1.0 + v * PACE_SPREAD * float(u[-1]))


def drop_shadow(frame: np.ndarray, x: float, y: float, height: float) -> None:
    """In place: a soft shadow on the ground under a foot point ``(x, y)`` of a figure ``height`` tall."""
    H, W = frame.shape[:2]
    rx, ry = 0.22 * height, 0.045 * height
    xa, xb = max(0, int(x - 1.5 * rx)), min(W, int(x + 1.5 * rx) + 1)
    ya, yb = max(0, int(y - 2 * ry)), min(H, int(y + 2 * ry) + 1)
    if xb <= xa or yb <= ya:
        return
    yy, xx = np.mgrid[ya:yb, xa:xb].astype(np.float32)
    fall = np.exp(-(((xx - x) / rx) ** 2 + ((yy - y) / ry) ** 2))                          # [h', w']
    frame[ya:yb, xa:xb] *= (1.0 - DROP_SHADOW * fall)[..., None]


def blur_figure(bgr: np.ndarray, mask: np.ndarray, length: float) -> np.ndarray:
    """A figure's colours smeared sideways over ``length`` pixels (its motion while the shutter is
    open), inside its own silhouette; the silhouette is what was drawn and stays as it is."""
    k = round(length)
    if k < 2:
        return bgr
    weight = mask.astype(np.float32)
    kernel = (k, 1)
    smeared = cv2.blur(bgr.astype(np.float32) * weight[..., None], kernel)                 # [h, w, 3]
    cover = cv2.blur(weight, kernel)[..., None]                                             # [h, w, 1]
    out = np.where(mask[..., None], smeared / np.maximum(cover, 1e-3), bgr)
    return out.astype(bgr.dtype)


def through_camera(frame: np.ndarray, row: np.ndarray, previous: np.ndarray | None, shutter: float) -> np.ndarray:
    """The reference-view image ``frame`` as the camera sees it on a frame with camera ``row``,
    smeared along the camera's motion since the ``previous`` row while the shutter is open."""
    s, tx, ty = (float(v) for v in row)
    H, W = frame.shape[:2]
    if (s, tx, ty) != (1.0, 0.0, 0.0):
        frame = cv2.warpAffine(frame, np.array([[s, 0, tx], [0, s, ty]], np.float32), (W, H),
                               flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    if previous is None or shutter <= 0:
        return frame
    dx, dy = (float(v) for v in (row[1:] - previous[1:]) * shutter)
    length = math.hypot(dx, dy)
    if length < 1.0:
        return frame
    k = 2 * math.ceil(length / 2) + 1
    kernel = np.zeros((k, k), np.float32)
    c = k // 2
    cv2.line(kernel, (round(c - dx / 2), round(c - dy / 2)), (round(c + dx / 2), round(c + dy / 2)), 1.0, 1)
    return cv2.filter2D(frame, -1, kernel / kernel.sum())


def compress(frame: np.ndarray, quality: int) -> np.ndarray:
    """A uint8 frame after the sensor's JPEG compression at ``quality`` (0: none)."""
    if quality <= 0:
        return frame
    ok, data = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise OSError("OpenCV could not encode a frame as JPEG")
    return cv2.imdecode(data, cv2.IMREAD_COLOR)
