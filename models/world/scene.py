"""What the demo renderer draws, as plain data: a scene (:class:`SceneSpec` with its people,
distractors, scene objects and conditions), the ground truth it yields (:class:`GroundTruth`,
per-person :class:`PersonTruth` and :class:`Fact` records with half-open frame intervals, the
placed :class:`SceneObjectTruth` records) and the seeded demo scenes.

Scene objects (:class:`SceneObjectSpec`) are placed by :func:`place_objects`: where a spec leaves
a coordinate or size unset it is drawn from the scene seed (its own stream, so the background, the
noise and the people do not move), and sizes follow the ground-plane perspective of
:meth:`SceneSpec.figure_height` (a bench is one figure height wide at its row). Doors stand on
the foot of the wall (or hedge); benches, trees and lamp posts on the ground; a lawn is a patch
of grass on the ground between its back and front rows.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from models.vocabulary import (
    DIRECTIONS,
    NEAR_OBJECTS,
    SCENE_CONDITIONS,
    SCENE_OBJECTS,
    object_name,
)
from models.world.figures import BACKGROUNDS, ground_row
from models.world.palette import COLOURS, SPEED_HEIGHTS_PER_S

SKIN_TONES: list[tuple[int, int, int]] = [(150, 180, 225), (110, 150, 200), (70, 105, 150), (45, 70, 105)]
HAIR_COLOURS: list[tuple[int, int, int]] = [(20, 20, 25), (30, 50, 80), (60, 110, 160), (150, 150, 155)]

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
class SceneObjectSpec:
    """A named thing in the scene that queries can mention ("the bench", "the red door").

    Unset fields are placed from the scene seed (:func:`place_objects`).
    """

    kind: str                                    # a key of models.vocabulary.SCENE_OBJECTS
    colour: str | None = None                    # doors only, and required for them: a key of COLOURS
    x: float | None = None                       # centre of its base, frame pixels
    y: float | None = None                       # row where it meets the ground (a lawn: its front edge); not for doors
    size: float | None = None                    # width in pixels (None: from the perspective at its row)
    depth: float | None = None                   # lawns only: rows from the front edge back (None: from the seed)


# Object sizes at their base row, in figure heights (SceneSpec.figure_height): (width, height).
OBJECT_SIZES: dict[str, tuple[float, float]] = {"bench": (1.0, 0.5), "door": (0.55, 1.15), "tree": (0.8, 1.9),
                                                "lamp_post": (0.2, 1.55)}
# The part of a box's width where the object meets the ground (what "near" measures from).
OBJECT_FOOT: dict[str, tuple[float, float]] = {"bench": (0.0, 1.0), "door": (0.0, 1.0), "tree": (0.43, 0.57),
                                               "lamp_post": (0.4, 0.6), "lawn": (0.0, 1.0)}
# Height of a typical figure standing on the bottom row, as a fraction of the frame height.
FIGURE_AT_BOTTOM = 0.48


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
    objects: list[SceneObjectSpec] = field(default_factory=list)     # benches, doors, trees, lamp posts, lawns
    conditions: list[str] = field(default_factory=list)              # whole-scene: "rain", "night"
    variation: float = 1.0                       # how far the footage varies, 0..1 (models.world.footage; 0: a still, even camera)

    def figure_height(self, y: float) -> float:
        """Height in pixels of a typical figure whose feet are on row ``y`` (ground-plane
        perspective: proportional to the row's distance below the horizon)."""
        horizon = self.horizon * self.height
        return FIGURE_AT_BOTTOM * self.height * (y - horizon) / (self.height - horizon)

    def validate(self) -> None:
        if self.width < 64 or self.height < 64:
            raise ValueError(f"scene {self.name!r}: frame {self.width}x{self.height} is too small (min 64x64)")
        if not (0 < self.fps <= 120):
            raise ValueError(f"scene {self.name!r}: fps must be in (0, 120], got {self.fps}")
        if self.n_frames < 1:
            raise ValueError(f"scene {self.name!r}: n_frames must be >= 1, got {self.n_frames}")
        if self.background not in BACKGROUNDS:
            raise ValueError(f"scene {self.name!r}: unknown background {self.background!r}; known: {sorted(BACKGROUNDS)}")
        if not 0.0 <= self.variation <= 1.0:
            raise ValueError(f"scene {self.name!r}: variation must be in [0, 1], got {self.variation}")
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
        for c in self.conditions:
            if c not in SCENE_CONDITIONS:
                raise ValueError(f"scene {self.name!r}: unknown condition {c!r}; known: {sorted(SCENE_CONDITIONS)}")
        if len(set(self.conditions)) != len(self.conditions):
            raise ValueError(f"scene {self.name!r}: a condition is given twice: {self.conditions}")
        ground = ground_row(self.background, self.height)
        names = []
        for i, o in enumerate(self.objects):
            where = f"scene {self.name!r}, object {i}"
            if o.kind not in SCENE_OBJECTS:
                raise ValueError(f"{where}: unknown scene object {o.kind!r}; known: {sorted(SCENE_OBJECTS)}")
            if o.kind == "door":
                if o.colour not in COLOURS:
                    raise ValueError(f"{where}: a door needs a colour, one of {sorted(COLOURS)} (got {o.colour!r})")
                if o.y is not None:
                    raise ValueError(f"{where}: a door stands on the foot of the wall; leave y unset")
            elif o.colour is not None:
                raise ValueError(f"{where}: only doors have a colour ({o.kind} got {o.colour!r})")
            if o.depth is not None and (o.kind != "lawn" or o.depth <= 0):
                raise ValueError(f"{where}: depth is for lawns only, and > 0")
            if o.x is not None and not 0 <= o.x <= self.width:
                raise ValueError(f"{where}: x={o.x} is outside the frame (0..{self.width})")
            if o.y is not None and not ground < o.y <= self.height:
                raise ValueError(f"{where}: y={o.y} is not on the ground (rows {ground + 1}..{self.height})")
            if o.size is not None and o.size < 4:
                raise ValueError(f"{where}: size {o.size} px is too small (min 4)")
            if o.kind in NEAR_OBJECTS:
                names.append(object_name(o.kind, o.colour))
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"scene {self.name!r}: a query names an object by its name, so each name is one "
                             f"object; more than one {twice}")


@dataclass
class Fact:
    """An attribute or event of one person that the ground truth supports."""

    kind: str                                    # "attribute" or "event"
    name: str                                    # e.g. "upper_colour", "walks", "stands", "enters", "occluded_by"
    value: str                                   # e.g. "red", "left", "from the right", "person 2"
    start_frame: int                             # first frame of the supporting interval
    end_frame: int                               # frame after the last one (half-open)


@dataclass
class SceneObjectTruth:
    """A placed scene object: what it is and exactly where it was drawn."""

    kind: str                                    # a key of models.vocabulary.SCENE_OBJECTS
    name: str                                    # how facts and queries name it: "bench", "red door", "lamp post", "lawn"
    colour: str | None                           # doors: the colour name; None otherwise
    box: list[float]                             # xyxy extent in frame pixels (before clipping to the frame); a lawn: its patch
    foot: list[float]                            # [x1, x2, y]: where it meets the ground (a lawn: its front edge)


@dataclass
class PersonTruth:
    """The ground truth of one rendered person."""

    id: int                                      # index of the person in SceneSpec.people
    upper_colour: str                            # upper-body clothing colour name
    lower_colour: str                            # lower-body clothing colour name
    upper_bgr: tuple[int, int, int]              # its BGR value as dyed and drawn (before light, noise and compression)
    lower_bgr: tuple[int, int, int]              # likewise for the lower body
    direction: str                               # "left" | "right" | "towards" | "away" | "none"
    speed_px_s: float                            # median foot speed while walking, frame px/s (camera motion left out)
    speed_word: str                              # "slow" | "normal" | "fast" ("none" for a standing person)
    stops: list[tuple[int, int]]                 # [start, end) frame intervals standing still (clipped to the video)
    boxes: list[list[float] | None]              # per frame: amodal box xyxy clipped to the frame, or None
    visible: list[float]                         # per frame: visible fraction of the silhouette in [0, 1]
    facts: list[Fact] = field(default_factory=list)  # attributes and events with intervals
    ground: list[str | None] = field(default_factory=list)  # per frame: "grass" | "pavement" under the foot point, None off the ground or absent
    near: list[list[str]] = field(default_factory=list)     # per frame: names of the scene objects the person is near ([] when none or absent)

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
    background: str = ""                         # SceneSpec.background
    conditions: list[str] = field(default_factory=list)           # SceneSpec.conditions ("rain", "night")
    objects: list[SceneObjectTruth] = field(default_factory=list)  # as placed and drawn, in the reference view
    camera: list[list[float]] = field(default_factory=list)  # per frame: (s, tx, ty), a reference-view point (x, y) is at (s x + tx, s y + ty)

    @property
    def weather(self) -> str:
        return weather_of(self.conditions)

    @property
    def light(self) -> str:
        return light_of(self.conditions)

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
        objects = [SceneObjectTruth(**o) for o in data.pop("objects", [])]
        return cls(**data, people=people, objects=objects)

    def save(self, path: str | os.PathLike) -> None:
        Path(path).write_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike) -> GroundTruth:
        return cls.from_json(Path(path).read_text())


def weather_of(conditions: list[str]) -> str:
    """The weather value of a scene's conditions: "rain" or "clear"."""
    return "rain" if "rain" in conditions else "clear"


def light_of(conditions: list[str]) -> str:
    """The light value of a scene's conditions: "night" or "day"."""
    return "night" if "night" in conditions else "day"


def place_objects(spec: SceneSpec) -> list[SceneObjectTruth]:
    """Where each of ``spec.objects`` goes (see the module docstring), in the spec's order.

    Unset values come from ``default_rng([seed, 7741])``: x across the middle 80% of the width;
    ground objects' rows over the front three quarters of the ground; lawns 25-40% of the width
    wide and 20-35% of the ground deep. A seeded x or row is redrawn (up to 20 times) while the
    object's box would overlap one placed before it (lawns overlap anything). Sizes: the spec's
    width, else :data:`OBJECT_SIZES` times the figure height at the object's row.
    """
    rng = np.random.default_rng([spec.seed, 7741])
    W, H = spec.width, spec.height
    ground = ground_row(spec.background, H)
    placed: list[SceneObjectTruth] = []

    def overlaps(box) -> bool:
        return any(o.kind != "lawn" and box[0] < o.box[2] and o.box[0] < box[2] and box[1] < o.box[3]
                   and o.box[1] < box[3] for o in placed)

    for o in spec.objects:
        box = None
        for _ in range(20):
            x = o.x if o.x is not None else float(rng.uniform(0.1, 0.9) * W)
            if o.kind == "door":
                y = float(ground)
            elif o.y is not None:
                y = float(o.y)
            else:
                y = float(rng.uniform(ground + 0.25 * (H - ground), H * 0.96))
            if o.kind == "lawn":
                width = o.size if o.size is not None else float(rng.uniform(0.25, 0.4) * W)
                depth = o.depth if o.depth is not None else float(rng.uniform(0.2, 0.35) * (H - ground))
                box = [x - width / 2, max(float(ground), y - depth), x + width / 2, y]
                break
            f = spec.figure_height(y)
            wf, hf = OBJECT_SIZES[o.kind]
            width = o.size if o.size is not None else wf * f
            height = width * hf / wf
            if o.kind == "door":
                height = min(height, y)                      # the door fits on the wall
            box = [x - width / 2, y - height, x + width / 2, y]
            if not overlaps(box) or (o.x is not None and (o.y is not None or o.kind == "door")):
                break
        a, b = OBJECT_FOOT[o.kind]
        foot = [box[0] + a * (box[2] - box[0]), box[0] + b * (box[2] - box[0]), box[3]]
        placed.append(SceneObjectTruth(kind=o.kind, name=object_name(o.kind, o.colour), colour=o.colour,
                                       box=[round(v, 2) for v in box], foot=[round(v, 2) for v in foot]))
    return placed


def gt_path_for(video_path: str | os.PathLike) -> Path:
    """Where the ground truth of a rendered video lives: ``<name>.gt.json`` next to it."""
    p = Path(video_path)
    return p.with_name(p.stem + ".gt.json")


# -- demo scenes ---------------------------------------------------------------------------------
# The demo cameras' tilt: the horizon's row, a fraction of the frame height above its top.
DEMO_HORIZONS = (-0.9, -0.35)


def demo_scenes(seed: int = 0, n: int = 3) -> list[SceneSpec]:
    """Short scenes for the demo and the tests (3-6 people each, 640x360 or 960x540); ``n`` up to 6
    (the last three are shorter scenes that give every split of the demo two videos).

    ``seed`` varies textures, noise and skin/hair, each scene's camera tilt (its horizon, drawn
    from ``default_rng([seed, 7770])`` in ``DEMO_HORIZONS``) and through the scene seed its footage
    (:mod:`models.world.footage`: zoom, pan, light, sensor, clothing as dyed, builds); the choreography (who walks where, stops,
    crossings, occlusions) and the scene context are fixed so the scenes stay interesting for
    every seed: benches where people stop or stand, doors of two colours (a walker heads up to
    one of them, passing beside it, in "stop_and_go" and "corridor"), trees and lamp posts that
    walkers pass, lawns on the plaza for mixed ground, rain in "stop_and_go" and "market", night
    in "evening".
    """
    rng = np.random.default_rng(seed)
    horizons = iter(np.random.default_rng([seed, 7770]).uniform(*DEMO_HORIZONS, 6).tolist())

    def looks() -> dict:
        return {"skin": int(rng.integers(0, len(SKIN_TONES))), "hair": int(rng.integers(0, len(HAIR_COLOURS)))}

    crossing = SceneSpec(
        name="crossing", width=640, height=360, fps=12, n_frames=120, seed=seed, background="plaza", horizon=next(horizons),
        people=[
            PersonSpec("red", "blue", "right", start=(-40, 300), height=150, speed="normal", **looks()),
            PersonSpec("yellow", "black", "left", start=(700, 338), height=165, speed="normal", **looks()),
            PersonSpec("green", "grey", "right", start=(120, 270), height=138, speed="slow",
                       stops=[(45, 75)], **looks()),
            PersonSpec("white", "brown", "towards", start=(520, 215), height=120, speed="normal", **looks()),
        ],
        objects=[SceneObjectSpec("bench", x=300, y=262), SceneObjectSpec("door", "red", x=120),
                 SceneObjectSpec("door", "blue", x=460),
                 SceneObjectSpec("lawn", x=470, y=320, size=180, depth=40)])
    stop_and_go = SceneSpec(
        name="stop_and_go", width=640, height=360, fps=10, n_frames=100, seed=seed + 1, background="park", horizon=next(horizons),
        people=[
            PersonSpec("orange", "blue", "left", start=(560, 320), height=160, speed="slow",
                       stops=[(20, 50)], **looks()),
            PersonSpec("purple", "grey", "right", start=(-30, 300), height=150, speed="fast", **looks()),
            PersonSpec("blue", "black", "away", start=(200, 350), height=175, speed="normal", **looks()),
        ],
        distractors=[DistractorSpec("ball", "red", start=(80, 355), velocity=(30, 0), size=28)],
        objects=[SceneObjectSpec("bench", x=448, y=312), SceneObjectSpec("door", "blue", x=262),
                 SceneObjectSpec("door", "red", x=480), SceneObjectSpec("tree", x=570, y=200)],
        conditions=["rain"])
    busy = SceneSpec(
        name="busy_plaza", width=960, height=540, fps=12, n_frames=150, seed=seed + 2, background="plaza", horizon=next(horizons),
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
        distractors=[DistractorSpec("crate", "brown", start=(-30, 520), velocity=(45, 0), size=36)],
        objects=[SceneObjectSpec("bench", x=700, y=372), SceneObjectSpec("door", "red", x=150),
                 SceneObjectSpec("door", "yellow", x=820), SceneObjectSpec("lamp_post", x=880, y=520)])
    market = SceneSpec(
        name="market", width=640, height=360, fps=10, n_frames=80, seed=seed + 3, background="park", horizon=next(horizons),
        people=[
            PersonSpec("red", "grey", "left", start=(680, 330), height=160, speed="normal", **looks()),
            PersonSpec("green", "black", "right", start=(-40, 290), height=140, speed="slow", **looks()),
            PersonSpec("white", "blue", "towards", start=(420, 230), height=125, speed="normal", **looks()),
        ],
        objects=[SceneObjectSpec("tree", x=150, y=280), SceneObjectSpec("bench", x=420, y=225)],
        conditions=["rain"])
    corridor = SceneSpec(
        name="corridor", width=640, height=360, fps=10, n_frames=80, seed=seed + 4, background="plaza", horizon=next(horizons),
        people=[
            PersonSpec("blue", "blue", "right", start=(-40, 320), height=160, speed="fast", **looks()),
            PersonSpec("yellow", "brown", "left", start=(600, 280), height=140, speed="slow",
                       stops=[(30, 55)], **looks()),
            PersonSpec("purple", "black", "away", start=(250, 355), height=170, speed="normal", **looks()),
        ],
        objects=[SceneObjectSpec("door", "red", x=318), SceneObjectSpec("door", "green", x=480),
                 SceneObjectSpec("lamp_post", x=560, y=300),
                 SceneObjectSpec("lawn", x=450, y=295, size=140, depth=30)])
    evening = SceneSpec(
        name="evening", width=640, height=360, fps=10, n_frames=80, seed=seed + 5, background="park", horizon=next(horizons),
        people=[
            PersonSpec("orange", "black", "right", start=(-40, 310), height=155, speed="normal", **looks()),
            PersonSpec("grey", "white", "left", start=(690, 335), height=165, speed="normal", **looks()),
            PersonSpec("red", "blue", "none", start=(330, 250), height=130, **looks()),
        ],
        objects=[SceneObjectSpec("lamp_post", x=360, y=244), SceneObjectSpec("bench", x=520, y=325),
                 SceneObjectSpec("tree", x=90, y=200)],
        conditions=["night"])
    scenes = [crossing, stop_and_go, busy, market, corridor, evening]
    if not 1 <= n <= len(scenes):
        raise ValueError(f"there are {len(scenes)} demo scenes; n={n}")
    return scenes[:n]
