"""The renderer's numeric tables: the BGR value of each clothing colour it paints, the ground
pace of each speed word and how much slower depth motion looks in its image.

These are the synthetic world's own: the describers and scorers in ``models.backends`` never
read them (they name colours with ``models.colour_naming`` and paces with ``models.pace_norms``);
only the renderer, its scenes and the harnesses that score a model against the world's truth do.
The words (``models.vocabulary``) are shared; the numbers are not.
"""
from __future__ import annotations

import cv2
import numpy as np

# Clothing colours, BGR; the keys are the colour words of ``models.vocabulary.CLOTHING_COLOURS``.
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
# Walking pace, in figure heights per second on the ground (the renderer's paces).
SPEED_HEIGHTS_PER_S: dict[str, float] = {"slow": 0.35, "normal": 0.7, "fast": 1.25}
# Motion towards/away from the camera moves a figure this fraction of its ground step in the image.
DEPTH_FORESHORTENING = 0.3

# Clothing is dyed around its named colour, not in it: a sample moves up to this far from the
# named colour in CIELAB (lightness, and each of a* and b*), and stays in the named colour's range:
# nearer to its own colour than to any other colour of the palette (:func:`colour_range_holds`).
COLOUR_SPREAD_LAB = (14.0, 12.0)


def _lab(bgr) -> np.ndarray:
    """CIELAB (L in 0..100) of BGR triples, [..., 3] in and out."""
    pixels = np.asarray(bgr, np.float32).reshape(-1, 1, 3) / 255.0
    return cv2.cvtColor(pixels, cv2.COLOR_BGR2Lab).reshape(np.shape(bgr))


def colour_range_holds(name: str, bgr) -> bool:
    """Whether ``bgr`` lies in the range of the colour ``name``: its nearest palette colour in
    CIELAB is ``name``'s."""
    names = list(COLOURS)
    distances = np.linalg.norm(_lab([COLOURS[n] for n in names]) - _lab(bgr), axis=1)   # [n_colours]
    return names[int(np.argmin(distances))] == name


def sample_colour(name: str, rng: np.random.Generator, spread: float = 1.0) -> tuple[int, int, int]:
    """A BGR clothing colour drawn around the named colour: uniform offsets of up to ``spread``
    times :data:`COLOUR_SPREAD_LAB` in CIELAB, halved until the sample is in the name's range
    (:func:`colour_range_holds`). ``spread`` 0 gives the named colour itself; draws four numbers
    from ``rng`` whatever ``spread`` is."""
    lightness, chroma = COLOUR_SPREAD_LAB
    offset = rng.uniform(-1.0, 1.0, 3) * np.array([lightness, chroma, chroma])                 # [3] L, a*, b*
    scale = float(rng.uniform(0.5, 1.0)) * spread
    centre = _lab(COLOURS[name])
    for _ in range(6):
        lab = (centre + scale * offset).astype(np.float32).reshape(1, 1, 3)
        bgr = np.clip(cv2.cvtColor(lab, cv2.COLOR_Lab2BGR).reshape(3) * 255.0, 0, 255).round().astype(int)
        if scale == 0.0 or colour_range_holds(name, bgr):
            return tuple(int(v) for v in bgr) if scale else COLOURS[name]
        scale /= 2
    return COLOURS[name]
