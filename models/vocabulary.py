"""The colour, pace, garment and scene vocabulary shared by the describers, the query phrasing,
ActPair's query reading and the demo renderer (its scene objects, conditions and scene facts).

Words only: the renderer's numbers (the BGR of each colour, the pace of each speed word) live
in ``models.world.palette``, and the describers measure colours and paces with their own models
(``models.colour_naming``, ``models.pace_norms``), so they share the words and nothing else.
"""
from __future__ import annotations

# Clothing colour words the renderer draws (its BGR values are ``models.world.palette.COLOURS``).
CLOTHING_COLOURS = ("red", "blue", "green", "yellow", "white", "black", "orange", "purple", "grey", "brown")
# Colour words a describer may answer or a text may use: the basic colour terms
# (``models.colour_naming.TERMS``) and beige, a common clothing word.
COLOUR_WORDS = ("black", "white", "grey", "red", "orange", "yellow", "green", "blue", "purple", "pink", "brown",
                "beige")

DIRECTIONS = ("left", "right", "towards", "away", "none")
# How a query or a rewrite phrases a walking direction.
DIRECTION_PHRASES = {"left": "to the left", "right": "to the right", "towards": "towards the camera",
                     "away": "away from the camera"}
# Pace words, slowest first (how fast each is: ``models.pace_norms`` for the describers,
# ``models.world.palette`` for the renderer).
SPEED_WORDS = ("slow", "normal", "fast")

# How texts name garments (queries, rewrites): a colour before one of these is that part's colour.
UPPER_GARMENTS = ("top", "shirt", "t-shirt", "tshirt", "jacket", "coat", "sweater", "jumper", "hoodie", "blouse",
                  "vest", "cardigan", "sweatshirt", "parka", "blazer")
LOWER_GARMENTS = ("trousers", "pants", "jeans", "skirt", "shorts", "leggings", "slacks", "chinos")
# Colour names as texts spell them (the palette's names and their common variants).
COLOUR_ALIASES = {**{name: name for name in COLOUR_WORDS}, "gray": "grey"}
# Scene words a query may use for the background (the renderer's backgrounds and their parts,
# and common places, then the scene context the renderer draws): the scene slot of ActPair's rewrite.
SCENE_WORDS = ("plaza", "park", "square", "street", "road", "pavement", "sidewalk", "corridor", "hallway", "station",
               "platform", "market", "lawn", "path", "hedge", "wall", "paving", "courtyard", "car park",
               "grass", "bench", "door", "tree", "lamp post", "rain", "night")

# -- scene context -------------------------------------------------------------------------------
# Things a rendered scene may hold (``models.world.scene.SceneObjectSpec.kind``). A person can be
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
