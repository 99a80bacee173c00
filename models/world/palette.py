"""The renderer's numeric tables: the BGR value of each clothing colour it paints, the ground
pace of each speed word and how much slower depth motion looks in its image.

These are the synthetic world's own: the describers and scorers in ``models.backends`` never
read them (they name colours with ``models.colour_naming`` and paces with ``models.pace_norms``);
only the renderer, its scenes and the harnesses that score a model against the world's truth do.
The words (``models.vocabulary``) are shared; the numbers are not.
"""
from __future__ import annotations

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
