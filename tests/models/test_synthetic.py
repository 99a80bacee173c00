"""The synthetic-video renderer: its ground truth must say where the pixels really are."""
from __future__ import annotations

import dataclasses
import json

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.demo.coverage import box_iou, people_coverage
from models.media.video import FrameReader, probe_video
from models.world.figures import ground_row
from models.world.footage import camera_path, dress_of, footage_of, light_map, shadow_map
from models.world.palette import COLOURS
from models.world.renderer import render_frames, render_scene
from models.world.scene import GroundTruth, PersonSpec, SceneSpec, demo_scenes, gt_path_for


def _frames(spec: SceneSpec) -> list:
    return list(render_frames(spec))


def _no_noise(spec: SceneSpec, **changes) -> SceneSpec:
    return dataclasses.replace(spec, noise=0.0, **changes)


def _background_frame(spec: SceneSpec) -> np.ndarray:
    return _frames(dataclasses.replace(spec, people=[], distractors=[], n_frames=1))[0].frame


def _pixel_box(diff: np.ndarray):
    ys, xs = np.nonzero(diff)
    return [float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)]


def _one_person(**kw) -> SceneSpec:
    """One person under the still, even camera (variation 0) unless ``variation`` says otherwise:
    the geometry tests compare pixels exactly (test_world_footage follows the boxes through a
    moving camera, light, blur and compression)."""
    person = PersonSpec(kw.pop("upper", "red"), kw.pop("lower", "blue"), kw.pop("direction", "right"),
                        start=kw.pop("start", (200, 300)), height=kw.pop("height", 150), **kw.pop("person", {}))
    return SceneSpec(name="one", width=480, height=360, fps=10, n_frames=kw.pop("n_frames", 12), seed=3,
                     people=[person], noise=0.0, variation=kw.pop("variation", 0.0), **kw)


# -- ground truth against pixels -----------------------------------------------------------------
@pytest.mark.parametrize("direction", ["left", "right", "towards", "away", "none"])
def test_gt_box_is_the_extent_of_the_drawn_pixels(direction):
    # given a noise-free scene with one person, and the same scene without the person
    spec = _one_person(direction=direction)
    background = _background_frame(spec)
    for truth in _frames(spec):
        # then the GT box is exactly where the rendered frame differs from the background
        diff = np.any(truth.frame != background, axis=2)
        assert diff.any()
        assert truth.boxes[0] == pytest.approx(_pixel_box(diff), abs=1e-6)
        assert truth.visible[0] == pytest.approx(1.0)


def test_gt_box_is_clipped_and_visible_fraction_counts_the_cut_off_part():
    # given a person half out of the left edge (the foot point is on the edge)
    spec = _one_person(start=(0, 300), direction="none", n_frames=1)
    background = _background_frame(spec)
    truth = _frames(spec)[0]
    diff = np.any(truth.frame != background, axis=2)
    # then the box is clipped to the frame and still fits the visible pixels
    assert truth.boxes[0][0] == 0.0
    assert truth.boxes[0] == pytest.approx(_pixel_box(diff), abs=1e-6)
    # and the visible fraction is the on-screen share of the full silhouette
    full = _frames(_one_person(start=(200, 300), direction="none", n_frames=1))[0]
    full_area = np.count_nonzero(np.any(full.frame != background, axis=2))
    assert truth.visible[0] == pytest.approx(np.count_nonzero(diff) / full_area, abs=0.02)
    assert 0.3 < truth.visible[0] < 0.7


def test_person_entirely_outside_the_frame_has_no_box():
    spec = _one_person(start=(-300, 300), direction="none", n_frames=1)
    truth = _frames(spec)[0]
    assert truth.boxes[0] is None and truth.visible[0] == 0.0


def test_visible_fraction_matches_masks_rendered_separately():
    # given a far person (foot y 260) and a near person (foot y 320) overlapping
    far = PersonSpec("green", "grey", "none", start=(240, 260), height=130)
    near = PersonSpec("yellow", "black", "none", start=(265, 320), height=160)
    both = SceneSpec(name="two", width=480, height=360, fps=10, n_frames=1, seed=5, people=[far, near], noise=0.0,
                     variation=0.0)
    background = _background_frame(both)
    far_mask = np.any(_frames(dataclasses.replace(both, people=[far]))[0].frame != background, axis=2)
    near_mask = np.any(_frames(dataclasses.replace(both, people=[near]))[0].frame != background, axis=2)
    truth = _frames(both)[0]
    # then the far person's visible fraction is its pixels not under the near person
    expected = np.count_nonzero(far_mask & ~near_mask) / np.count_nonzero(far_mask)
    assert truth.visible[0] == pytest.approx(expected, abs=0.01)
    assert truth.visible[1] == pytest.approx(1.0)
    assert truth.hidden_by[0][1] == pytest.approx(1 - expected, abs=0.01)
    assert truth.hidden_by[1] == {}
    # and the near person is drawn on top: its torso colour is where both overlap
    overlap = far_mask & near_mask
    assert overlap.any()
    assert np.any(np.all(truth.frame[overlap] == COLOURS["yellow"], axis=1))
    assert not np.any(np.all(truth.frame[overlap] == COLOURS["green"], axis=1))


def test_a_person_passing_behind_another_is_occluded_then_visible_again():
    walker = PersonSpec("blue", "grey", "right", start=(60, 270), height=130, speed="fast")
    stander = PersonSpec("red", "black", "none", start=(240, 330), height=170)
    # (through the camera's zoom the walker reaches the right edge after 19 frames)
    spec = SceneSpec(name="behind", width=480, height=360, fps=10, n_frames=19, seed=2, people=[walker, stander])
    vis = np.array([t.visible[0] for t in _frames(spec)])
    assert vis[0] > 0.95 and vis[-1] > 0.95
    assert vis.min() < 0.5
    # the walker passes behind: nothing of the stander is hidden by it (the pole near the camera,
    # standing still in front of both, hides the same share of the stander on every frame)
    frames = _frames(spec)
    assert all(t.hidden_by[1] == {} for t in frames)
    assert len({t.visible[1] for t in frames}) == 1 and frames[0].visible[1] > 0.5


@pytest.mark.parametrize("variation", [0.0, 1.0])
def test_motion_follows_the_spec(variation):
    # right/left move the box horizontally, towards/away change its size, stops freeze it; boxes
    # are taken back to the scene's reference view through the camera (it pans and shakes)
    def centres_and_heights(spec):
        boxes = np.array([t.boxes[0] for t in _frames(spec)])
        camera = np.array(camera_path(spec, footage_of(spec)))                 # [n, 3] (s, tx, ty)
        s, tx, ty = camera[:, 0:1], camera[:, 1:2], camera[:, 2:3]
        boxes = (boxes - np.hstack([tx, ty, tx, ty])) / s
        return (boxes[:, 0] + boxes[:, 2]) / 2, boxes[:, 3] - boxes[:, 1], boxes[:, 3]

    cx, _, _ = centres_and_heights(_one_person(direction="right", variation=variation))
    assert cx[-1] - cx[0] > 50
    cx, _, _ = centres_and_heights(_one_person(direction="left", start=(400, 300), variation=variation))
    assert cx[0] - cx[-1] > 50
    _, h, bottom = centres_and_heights(_one_person(direction="towards", start=(240, 240), n_frames=30,
                                                   variation=variation))
    assert h[-1] > h[0] + 5 and bottom[-1] > bottom[0] + 10
    _, h, bottom = centres_and_heights(_one_person(direction="away", start=(240, 340), n_frames=30,
                                                   variation=variation))
    assert h[-1] < h[0] - 5 and bottom[-1] < bottom[0] - 10
    stopped = _one_person(direction="right", n_frames=30, person={"stops": [(10, 20)]}, variation=variation)
    cx, _, _ = centres_and_heights(stopped)
    assert np.ptp(cx[12:20]) < 3          # standing (the legs close within two frames)
    assert cx[9] - cx[0] > 30 and cx[29] - cx[20] > 30


def test_speed_words_order_the_speeds(tmp_path):
    people = [PersonSpec(c, "grey", "right", start=(40, 200 + 40 * i), height=100, speed=w)
              for i, (c, w) in enumerate([("red", "slow"), ("blue", "normal"), ("green", "fast")])]
    spec = SceneSpec(name="speeds", width=640, height=360, fps=10, n_frames=10, seed=1, people=people)
    gt = render_scene(spec, tmp_path / "speeds.mp4")
    speeds = [p.speed_px_s for p in gt.people]
    assert speeds[0] < speeds[1] < speeds[2]
    assert [p.speed_word for p in gt.people] == ["slow", "normal", "fast"]
    # normal pace: 0.7 figure heights per second times the person's own pace (the foot point
    # moves, the height is fixed), in frame pixels through the camera's zoom
    pace, zoom = dress_of(spec, 1).pace, footage_of(spec).zoom
    assert 0.85 < pace < 1.15 and pace != 1.0
    assert speeds[1] == pytest.approx(70.0 * pace * zoom, rel=0.02)


# -- the file ------------------------------------------------------------------------------------
def test_rendered_video_decodes_and_gt_is_saved_next_to_it(rendered_small):
    spec, path, gt = rendered_small.spec, rendered_small.path, rendered_small.gt
    info = probe_video(path)
    assert (info.frame_count, info.width, info.height) == (spec.n_frames, spec.width, spec.height)
    assert info.fps == pytest.approx(spec.fps)
    assert gt_path_for(path).is_file()
    assert GroundTruth.load(gt_path_for(path)) == gt
    cap = cv2.VideoCapture(str(path))
    decoded = 0
    while cap.read()[0]:
        decoded += 1
    cap.release()
    assert decoded == spec.n_frames
    with FrameReader(path) as reader:
        assert reader.frame_count == spec.n_frames
        late = reader.read(spec.n_frames - 1)     # a seek, then a step back
        early = reader.read(3)
        assert late.shape == early.shape == (spec.height, spec.width, 3)


def test_decoded_frames_show_the_clothing_colours_inside_the_gt_boxes(rendered_small):
    # the torso (25-45% of the box height, central third) shows the upper colour, the thighs
    # (60-70%) the lower colour, in the scene's light, after JPEG and mp4v compression and noise
    gt, spec = rendered_small.gt, rendered_small.spec
    footage = footage_of(spec)
    light = light_map(spec, footage)             # [H, W, 3] gains of the frame
    shade = shadow_map(spec, footage, ground_row(spec.background, spec.height))  # [H, W, 3] of the reference view
    assert light is not None and shade is not None

    def lit(bgr, f: int, x: int, y: int) -> np.ndarray:
        s, tx, ty = gt.camera[f]
        return np.asarray(bgr) * light[y, x] * shade[round((y - ty) / s), round((x - tx) / s)]

    with FrameReader(rendered_small.path) as reader:
        for f in (5, 40):
            frame = reader.read(f).astype(np.float64)
            for p in gt.people:
                if p.visible[f] < 0.99:
                    continue
                x1, y1, x2, y2 = p.boxes[f]
                w, h = x2 - x1, y2 - y1
                xa, xb = int(x1 + w * 0.4), int(x2 - w * 0.4) + 1
                ya, yb = int(y1 + 0.25 * h), int(y1 + 0.45 * h)
                torso = frame[ya:yb, xa:xb].reshape(-1, 3)
                expected = lit(p.upper_bgr, f, (xa + xb) // 2, (ya + yb) // 2)
                assert np.abs(np.median(torso, axis=0) - expected).max() < 40, (f, p.id)
                ya, yb = int(y1 + 0.6 * h), int(y1 + 0.68 * h)
                thighs = frame[ya:yb, xa:xb].reshape(-1, 3)
                expected = lit(p.lower_bgr, f, (xa + xb) // 2, (ya + yb) // 2)
                assert np.abs(np.median(thighs, axis=0) - expected).max() < 45, (f, p.id)


def test_small_scene_facts(rendered_small):
    gt = rendered_small.gt
    facts = {p.id: {(f.kind, f.name, f.value) for f in p.facts} for p in gt.people}
    assert ("attribute", "upper_colour", "red") in facts[0]
    assert ("attribute", "lower_colour", "blue") in facts[0]
    assert ("event", "walks", "left") in facts[1]
    assert ("event", "stands", "still") in facts[2]
    # the yellow person walks in front of the red one, and both pass in front of the white one
    assert ("event", "occluded_by", "person 1") in facts[0]
    assert ("event", "passes_in_front_of", "person 0") in facts[1]
    assert ("event", "occluded_by", "person 0") in facts[2]
    stands = [f for f in gt.people[2].facts if f.name == "stands"]
    assert [(f.start_frame, f.end_frame) for f in stands] == [(12, 30)]
    assert gt.people[2].stops == [(12, 30)]
    for p in gt.people:
        for f in p.facts:
            assert 0 <= f.start_frame < f.end_frame <= gt.n_frames


def test_enter_and_leave_facts(tmp_path):
    spec = SceneSpec(name="pass", width=480, height=360, fps=10, n_frames=60, seed=4, people=[
        PersonSpec("purple", "grey", "right", start=(-60, 320), height=140, speed="fast")])
    gt = render_scene(spec, tmp_path / "pass.mp4")
    p = gt.people[0]
    assert p.boxes[0] is None
    frames = p.frames()
    assert frames[0] > 0 and frames[-1] < gt.n_frames - 1
    events = {(f.name, f.value): (f.start_frame, f.end_frame) for f in p.facts if f.kind == "event"}
    assert events[("enters", "from the left")] == (frames[0], frames[0] + 1)
    assert events[("leaves", "to the right")] == (frames[-1], frames[-1] + 1)


# -- specs, scenes, serialisation ----------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    ({"people": [PersonSpec("teal", "grey", "left", start=(10, 300))]}, "unknown colour"),
    ({"people": [PersonSpec("red", "grey", "sideways", start=(10, 300))]}, "unknown direction"),
    ({"people": [PersonSpec("red", "grey", "left", start=(10, 300), speed="brisk")]}, "unknown speed"),
    ({"people": [PersonSpec("red", "grey", "left", start=(10, 300), stops=[(5, 5)])]}, "stop interval"),
    ({"people": [PersonSpec("red", "grey", "left", start=(10, 300), enter_frame=5, exit_frame=5)]}, "exit_frame"),
    ({"background": "moon"}, "unknown background"),
    ({"n_frames": 0}, "n_frames"),
    ({"fps": 0}, "fps"),
])
def test_bad_specs_are_rejected(change, message, tmp_path):
    spec = dataclasses.replace(_one_person(), **change)
    with pytest.raises(ValueError, match=message):
        render_scene(spec, tmp_path / "bad.mp4")


def test_render_scene_writes_mp4_only(tmp_path):
    with pytest.raises(ValueError, match=".mp4"):
        render_scene(_one_person(), tmp_path / "x.avi")


def test_rendering_is_deterministic():
    spec = dataclasses.replace(_one_person(n_frames=3, variation=1.0), noise=3.0)
    a, b = _frames(spec), _frames(spec)
    assert all(np.array_equal(x.frame, y.frame) for x, y in zip(a, b))
    other = _frames(dataclasses.replace(spec, seed=spec.seed + 1))
    assert not np.array_equal(a[0].frame, other[0].frame)


def test_background_is_textured():
    frame = _background_frame(_one_person())
    grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY).astype(np.float64)
    # not flat: strong local structure and a spread of grey levels everywhere
    assert grey.std() > 10
    assert np.abs(cv2.Laplacian(grey, cv2.CV_64F)).mean() > 1.0
    for block in (grey[:120, :160], grey[240:, 320:]):
        assert block.std() > 2


def test_demo_scenes_fit_their_purpose():
    scenes = demo_scenes(seed=0)
    assert 3 <= len(scenes) <= 4
    assert len({s.name for s in scenes}) == len(scenes)
    for s in scenes:
        s.validate()
        assert (s.width, s.height) in {(640, 360), (960, 540)}
        assert 10 <= s.fps <= 15 and 100 <= s.n_frames <= 200
        assert 3 <= len(s.people) <= 6
        # every person is told apart by clothing: no two share an (upper, lower) pair
        assert len({(p.upper, p.lower) for p in s.people}) == len(s.people)
        assert all(110 <= p.height <= 220 for p in s.people)
    directions = {p.direction for s in scenes for p in s.people}
    assert {"left", "right", "towards", "away"} <= directions
    assert any(p.stops for s in scenes for p in s.people)
    assert demo_scenes(seed=0) == scenes and demo_scenes(seed=1) != scenes


@settings(max_examples=25, deadline=None)
@given(boxes=st.lists(st.one_of(st.none(), st.tuples(*[st.floats(0, 500, allow_nan=False)] * 4)), min_size=1, max_size=5),
       visible=st.floats(0, 1, allow_nan=False))
def test_ground_truth_json_round_trip(boxes, visible):
    gt = GroundTruth.from_json(_tiny_gt_json(boxes, visible))
    again = GroundTruth.from_json(gt.to_json())
    assert again == gt
    assert json.loads(again.to_json()) == json.loads(gt.to_json())


def _tiny_gt_json(boxes, visible) -> str:
    person = {"id": 0, "upper_colour": "red", "lower_colour": "blue", "upper_bgr": [1, 2, 3],
              "lower_bgr": [4, 5, 6], "direction": "left", "speed_px_s": 1.5, "speed_word": "slow",
              "stops": [[1, 2]], "boxes": [list(b) if b else None for b in boxes],
              "visible": [visible] * len(boxes),
              "facts": [{"kind": "event", "name": "walks", "value": "left", "start_frame": 0, "end_frame": 1}]}
    return json.dumps({"scene": "s", "video": "s.mp4", "width": 10, "height": 10, "fps": 5.0,
                       "n_frames": len(boxes), "people": [person], "distractor_boxes": []})


# -- evaluation helpers --------------------------------------------------------------------------
def test_box_iou_against_a_loop():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 50, (7, 2))
    a = np.hstack([a, a + rng.uniform(1, 30, (7, 2))])
    b = rng.uniform(0, 50, (5, 2))
    b = np.hstack([b, b + rng.uniform(1, 30, (5, 2))])
    got = box_iou(a, b)
    for i in range(len(a)):
        for j in range(len(b)):
            iw = max(0.0, min(a[i, 2], b[j, 2]) - max(a[i, 0], b[j, 0]))
            ih = max(0.0, min(a[i, 3], b[j, 3]) - max(a[i, 1], b[j, 1]))
            union = (a[i, 2] - a[i, 0]) * (a[i, 3] - a[i, 1]) + (b[j, 2] - b[j, 0]) * (b[j, 3] - b[j, 1]) - iw * ih
            assert got[i, j] == pytest.approx(iw * ih / union)


def test_people_coverage(rendered_small):
    gt = rendered_small.gt
    perfect = [(p.frames(), p.boxes_array()[p.frames()]) for p in gt.people]
    assert people_coverage(gt, perfect)["coverage"] == 1.0
    # a track that follows person 0 on only the first 40% of its visible frames does not count
    p0 = gt.people[0]
    vis = [f for f in p0.frames() if p0.visible[f] >= 0.5]
    part = np.array(vis[: int(0.4 * len(vis))])
    res = people_coverage(gt, [(part, p0.boxes_array()[part]), *perfect[1:]])
    assert res["covered"] == 2 and res["per_person"][0] == pytest.approx(len(part) / len(vis))
    # boxes shifted by a box width match nobody
    shifted = [(f, b + np.array([1, 0, 1, 0]) * (b[:, 2:3] - b[:, 0:1])) for f, b in perfect]
    assert people_coverage(gt, shifted)["covered"] == 0
