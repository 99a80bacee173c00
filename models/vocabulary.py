"""The colour, pace, garment and scene vocabulary shared by the describers, the query phrasing,
ActPair's query reading and the demo renderer (its scene objects, conditions and scene facts).

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

# How texts name garments (queries, rewrites): a colour before one of these is that part's colour.
UPPER_GARMENTS = ("top", "shirt", "t-shirt", "tshirt", "jacket", "coat", "sweater", "jumper", "hoodie", "blouse",
                  "vest", "cardigan", "sweatshirt", "parka", "blazer")
LOWER_GARMENTS = ("trousers", "pants", "jeans", "skirt", "shorts", "leggings", "slacks", "chinos")
# Colour names as texts spell them (the palette's names and their common variants).
COLOUR_ALIASES = {**{name: name for name in NAMED_PALETTE}, "gray": "grey"}
# Scene words a query may use for the background (the renderer's backgrounds and their parts,
# and common places, then the scene context the renderer draws): the scene slot of ActPair's rewrite.
SCENE_WORDS = ("plaza", "park", "square", "street", "road", "pavement", "sidewalk", "corridor", "hallway", "station",
               "platform", "market", "lawn", "path", "hedge", "wall", "paving", "courtyard", "car park",
               "grass", "bench", "door", "tree", "lamp post", "rain", "night")

# -- scene context -------------------------------------------------------------------------------
# Things a rendered scene may hold (``models.demo.scene.SceneObjectSpec.kind``). A person can be
# "near" the first four; a lawn is a patch of grass on the ground, so it only changes the ground.
SCENE_OBJECTS = ("bench", "door", "tree", "lamp_post", "lawn")
NEAR_OBJECTS = ("bench", "door", "tree", "lamp_post")
# Whole-scene conditions a scene may have (``SceneSpec.conditions``).
SCENE_CONDITIONS = ("rain", "night")
# Values of the scene facts: what is under a person's feet, the weather and the light.
GROUNDS = ("grass", "pavement")
WEATHERS = ("clear", "rain")
LIGHTS = ("day", "night")
# The value of a "near" fact on frames where a person is near no named object: it covers those
# frames, so "near the bench" is contradicted by a person who is observed and never near it.
NEAR_NOTHING = "nothing"
# How a query phrases the scene facts.
GROUND_PHRASES = {"grass": "on the grass", "pavement": "on the pavement"}
WEATHER_PHRASES = {"rain": "in the rain", "clear": "in dry weather"}
LIGHT_PHRASES = {"night": "at night", "day": "in daylight"}


def object_name(kind: str, colour: str | None = None) -> str:
    """The value a "near" fact gives an object: its words, a door with its colour ("red door",
    "bench", "lamp post")."""
    words = kind.replace("_", " ")
    return f"{colour} {words}" if colour else words


def near_phrase(name: str) -> str:
    """How a query says a "near" value: "near the red door"."""
    return f"near the {name}"
