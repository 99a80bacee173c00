"""Category-prompted detectors: HOG people detector and background subtraction."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.tracking.base import TrackerConfigError
from models.backends.tracking.detectors import (
    KNOWN_CATEGORIES,
    HogPersonDetector,
    MovingObjectDetector,
    build_detector,
    nms,
)
from models.demo.coverage import box_iou
from models.media.video import FrameReader
from models.world.renderer import render_frames, render_scene


def _check_output(boxes, scores, frame):
    h, w = frame.shape[:2]
    assert boxes.dtype == np.float32 and scores.dtype == np.float32
    assert boxes.ndim == 2 and boxes.shape[1] == 4 and scores.shape == (len(boxes),)
    assert np.all(boxes[:, 0] >= 0) and np.all(boxes[:, 2] <= w) and np.all(boxes[:, 1] >= 0) and np.all(boxes[:, 3] <= h)
    assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1])
    assert np.all((scores >= 0) & (scores <= 1))


def _recall(gt, frames_and_dets, min_visible=0.95, iou=0.5):
    hits = total = 0
    for f, boxes in frames_and_dets:
        for p in gt.people:
            if p.boxes[f] is not None and p.visible[f] >= min_visible:
                total += 1
                hits += bool(len(boxes)) and box_iou(np.array(p.boxes[f]), boxes).max() >= iou
    return hits / max(total, 1), total


# -- factory and settings ------------------------------------------------------------------------
def test_unknown_category_lists_the_known_ones():
    with pytest.raises(TrackerConfigError, match="known categories") as err:
        build_detector("bicycle", {})
    for name in KNOWN_CATEGORIES:
        assert name in str(err.value)


def test_category_names_are_normalised():
    assert isinstance(build_detector("  Person ", {}), HogPersonDetector)
    assert isinstance(build_detector("moving   OBJECT", None), MovingObjectDetector)


@pytest.mark.parametrize("category, settings, message", [
    ("person", {"min_hieght": 80}, "unknown setting"),
    ("person", {"min_height": 5}, "min_height"),
    ("person", {"min_height": 100, "max_height": 50}, "max_height"),
    ("person", {"scale": 1.0}, "scale"),
    ("person", {"win_stride": [0, 8]}, "win_stride"),
    ("person", {"win_stride": [8.5, 8]}, "win_stride"),
    ("person", {"padding": [-8, 8]}, "padding"),
    ("person", {"nms_iou": 0}, "nms_iou"),
    ("person", {"box_trim": [0.2, 0.1, 0.6, 0.1]}, "box_trim"),
    ("person", {"group_threshold": True}, "group_threshold"),
    ("person", {"hit_threshold": float("nan")}, "hit_threshold"),
    ("moving object", {"blur": 4}, "blur"),
    ("moving object", {"history": 0}, "history"),
    ("moving object", {"learning_rate": 2}, "learning_rate"),
    ("moving object", {"min_area": 0.5, "max_area": 0.1}, "max_area"),
    ("moving object", {"detect_shadows": "yes"}, "detect_shadows"),
])
def test_bad_settings_are_rejected_with_the_setting_named(category, settings, message):
    with pytest.raises(ValueError, match=message):
        build_detector(category, settings)


def test_settings_from_json_lists_are_accepted():
    det = build_detector("person", {"win_stride": [16, 16], "box_trim": [0.2, 0.1, 0.2, 0.1], "max_height": 300})
    assert det.settings.win_stride == (16, 16)


@pytest.mark.parametrize("bad", [np.zeros((10, 10), np.uint8), np.zeros((10, 10, 3), np.float32), "frame"])
def test_detect_rejects_frames_that_are_not_bgr_uint8(bad):
    with pytest.raises(ValueError, match="BGR uint8"):
        build_detector("person", {}).detect(bad, 0)


# -- person (HOG) --------------------------------------------------------------------------------
def test_hog_finds_the_rendered_people(rendered_small):
    det = build_detector("person", {})
    with FrameReader(rendered_small.path) as reader:
        results = []
        for f in range(0, rendered_small.spec.n_frames, 4):
            frame = reader.read(f)
            boxes, scores = det.detect(frame, f)
            _check_output(boxes, scores, frame)
            results.append((f, boxes))
    recall, total = _recall(rendered_small.gt, results)
    assert total >= 25
    assert recall >= 0.85


def test_hog_stays_quiet_on_an_empty_scene(small_scene_spec):
    spec = small_scene_spec
    for seed in (0, 1, 2):
        empty = dataclasses.replace(spec, people=[], distractors=[], n_frames=1, seed=seed)
        frame = next(iter(render_frames(empty))).frame
        boxes, scores = build_detector("person", {}).detect(frame, 0)
        assert len(boxes) == 0, (seed, scores)


def test_hog_min_height_controls_the_smallest_person_found(rendered_small):
    # the smallest figure is ~125 px tall: asking for people of 200 px and more misses it
    with FrameReader(rendered_small.path) as reader:
        frame = reader.read(4)
    small_person = np.array(rendered_small.gt.people[2].boxes[4])
    boxes, _ = build_detector("person", {"min_height": 72}).detect(frame, 4)
    assert box_iou(small_person, boxes).max() >= 0.5
    boxes, _ = build_detector("person", {"min_height": 200}).detect(frame, 4)
    assert len(boxes) == 0 or box_iou(small_person, boxes).max() < 0.5


def test_hog_on_a_tiny_or_blank_frame_returns_empty_arrays():
    det = build_detector("person", {"min_height": 200})
    for frame in (np.zeros((40, 30, 3), np.uint8), np.full((360, 640, 3), 127, np.uint8)):
        boxes, scores = det.detect(frame, 0)
        assert boxes.shape == (0, 4) and scores.shape == (0,)
        assert boxes.dtype == np.float32 and scores.dtype == np.float32


def test_hog_finds_real_pedestrians(vtest_head):
    frame = vtest_head.read(50)
    boxes, scores = build_detector("person", {}).detect(frame, 50)
    _check_output(boxes, scores, frame)
    heights = boxes[:, 3] - boxes[:, 1]
    # several people walk on the plaza at frame 50, 70-110 px tall
    assert np.count_nonzero((heights > 50) & (heights < 160) & (scores > 0.5)) >= 4


# -- non-maximum suppression ---------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60), st.integers(1, 40), st.integers(1, 40),
                          st.floats(0, 1, allow_nan=False)), min_size=0, max_size=12),
       st.floats(0.1, 0.9), st.floats(0.5, 1.0))
def test_nms_against_its_definition(raw, iou_threshold, containment):
    boxes = np.array([[x, y, x + w, y + h] for x, y, w, h, _ in raw], np.float64).reshape(-1, 4)
    scores = np.array([s for *_, s in raw], np.float64)
    keep = nms(boxes, scores, iou_threshold, containment)
    order = list(np.argsort(-scores, kind="stable"))
    # reference: a plain loop over boxes in score order
    expected = []
    for i in order:
        ok = True
        for k in expected:
            iw = max(0, min(boxes[i, 2], boxes[k, 2]) - max(boxes[i, 0], boxes[k, 0]))
            ih = max(0, min(boxes[i, 3], boxes[k, 3]) - max(boxes[i, 1], boxes[k, 1]))
            inter = iw * ih
            area_i = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1])
            area_k = (boxes[k, 2] - boxes[k, 0]) * (boxes[k, 3] - boxes[k, 1])
            if inter / (area_i + area_k - inter) > iou_threshold or inter / area_i > containment:
                ok = False
                break
        if ok:
            expected.append(i)
    assert list(keep) == expected


# -- moving object (MOG2) ------------------------------------------------------------------------
# MOG2 is a detector for a still camera: these tests render the small scene under the still, even
# camera (variation 0). Through the rendered world's panning, shaking camera and its moving
# background band it finds a quarter of the people and fires on the empty scene (the tracker
# benchmarks measure what that costs).
def test_background_subtraction_finds_the_movers_including_the_ball(small_scene_spec, tmp_path):
    path = tmp_path / "still.mp4"
    gt = render_scene(dataclasses.replace(small_scene_spec, variation=0.0), path)
    det = build_detector("moving object", {})
    with FrameReader(path) as reader:
        det.prime([reader.read(i) for i in range(0, gt.n_frames, 3)])
        results, ball_hits, ball_total = [], 0, 0
        for f, frame in reader.iter_frames():
            boxes, scores = det.detect(frame, f)
            _check_output(boxes, scores, frame)
            results.append((f, boxes))
            ball = gt.distractor_boxes[0][f]
            if ball is not None:
                ball_total += 1
                ball_hits += bool(len(boxes)) and box_iou(np.array(ball), boxes).max() >= 0.3
    recall, total = _recall(gt, results)
    assert total >= 100 and recall >= 0.8
    assert ball_total >= 40 and ball_hits / ball_total >= 0.7


def test_background_subtraction_is_quiet_on_a_static_scene(small_scene_spec):
    spec = dataclasses.replace(small_scene_spec, people=[], distractors=[], n_frames=16, variation=0.0)
    frames = [t.frame for t in render_frames(spec)]
    det = build_detector("moving object", {})
    det.prime(frames[::2])
    assert sum(len(det.detect(f, i)[0]) for i, f in enumerate(frames)) == 0


def test_background_subtraction_needs_frames_in_order():
    frame = np.zeros((120, 160, 3), np.uint8)
    det = build_detector("moving object", {})
    det.detect(frame, 5)
    det.detect(frame, 9)  # gaps are fine
    with pytest.raises(ValueError, match="increasing order"):
        det.detect(frame, 9)
    with pytest.raises(ValueError, match="increasing order"):
        det.detect(frame, 3)
    with pytest.raises(ValueError, match="prime"):
        det.prime([frame])
    with pytest.raises(ValueError, match="differs from the first frame"):
        det.detect(np.zeros((60, 80, 3), np.uint8), 10)
    det.reset()
    det.prime([frame])
    det.detect(frame, 0)
    assert det.stateful and not build_detector("person", {}).stateful


def test_background_subtraction_area_filter():
    # a 30x60 moving block on a 320x240 frame (2.3% of it) is found unless min_area excludes it
    rng = np.random.default_rng(0)
    background = rng.integers(90, 110, (240, 320, 3)).astype(np.uint8)

    def frame_at(x):
        f = background.copy()
        f[100:160, x:x + 30] = (20, 200, 240)
        return f

    for min_area, expected in ((0.01, 1), (0.05, 0)):
        det = build_detector("moving object", {"min_area": min_area, "max_area": 0.5})
        det.prime([background] * 5)
        found = [len(det.detect(frame_at(20 + 10 * i), i)[0]) for i in range(5)]
        assert found == [expected] * 5
        if expected:
            boxes, _ = det.detect(frame_at(80), 5)
            assert box_iou(boxes, np.array([[80, 100, 110, 160]])).max() > 0.8
