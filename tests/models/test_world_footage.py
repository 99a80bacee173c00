"""The world varies like footage (models.world.footage), seeded, and its truth is what was drawn:
the same seed renders the same frames, two seeds differ in light and camera, a truth box stays on
the drawn person through zoom, pan and shake, clothing colours stay in their named colour's
range, and a person walking behind the pole near the camera loses visibility."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from models.world.footage import camera_path, dress_of, footage_of
from models.world.palette import COLOURS, colour_range_holds, sample_colour
from models.world.renderer import render_frames
from models.world.scene import PersonSpec, SceneSpec


def _scene(seed: int, people: list[PersonSpec], n_frames: int = 16, **kw) -> SceneSpec:
    return SceneSpec(name=f"footage{seed}", width=320, height=180, fps=12, n_frames=n_frames, seed=seed,
                     background=kw.pop("background", "plaza"), people=people, **kw)


def _walker(**kw) -> PersonSpec:
    args = {"upper": "red", "lower": "blue", "direction": "right", "start": (60.0, 150.0), "height": 80.0}
    return PersonSpec(**(args | kw))


def test_the_same_seed_renders_byte_identical_frames_and_truth():
    spec = _scene(3, [_walker(), _walker(upper="green", direction="left", start=(280.0, 165.0))])
    first = list(render_frames(spec))
    second = list(render_frames(dataclasses.replace(spec)))
    for a, b in zip(first, second, strict=True):
        assert a.frame.tobytes() == b.frame.tobytes()
        assert (a.boxes, a.visible, a.hidden_by) == (b.boxes, b.visible, b.hidden_by)


def test_two_seeds_differ_in_light_and_camera():
    a, b = footage_of(_scene(0, [])), footage_of(_scene(1, []))
    assert a.gains != b.gains and a.gradient != b.gradient
    assert a.zoom != b.zoom and a.pan != b.pan
    path_a, path_b = camera_path(_scene(0, []), a), camera_path(_scene(1, []), b)
    assert not np.allclose(path_a, path_b)
    # the camera moves within a clip (pan and shake), and stays inside the reference view
    assert np.ptp(path_a[:, 1]) > 0.5
    for path, spec in ((path_a, _scene(0, [])), (path_b, _scene(1, []))):
        s, tx, ty = path[:, 0], path[:, 1], path[:, 2]
        assert (s >= 1.0).all() and (tx <= 0).all() and (ty <= 0).all()
        assert (s * spec.width + tx >= spec.width).all() and (s * spec.height + ty >= spec.height).all()
    frames_a = next(iter(render_frames(_scene(0, []))))
    frames_b = next(iter(render_frames(_scene(1, []))))
    assert np.abs(frames_a.frame.astype(int) - frames_b.frame.astype(int)).mean() > 5


def test_variation_zero_is_a_still_even_camera():
    spec = _scene(4, [_walker()], variation=0.0)
    footage = footage_of(spec)
    assert footage.zoom == 1.0 and footage.quality == 0 and footage.occluder is None and footage.sway == 0
    assert np.array_equal(camera_path(spec, footage), np.tile([1.0, 0.0, 0.0], (spec.n_frames, 1)))
    assert dress_of(spec, 0).upper == COLOURS["red"]


@pytest.mark.parametrize("direction,start", [("right", (40.0, 150.0)), ("towards", (170.0, 110.0))])
def test_a_truth_box_stays_on_the_drawn_person_through_the_camera(direction, start):
    # the same scene without the person: the same background, camera, light and noise draws
    people = [_walker(direction=direction, start=start, upper="orange", lower="purple", speed="fast")]
    for seed in range(40):                                  # a seed whose pole (if any) is away from the walker
        spec = _scene(seed, people, n_frames=24)
        pole = footage_of(spec).occluder
        if pole is None or not 0.1 < pole[0] < 0.7:
            break
    empty = dataclasses.replace(spec, people=[])
    assert np.ptp(camera_path(spec, footage_of(spec))[:, 1]) > 0.5          # the camera moves
    heights = []
    for f, (drawn, bare) in enumerate(zip(render_frames(spec), render_frames(empty), strict=True)):
        box = drawn.boxes[0]
        if box is None or f % 4:
            continue
        diff = np.abs(drawn.frame.astype(np.float32) - bare.frame.astype(np.float32)).mean(axis=2)  # [H, W]
        x1, y1, x2, y2 = (round(v) for v in box)
        inside = diff[y1:y2, x1:x2].mean()
        margin = 8                                           # motion blur and JPEG blocks reach a few pixels out
        outside = np.ones(diff.shape, bool)
        outside[max(0, y1 - margin):y2 + margin, max(0, x1 - margin):x2 + margin] = False
        assert inside > 25, (f, box, inside)
        assert diff[outside].mean() < 1.5, (f, box, diff[outside].mean())
        heights.append(y2 - y1)
    assert len(heights) >= 3
    if direction == "towards":                               # perspective: nearer is taller
        assert heights[-1] > heights[0] * 1.1, heights


def test_clothing_samples_stay_in_their_named_colours_range():
    rng = np.random.default_rng(0)
    for name in COLOURS:
        samples = [sample_colour(name, rng) for _ in range(60)]
        assert all(colour_range_holds(name, s) for s in samples), name
        assert len(set(samples)) > 30, name                   # continuous: not a handful of values
    assert not colour_range_holds("red", COLOURS["orange"])
    # what a rendered person wears is such a sample, and the truth keeps the name and the value
    spec = _scene(5, [_walker(upper="yellow", lower="brown"), _walker(upper="yellow", lower="brown", start=(100.0, 160.0))])
    dresses = [dress_of(spec, i) for i in range(2)]
    assert dresses[0].upper != dresses[1].upper != COLOURS["yellow"]
    assert all(colour_range_holds("yellow", d.upper) and colour_range_holds("brown", d.lower) for d in dresses)
    assert dresses[0].build != dresses[1].build and dresses[0].pace != dresses[1].pace


def test_visibility_drops_behind_the_pole_near_the_camera():
    for seed in range(60):
        spec = _scene(seed, [], n_frames=60)
        pole = footage_of(spec).occluder
        if pole is not None and 0.35 < pole[0] < 0.65:
            break
    else:
        pytest.fail("no seed in 0..59 draws a pole in the middle")
    spec = dataclasses.replace(spec, people=[_walker(start=(20.0, 160.0), speed="fast")])
    camera = camera_path(spec, footage_of(spec))
    before, behind = [], []
    for truth, (s, tx, _) in zip(render_frames(spec), camera, strict=True):
        pole_x = s * pole[0] * spec.width + tx                # where the pole is on this frame
        box = truth.boxes[0]
        if box is None or box[0] <= 1 or box[2] >= spec.width - 1:
            continue
        centre = (box[0] + box[2]) / 2
        (behind if abs(centre - pole_x) < 4 else before if box[2] < pole_x - 20 else []).append(truth.visible[0])
    assert before and behind
    assert min(before) > 0.97
    assert max(behind) < 0.85, behind
