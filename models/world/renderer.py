"""Synthetic static-camera videos of walking people, with exact ground truth.

The project cannot download data sets, so accuracy figures for tracking (and later for the
heuristic describer and the retrievers) are measured on videos rendered here. A scene is plain
data (:class:`SceneSpec` with a list of :class:`PersonSpec`); :func:`render_scene` draws it with
NumPy/OpenCV into an ``.mp4`` and returns the :class:`GroundTruth` it also saves next to the
video as ``<name>.gt.json``.

What is drawn:

- a textured background ("plaza": a wall with windows above tiled paving; "park": a hedge, a
  lawn, a gravel path and benches), with low-frequency shading, seen through a camera that varies
  like footage (:mod:`models.world.footage`, seeded from the scene: zoom, slow pan and shake over
  the scene's reference view; colour temperature, a brightness gradient, a cast shadow and
  shadows under the people; a band of the background that moves; a pole near the camera in front
  of everything; motion blur, sensor noise and JPEG compression);
- people-like figures: head with hair, neck, torso and sleeves in the upper-body clothing colour,
  legs in the lower-body colour (each dyed around its named colour), hands, shoes; each person
  with a build and gait of their own. Seen from the side (walking left or right) the
  legs and arms swing with the stride; seen from the front or back (walking towards or away from
  the camera) the figure is wider, the feet alternate and the figure grows or shrinks with a
  simple ground-plane perspective (height proportional to the foot's distance below the horizon);
- optional non-person distractors (a rolling ball, a sliding crate) that move but are not people;
- optional scene context that queries can name and only full frames show: doors (with a colour)
  on the foot of the wall, benches, trees and lamp posts on the ground, lawns (grass patches),
  placed by :func:`models.world.scene.place_objects`; "night" (a dark bluish palette, figures
  darkened less, lit lamps with a glow) and "rain" (thin bright slanted streaks, elsewhere on every
  frame, over everything);
- figures, distractors and standing objects are drawn far to near (by foot position), so a person
  walking higher in the image passes *behind* one walking lower down (or behind a bench), and the
  occluded person's visible fraction drops.

The scene and its truth are plain data (:mod:`models.world.scene`); the drawing is in
:mod:`models.world.figures`. Ground truth per person: clothing colour names and BGR values as dyed, direction, speed in px/s and as a
word, stop intervals, per-frame amodal boxes (the full silhouette's extent, clipped to the frame)
and per-frame visible fraction (pixels of the silhouette that end up on screen and are not covered
by a nearer figure, divided by the silhouette's full area), and a list of :class:`Fact` records
(attributes and events with frame intervals) for a describer that reads facts from the truth:
attributes ``upper_colour``, ``lower_colour``, ``speed`` (slow/normal/fast, while walking); events
``walks`` (left/right/towards/away), ``stands``, ``enters`` / ``leaves`` ("from the left", "to the
bottom", ...), ``crosses`` (another person, when their left-right order flips), ``occluded_by`` and
``passes_in_front_of`` (a nearer person covers at least 30% of the silhouette); and the scene facts
``ground`` (grass / pavement under the foot point, per run), ``near`` (each named object while the
foot point is within ``NEAR_LATERAL`` figure heights beside its foot and ``NEAR_DEPTH`` in front of
or behind it; ``nothing`` over the frames near none), ``weather`` (rain / clear) and ``light``
(night / day) over the visible span. The per-frame ground and objects near are kept too
(``PersonTruth.ground``, ``PersonTruth.near``), with the placed objects (``GroundTruth.objects``).

Frame intervals are half-open ``[start, end)`` everywhere in this module.
"""
from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from models.world.facts import (
    OCCLUSION_FACT,
    person_context,
    person_facts,
)
from models.world.figures import (
    _ONE,
    BACKGROUNDS,
    FIGURE_NIGHT_GAIN,
    GRASS,
    RAIN_GAIN,
    SHIFT,
    STRIDE_HEIGHTS,
    _pt,
    _shade,
    add_glow,
    darken_for_night,
    draw_figure,
    draw_object,
    ground_map,
    ground_row,
    lawn_region,
    paint_door,
    paint_lawn,
    rain_streaks,
)
from models.world.footage import (
    Dress,
    Footage,
    blur_figure,
    camera_path,
    compress,
    dress_of,
    drop_shadow,
    footage_of,
    light_map,
    occluder_layer,
    shadow_map,
    sway_offset,
    sway_texture,
    through_camera,
)
from models.world.palette import COLOURS, DEPTH_FORESHORTENING, SPEED_HEIGHTS_PER_S
from models.world.scene import (
    HAIR_COLOURS,
    SKIN_TONES,
    DistractorSpec,
    GroundTruth,
    PersonSpec,
    PersonTruth,
    SceneObjectTruth,
    SceneSpec,
    gt_path_for,
    place_objects,
)

# Rain streak patterns drawn once per scene; every frame shows one of them at a random offset.
RAIN_PATTERNS = 6
# Sensor noise is drawn once per scene on a field this many pixels larger than the frame; every
# frame adds a crop of it at a random offset (fresh noise at each pixel, at a fraction of the cost).
NOISE_PAD = 48
# -- scene state ---------------------------------------------------------------------------------
@dataclass
class _PersonState:
    x: float
    y: float
    h: float
    phase: float
    amplitude: float
    exists: bool
    moving: bool


def _scale_at(y: float, spec: SceneSpec, p: PersonSpec) -> float:
    """Figure height at foot row y, by ground-plane perspective anchored at the start point."""
    horizon = spec.horizon * spec.height
    return p.height * (y - horizon) / (p.start[1] - horizon)


def _person_states(spec: SceneSpec, p: PersonSpec, dress: Dress) -> list[_PersonState]:
    """Foot position, height and gait of one person on every frame, in the reference view."""
    states = []
    x, y = float(p.start[0]), float(p.start[1])
    phase = 0.0
    amp = 0.0
    dt = 1.0 / spec.fps
    exit_frame = spec.n_frames if p.exit_frame is None else p.exit_frame
    for f in range(spec.n_frames):
        exists = p.enter_frame <= f < exit_frame
        stopped = any(a <= f < b for a, b in p.stops) or p.direction == "none"
        h = _scale_at(y, spec, p)
        moving = exists and not stopped
        # the swing amplitude eases in and out so a stop looks like a stop
        target = 1.0 if moving else 0.0
        amp += (target - amp) * 0.5
        if amp < 0.05 and not moving:
            amp = 0.0
        states.append(_PersonState(x, y, h, phase, amp, exists, moving))
        if moving:
            pace = SPEED_HEIGHTS_PER_S[p.speed] * dress.pace
            base = p.speed_px_s if p.speed_px_s is not None else pace * h
            if p.direction in ("left", "right"):
                step = base * dt
                x += step if p.direction == "right" else -step
            else:
                step = (base if p.speed_px_s is not None else base * DEPTH_FORESHORTENING) * dt
                y += step if p.direction == "towards" else -step
                y = max(y, spec.horizon * spec.height + 1.0)
            # the legs cycle with distance walked on the ground, not in the image
            ground_step = pace * h * dt if p.speed_px_s is None else step
            phase += 2 * math.pi * ground_step / (STRIDE_HEIGHTS * dress.build.stride * h)
    return states


def _view(direction: str) -> str:
    return {"left": "side-left", "right": "side-right", "towards": "front", "away": "back"}.get(direction, "front")


def _draw_distractor(frame: np.ndarray, d: DistractorSpec, t: float, colour: tuple[int, ...]
                     ) -> tuple[list[float] | None, np.ndarray]:
    """Draw a distractor at time ``t`` in ``colour``; returns its box (not clipped) and its HxW boolean mask."""
    h, w = frame.shape[:2]
    bx = d.start[0] + d.velocity[0] * t
    by = d.start[1] + d.velocity[1] * t
    m = np.zeros((h, w), np.uint8)
    if d.kind == "ball":
        r = d.size / 2
        bounce = abs(math.sin(t * 4.0)) * d.size * 0.8
        cy = by - r - bounce
        cv2.circle(frame, _pt(bx, cy), int(r * _ONE), colour, -1, cv2.LINE_AA, SHIFT)
        cv2.circle(m, _pt(bx, cy), int(r * _ONE), 255, -1, cv2.LINE_8, SHIFT)
        box = [bx - r, cy - r, bx + r, cy + r]
    else:
        s = d.size
        cv2.rectangle(frame, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), colour, -1, cv2.LINE_8, SHIFT)
        cv2.rectangle(frame, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), _shade(colour, 0.6), 2, cv2.LINE_8, SHIFT)
        cv2.rectangle(m, _pt(bx - s / 2, by - s), _pt(bx + s / 2, by), 255, -1, cv2.LINE_8, SHIFT)
        box = [bx - s / 2, by - s, bx + s / 2, by]
    return box, m > 0


def _clip_box(box, w: int, h: int) -> list[float] | None:
    x1, y1, x2, y2 = (float(v) for v in box)
    x1, x2 = max(0.0, x1), min(float(w), x2)
    y1, y2 = max(0.0, y1), min(float(h), y2)
    if x2 - x1 < 1 or y2 - y1 < 1:
        return None
    return [round(x1, 2), round(y1, 2), round(x2, 2), round(y2, 2)]


@dataclass
class FrameTruth:
    """One rendered frame and what is true on it (lists indexed like ``spec.people``)."""

    frame: np.ndarray                            # HxWx3 BGR uint8, noise included
    boxes: list[list[float] | None]              # amodal box xyxy clipped to the frame, None if off-frame/absent
    visible: list[float]                         # visible fraction of each silhouette (0 when absent)
    hidden_by: list[dict[int, float]]            # per person: nearer person id -> fraction of the silhouette it covers
    distractor_boxes: list[list[float] | None]   # per distractor: its box clipped to the frame, or None


@dataclass
class _Stage:
    """What every frame of a scene shares: the background with its flat objects painted in (and
    the night palette and lamp light applied), and the standing objects drawn in depth order."""

    background: np.ndarray                       # [H, W, 3] float32
    shade: np.ndarray | None                     # [H, W, 3] float32 light left by a cast shadow, None without one
    sway: np.ndarray | None                      # texture of the moving band over the top rows (footage.sway_texture)
    layers: list[tuple[float, np.ndarray, np.ndarray, tuple[int, int]]]  # (foot row, bgr [h, w, 3], mask [h, w], origin) per object


def surface_of(spec: SceneSpec, objects: list[SceneObjectTruth]) -> np.ndarray:
    """[H, W] uint8 ground surface codes of a scene: its background's layout with its lawns."""
    surface = ground_map(spec.background, spec.width, spec.height)
    for o in objects:
        region = lawn_region(o.box, spec.width, spec.height) if o.kind == "lawn" else None
        if region is not None:
            surface[region] = GRASS
    return surface


def _stage(spec: SceneSpec, footage: Footage) -> _Stage:
    """Build the static part of a scene. The background draws from ``default_rng(seed)`` exactly
    as a scene without objects does; object details draw from their own stream."""
    W, H = spec.width, spec.height
    objects = place_objects(spec)
    has_bench = any(o.kind == "bench" for o in objects)
    background = BACKGROUNDS[spec.background](np.random.default_rng(spec.seed), W, H, benches=not has_bench)
    detail_rng = np.random.default_rng([spec.seed, 7742])
    night = "night" in spec.conditions
    layers = []
    for o in objects:
        if o.kind == "lawn":
            paint_lawn(background, o.box, detail_rng)
        elif o.kind == "door":
            paint_door(background, o.box, COLOURS[o.colour], detail_rng)
        else:
            bgr, mask, origin = draw_object(o.kind, o.box, detail_rng, night=night)
            layers.append((o.foot[2], bgr, mask, origin))
    if night:
        darken_for_night(background)
        for o in objects:
            if o.kind == "lamp_post":                 # the lamp's light and the pool it casts on the ground
                f = spec.figure_height(o.foot[2])
                add_glow(background, (o.box[0] + o.box[2]) / 2, o.box[1] + 0.06 * (o.box[3] - o.box[1]), 0.35 * f)
                add_glow(background, (o.box[0] + o.box[2]) / 2, o.foot[2], 0.6 * f, strength=45.0)
    pole = occluder_layer(spec, footage)
    if pole is not None:                              # near the camera: in front of everything
        layers.append((math.inf, *pole))
    ground = ground_row(spec.background, H)
    return _Stage(background, shadow_map(spec, footage, ground), sway_texture(spec, footage, ground), layers)


def _paste(frame: np.ndarray, bgr: np.ndarray, mask: np.ndarray, origin: tuple[int, int]
           ) -> tuple[tuple[slice, slice], np.ndarray] | None:
    """Paste a canvas at ``origin`` (frame pixel of its top-left), clipped to the frame; returns
    the frame region and the pasted part of the mask (None when nothing is on screen)."""
    H, W = frame.shape[:2]
    ox, oy = origin
    x0, y0 = max(0, ox), max(0, oy)
    x1, y1 = min(W, ox + mask.shape[1]), min(H, oy + mask.shape[0])
    if x1 <= x0 or y1 <= y0:
        return None
    m = mask[y0 - oy:y1 - oy, x0 - ox:x1 - ox]
    region = frame[y0:y1, x0:x1]
    region[m] = bgr[y0 - oy:y1 - oy, x0 - ox:x1 - ox][m]
    return (slice(y0, y1), slice(x0, x1)), m


def render_frames(spec: SceneSpec) -> Iterator[FrameTruth]:
    """Render ``spec`` frame by frame (no file): the frames and their per-frame truth.

    The scene is drawn in its reference view and then seen through the camera
    (:mod:`models.world.footage`: zoom, pan and shake, light, motion blur, noise, compression).
    Boxes are amodal (the whole silhouette, occluded parts included), carried through the camera
    and clipped to the frame. The visible fraction divides the silhouette pixels that end up on
    screen, not covered by anything nearer (the pole near the camera included), by the
    silhouette's full area (parts outside the camera's view count as hidden).
    People, distractors and the standing scene objects (benches, trees, lamp posts) are drawn far
    to near, so an object hides the person behind it; doors and lawns are flat, under everyone.
    At night the figures are darkened by ``FIGURE_NIGHT_GAIN``; rain streaks fall over everything.
    """
    spec.validate()
    W, H = spec.width, spec.height
    footage = footage_of(spec)
    camera = camera_path(spec, footage)
    light = light_map(spec, footage)
    stage = _stage(spec, footage)
    background = stage.background
    dresses = [dress_of(spec, i) for i in range(len(spec.people))]
    states = [_person_states(spec, p, d) for p, d in zip(spec.people, dresses, strict=True)]
    noise_rng = np.random.default_rng(spec.seed + 7919)
    rain_rng = np.random.default_rng([spec.seed, 7743])
    # a few streak patterns, each frame one of them shifted by a random offset (wrapping around)
    rain = [rain_streaks(rain_rng, W, H) for _ in range(RAIN_PATTERNS)] if "rain" in spec.conditions else []
    gain = FIGURE_NIGHT_GAIN if "night" in spec.conditions else 1.0
    noise = None
    if footage.noise > 0:
        shape = (H + NOISE_PAD, W + NOISE_PAD, 3)
        noise = noise_rng.standard_normal(shape, dtype=np.float32) * np.float32(footage.noise)
    n_p, n_d = len(spec.people), len(spec.distractors)
    for f in range(spec.n_frames):
        frame = background.copy()
        if stage.sway is not None:                    # the moving band: foliage in the wind, reflections
            shift = sway_offset(footage, f, spec.fps)
            frame[:stage.sway.shape[0]] += stage.sway[:, shift:shift + W]
        s_f, tx, ty = (float(v) for v in camera[f])
        owner = np.full((H, W), -1, np.int16)  # which figure each pixel shows, -1 background
        full_area = np.zeros(n_p, np.float64)
        boxes: list[list[float] | None] = [None] * n_p
        # far to near: smaller foot y is further away; distractors sort by their bottom edge,
        # objects by their foot row (on a tie the object is behind)
        items = [(s[f].y, "p", i) for i, s in enumerate(states) if s[f].exists]
        t = f / spec.fps
        items += [(d.start[1] + d.velocity[1] * t, "d", j) for j, d in enumerate(spec.distractors)]
        items += [(layer[0], "o", k) for k, layer in enumerate(stage.layers)]
        items.sort(key=lambda it: (it[0], it[1], it[2]))
        dboxes: list[list[float] | None] = [None] * n_d
        hidden = np.zeros((n_p, n_p + n_d + len(stage.layers)), np.float64)

        def cover(region_owner: np.ndarray, m: np.ndarray, label: int, hidden: np.ndarray = hidden) -> None:
            """Paint ``label`` over the mask and count whose pixels it covers."""
            under = region_owner[m]
            under = under[(under >= 0) & (under < n_p)]
            if len(under):
                hidden[:, label] += np.bincount(under, minlength=n_p)
            region_owner[m] = label

        for _, kind, i in items:
            if kind == "d":
                d = spec.distractors[i]
                dbox, dmask = _draw_distractor(frame, d, t, _shade(COLOURS[d.colour], gain))
                dboxes[i] = _clip_box(_through(dbox, camera[f]), W, H)
                cover(owner, dmask, n_p + i)
                continue
            if kind == "o":
                _, bgr, mask, origin = stage.layers[i]
                pasted = _paste(frame, bgr, mask, origin)
                if pasted is not None:
                    cover(owner[pasted[0]], pasted[1], n_p + n_d + i)
                continue
            p, s, dress = spec.people[i], states[i][f], dresses[i]
            fx, fy = math.floor(s.x), math.floor(s.y)
            bgr, mask, (ax, ay) = draw_figure(
                s.h, s.phase, s.amplitude, _view(p.direction), _shade(dress.upper, gain),
                _shade(dress.lower, gain), _shade(SKIN_TONES[p.skin], gain), _shade(HAIR_COLOURS[p.hair], gain),
                sub=(s.x - fx, s.y - fy), build=dress.build)
            if spec.variation > 0:
                drop_shadow(frame, s.x, s.y, s.h)
                if f > 0 and states[i][f - 1].exists:     # the walker moves while the shutter is open
                    bgr = blur_figure(bgr, mask > 0, footage.shutter * s_f * abs(s.x - states[i][f - 1].x))
            full_area[i] = float(np.count_nonzero(mask))
            ys, xs = np.nonzero(mask)
            if len(xs) == 0:
                continue
            ox, oy = fx - ax, fy - ay  # reference-view coordinates of the canvas origin
            box = [ox + xs.min(), oy + ys.min(), ox + xs.max() + 1, oy + ys.max() + 1]
            boxes[i] = _clip_box(_through(box, camera[f]), W, H)
            pasted = _paste(frame, bgr, mask > 0, (ox, oy))
            if pasted is not None:
                cover(owner[pasted[0]], pasted[1], i)
        visible = [0.0] * n_p
        hidden_by: list[dict[int, float]] = [{} for _ in spec.people]
        if spec.people:
            # the part of the reference view the camera sees on this frame
            xa, xb = max(0, round(-tx / s_f)), min(W, round((W - tx) / s_f))
            ya, yb = max(0, round(-ty / s_f)), min(H, round((H - ty) / s_f))
            seen = owner[ya:yb, xa:xb]
            counts = np.bincount(seen[seen >= 0].ravel(), minlength=n_p + n_d + len(stage.layers))
            for i in range(n_p):
                if full_area[i] > 0 and boxes[i] is not None:
                    visible[i] = round(float(counts[i] / full_area[i]), 4)
                    hidden_by[i] = {int(k): round(float(hidden[i, k] / full_area[i]), 4)
                                    for k in range(n_p) if hidden[i, k] > 0}
        if rain:
            rows, cols = rain[int(rain_rng.integers(len(rain)))]
            frame[(rows + rain_rng.integers(H)) % H, (cols + rain_rng.integers(W)) % W] += RAIN_GAIN
        if stage.shade is not None:
            frame *= stage.shade
        frame = through_camera(frame, camera[f], camera[f - 1] if f else None, footage.shutter)
        if light is not None:
            frame *= light
        if noise is not None:                         # a fresh crop of the scene's noise per frame
            dy, dx = (int(v) for v in noise_rng.integers(0, NOISE_PAD + 1, 2))
            frame += noise[dy:dy + H, dx:dx + W]
        image = compress(np.clip(frame, 0, 255).astype(np.uint8), footage.quality)
        yield FrameTruth(image, boxes, visible, hidden_by, dboxes)


def _through(box, row: np.ndarray) -> list[float]:
    """A reference-view box as the camera with ``row`` ``(s, tx, ty)`` sees it."""
    s, tx, ty = (float(v) for v in row)
    return [s * box[0] + tx, s * box[1] + ty, s * box[2] + tx, s * box[3] + ty]


# -- rendering to a file -------------------------------------------------------------------------
def render_scene(spec: SceneSpec, out_path: str | os.PathLike) -> GroundTruth:
    """Render ``spec`` to ``out_path`` (.mp4, MPEG-4 Part 2 'mp4v') and save ``<name>.gt.json``.

    Raises ValueError for an invalid spec and OSError when the video cannot be written.
    """
    spec.validate()
    out_path = Path(out_path)
    if out_path.suffix.lower() != ".mp4":
        raise ValueError(f"{out_path.name}: render_scene writes .mp4 files")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(out_path), cv2.VideoWriter_fourcc(*"mp4v"), float(spec.fps), (spec.width, spec.height))
    if not writer.isOpened():
        raise OSError(f"{out_path}: OpenCV could not open an mp4v writer")
    n_p = len(spec.people)
    boxes = [[None] * spec.n_frames for _ in range(n_p)]
    visible = [[0.0] * spec.n_frames for _ in range(n_p)]
    dboxes = [[None] * spec.n_frames for _ in spec.distractors]
    # occluders[i][k]: frames on which person k covers at least OCCLUSION_FACT of person i
    occluders: list[dict[int, list[int]]] = [{} for _ in range(n_p)]
    try:
        for f, truth in enumerate(render_frames(spec)):
            writer.write(truth.frame)
            for i in range(n_p):
                boxes[i][f] = truth.boxes[i]
                visible[i][f] = truth.visible[i]
                for k, frac in truth.hidden_by[i].items():
                    if frac >= OCCLUSION_FACT:
                        occluders[i].setdefault(k, []).append(f)
            for j, b in enumerate(truth.distractor_boxes):
                dboxes[j][f] = b
    finally:
        writer.release()
    dresses = [dress_of(spec, i) for i in range(n_p)]
    states = [_person_states(spec, p, d) for p, d in zip(spec.people, dresses, strict=True)]
    zoom = footage_of(spec).zoom
    objects = place_objects(spec)
    surface = surface_of(spec, objects)
    gain = FIGURE_NIGHT_GAIN if "night" in spec.conditions else 1.0
    people = []
    for i, p in enumerate(spec.people):
        context = person_context(spec, states[i], boxes[i], objects, surface)
        moving_speeds = []
        for f in range(1, spec.n_frames):
            a, b = states[i][f - 1], states[i][f]
            if a.moving and b.exists and boxes[i][f] is not None:
                moving_speeds.append(math.hypot(b.x - a.x, b.y - a.y) * spec.fps * zoom)
        speed_px_s = float(np.median(moving_speeds)) if moving_speeds else 0.0
        stops = [(a, min(b, spec.n_frames)) for a, b in p.stops if a < spec.n_frames]
        people.append(PersonTruth(
            id=i, upper_colour=p.upper, lower_colour=p.lower, upper_bgr=_shade(dresses[i].upper, gain),
            lower_bgr=_shade(dresses[i].lower, gain), direction=p.direction, speed_px_s=round(speed_px_s, 3),
            speed_word=p.speed if p.direction != "none" else "none", stops=stops, boxes=boxes[i],
            visible=visible[i], facts=person_facts(i, spec, states[i], boxes[i], boxes, occluders, context, objects),
            ground=context[0], near=context[1]))
    gt = GroundTruth(scene=spec.name, video=out_path.name, width=spec.width, height=spec.height,
                     fps=float(spec.fps), n_frames=spec.n_frames, people=people, distractor_boxes=dboxes,
                     background=spec.background, conditions=list(spec.conditions), objects=objects,
                     camera=[[round(float(v), 4) for v in row] for row in camera_path(spec, footage_of(spec))])
    gt.save(gt_path_for(out_path))
    return gt
