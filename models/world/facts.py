"""The facts of the world's ground truth, read from what the renderer drew: per person, the
clothing colours, walking and standing, speed words, entering and leaving at a frame edge,
crossings, occlusions by a nearer person, and the scene facts (ground, near, weather, light).

Frame intervals are half-open ``[start, end)``. A person's states are the renderer's per-frame
foot point ``(x, y)`` in the scene's reference view, figure height ``h``, and the ``exists`` and
``moving`` flags; boxes are in frame pixels, as drawn through the camera.
"""
from __future__ import annotations

import numpy as np

from models.vocabulary import NEAR_NOTHING, NEAR_OBJECTS
from models.world.figures import SURFACE_NAMES
from models.world.scene import Fact, SceneObjectTruth, SceneSpec, light_of, weather_of

# A nearer person covering at least this fraction of a silhouette makes an "occluded_by" fact.
OCCLUSION_FACT = 0.3
# A person is "near" a scene object while the foot point is at most NEAR_LATERAL of the person's
# height beside the object's foot (its x-range) and at most NEAR_DEPTH of it in front of or
# behind it.
NEAR_LATERAL = 0.35
NEAR_DEPTH = 0.35
def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """Half-open runs of True in a list of booleans."""
    runs, start = [], None
    for i, v in enumerate([*flags, False]):
        if v and start is None:
            start = i
        elif not v and start is not None:
            runs.append((start, i))
            start = None
    return runs


def near_objects(x: float, y: float, height: float, objects: list[SceneObjectTruth]) -> list[str]:
    """Names of the objects a person with foot point (x, y) and figure height ``height`` is near
    (``NEAR_LATERAL``, ``NEAR_DEPTH``), in the objects' order."""
    out = []
    for o in objects:
        if o.kind not in NEAR_OBJECTS:
            continue
        x1, x2, row = o.foot
        beside = max(x1 - x, 0.0, x - x2)
        if beside <= NEAR_LATERAL * height and abs(y - row) <= NEAR_DEPTH * height:
            out.append(o.name)
    return out


def ground_under(x: float, y: float, surface: np.ndarray) -> str | None:
    """The surface name under a foot point ("grass", "pavement"), None on no ground (the wall,
    the hedge). A foot point beyond the frame reads the nearest pixel of the frame: the scene
    goes on past the frame edge the way it looks at it."""
    h, w = surface.shape
    code = int(surface[min(max(int(y), 0), h - 1), min(max(int(x), 0), w - 1)])
    return SURFACE_NAMES.get(code)


def person_context(spec: SceneSpec, states: list, boxes, objects: list[SceneObjectTruth],
             surface: np.ndarray) -> tuple[list[str | None], list[list[str]]]:
    """Per frame: the ground under one person's foot point and the objects the person is near
    (None and [] on frames without a box)."""
    ground: list[str | None] = [None] * spec.n_frames
    near: list[list[str]] = [[] for _ in range(spec.n_frames)]
    for f, s in enumerate(states):
        if boxes[f] is not None:
            ground[f] = ground_under(s.x, s.y, surface)
            near[f] = near_objects(s.x, s.y, s.h, objects)
    return ground, near


def _scene_facts(spec: SceneSpec, present: list[bool], ground: list[str | None], near: list[list[str]],
                 objects: list[SceneObjectTruth], first: int, last: int) -> list[Fact]:
    """The scene facts of one person: "ground" per run of one surface, "near" per run of frames
    near each object and NEAR_NOTHING over the frames near none, "weather" and "light" over the
    visible span."""
    facts = []
    for value in dict.fromkeys(g for g in ground if g is not None):
        facts += [Fact("attribute", "ground", value, a, b) for a, b in _runs([g == value for g in ground])]
    for name in dict.fromkeys(o.name for o in objects if o.kind in NEAR_OBJECTS):
        facts += [Fact("attribute", "near", name, a, b) for a, b in _runs([name in n for n in near])]
    nothing = [present[f] and not near[f] for f in range(spec.n_frames)]
    facts += [Fact("attribute", "near", NEAR_NOTHING, a, b) for a, b in _runs(nothing)]
    facts.append(Fact("attribute", "weather", weather_of(spec.conditions), first, last))
    facts.append(Fact("attribute", "light", light_of(spec.conditions), first, last))
    return facts


def person_facts(i: int, spec: SceneSpec, states: list, boxes, all_boxes,
           occluders: list[dict[int, list[int]]], context: tuple[list[str | None], list[list[str]]],
           objects: list[SceneObjectTruth]) -> list[Fact]:
    p = spec.people[i]
    W, H = spec.width, spec.height
    present = [b is not None for b in boxes]
    runs = _runs(present)
    facts: list[Fact] = []
    if not runs:
        return facts
    first, last = runs[0][0], runs[-1][1]
    facts.append(Fact("attribute", "upper_colour", p.upper, first, last))
    facts.append(Fact("attribute", "lower_colour", p.lower, first, last))
    facts += _scene_facts(spec, present, *context, objects, first, last)
    moving = [present[f] and states[f].moving for f in range(spec.n_frames)]
    for a, b in _runs(moving):
        facts.append(Fact("event", "walks", p.direction, a, b))
        facts.append(Fact("attribute", "speed", p.speed, a, b))
    standing = [present[f] and not states[f].moving for f in range(spec.n_frames)]
    for a, b in _runs(standing):
        facts.append(Fact("event", "stands", "still", a, b))

    def edge(box) -> str | None:
        x1, y1, x2, y2 = box
        if x1 <= 0.5:
            return "left"
        if x2 >= W - 0.5:
            return "right"
        if y2 >= H - 0.5:
            return "bottom"
        if y1 <= 0.5:
            return "top"
        return None

    for a, b in runs:
        side = edge(boxes[a])
        if side is not None and (a > 0 or states[a].moving):
            facts.append(Fact("event", "enters", f"from the {side}", a, a + 1))
        side = edge(boxes[b - 1])
        if side is not None and b < spec.n_frames and states[b - 1].exists:
            facts.append(Fact("event", "leaves", f"to the {side}", b - 1, b))
    # occlusions: a nearer person covers at least OCCLUSION_FACT of the silhouette
    def frame_runs(frames: list[int]) -> list[tuple[int, int]]:
        flags = [False] * spec.n_frames
        for f in frames:
            flags[f] = True
        return _runs(flags)

    for k, frames in sorted(occluders[i].items()):
        for a, b in frame_runs(frames):
            facts.append(Fact("event", "occluded_by", f"person {k}", a, b))
    for j in range(len(spec.people)):
        for a, b in frame_runs(occluders[j].get(i, [])) if j != i else []:
            facts.append(Fact("event", "passes_in_front_of", f"person {j}", a, b))
    # crossings: the horizontal order of two walking people flips while both are in the frame
    for j in range(len(spec.people)):
        if j == i:
            continue
        prev = None
        for f in range(spec.n_frames):
            bj = all_boxes[j][f]
            if boxes[f] is None or bj is None:
                prev = None
                continue
            order = (boxes[f][0] + boxes[f][2]) < (bj[0] + bj[2])
            if prev is not None and order != prev:
                facts.append(Fact("event", "crosses", f"person {j}", f - 1, f + 1))
            prev = order
    facts.sort(key=lambda fa: (fa.start_frame, fa.kind, fa.name, fa.value))
    return facts
