"""The colour and pace vocabulary shared by the describers, the query phrasing and the demo renderer.

Colour names map to the BGR value the renderer draws; a describer names what it sees with the
same words (:data:`NAMED_PALETTE` adds two common names the renderer never draws). Paces are
measured in figure heights per second on the ground, so one rule (:func:`speed_word`) turns an
image-plane speed into a word for both the renderer's ground truth and the heuristic describer.
"""
from __future__ import annotations

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
# Named clothing colours (BGR) a describer may answer: the renderer's colours plus two common
# names it does not draw.
NAMED_PALETTE: dict[str, tuple[int, int, int]] = {
    **COLOURS,
    "pink": (180, 130, 240),
    "beige": (160, 200, 225),
}

DIRECTIONS = ("left", "right", "towards", "away", "none")
# How a query or a rewrite phrases a walking direction.
DIRECTION_PHRASES = {"left": "to the left", "right": "to the right", "towards": "towards the camera",
                     "away": "away from the camera"}
# Walking pace, in figure heights per second on the ground (a person ~1.7 m tall walks ~1.3 m/s).
SPEED_HEIGHTS_PER_S: dict[str, float] = {"slow": 0.35, "normal": 0.7, "fast": 1.25}
# Motion towards/away from a camera looks slower in the image than the same pace across it.
DEPTH_FORESHORTENING = 0.3


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
