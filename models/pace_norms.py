"""Physical norms the describers turn image motion into pace words with: how fast people walk,
how tall they are, and how wide a camera sees. Nothing here comes from a scene's drawing.

Paces are said in body heights per second on the ground: a box height in pixels is one body
height at the person's depth, so an image speed across the camera divided by the box height is
a ground speed in heights per second, whatever the distance. Depth motion comes from the change
of the box height (pinhole camera over a ground plane: the distance in heights is
``focal_px / box_height``, so its rate is ``focal_px * dh/dt / h**2``), with the focal length
from a typical field of view, since no camera is calibrated.
"""
from __future__ import annotations

import math

# Adult stature, metres: mean adult heights lie between ~1.6 m and ~1.8 m across countries
# (NCD Risk Factor Collaboration, "A century of trends in adult human height", eLife 2016);
# 1.7 m is taken for both sexes together.
ADULT_HEIGHT_M = 1.7
# Comfortable walking speed of adults, metres per second: 1.27-1.46 m/s (Bohannon, "Comfortable and
# maximum walking speed of adults aged 20-79 years", Age and Ageing 1997); pedestrians crossing
# streets walk ~1.2-1.5 m/s (Knoblauch, Pietrucha and Nitzburg, Transportation Research Record 1996).
WALKING_SPEED_M_S = (1.2, 1.5)
# Below ~1.0 m/s walking is slow: the threshold clinicians use for limited community walking
# (Fritz and Lusardi, "Walking speed: the sixth vital sign", J Geriatr Phys Ther 2009).
SLOW_BELOW_M_S = 1.0
# From ~1.8 m/s a walk is brisk, near adults' maximum walking speed (~1.9-2.5 m/s, Bohannon 1997)
# and the walk-to-run transition (~2.0 m/s, Thorstensson and Roberthson, Acta Physiol Scand 1987).
FAST_FROM_M_S = 1.8
# Running: faster than ~2.5 m/s (above every adult's maximum walking speed in Bohannon 1997).
RUNNING_FROM_M_S = 2.5
# Standing: the ground point drifts less than this (m/s); box jitter of a still person stays below it.
STANDING_BELOW_M_S = 0.25
# Horizontal field of view of a typical surveillance or handheld camera, degrees (wide-angle
# lenses of 2.8-4 mm on 1/3" sensors see ~60-90 degrees; the narrower end is taken).
TYPICAL_HFOV_DEG = 60.0


def heights_per_s(metres_per_s: float) -> float:
    """A ground speed in body heights per second."""
    return metres_per_s / ADULT_HEIGHT_M


def focal_px(image_width: float, hfov_deg: float = TYPICAL_HFOV_DEG) -> float:
    """The focal length in pixels of a camera of this field of view."""
    return image_width / (2.0 * math.tan(math.radians(hfov_deg) / 2.0))


# A typical speed of each pace word, metres per second: slow ~0.8 m/s (well under the 1.0 m/s
# threshold above), normal 1.35 m/s (the middle of Bohannon's comfortable 1.27-1.46 m/s), fast
# 2.0 m/s (brisk walking at the walk-to-run transition).
TYPICAL_PACE_M_S: dict[str, float] = {"slow": 0.8, "normal": 1.35, "fast": 2.0}
