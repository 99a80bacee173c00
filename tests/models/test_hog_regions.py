"""HOG on regions of interest: motion blobs, person regions, merging, and the detector's schedule."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.tracking import resolve_tracker_settings
from models.backends.tracking.detectors import HogPersonDetector, HogPersonSettings, build_detector
from models.backends.tracking.hog_bytetrack import HogByteTrackConfig, default_config
from models.backends.tracking.regions import (
    MotionBlobs,
    merge_regions,
    person_regions,
    scanned_fraction,
)
from models.demo.coverage import box_iou
from models.media.video import FrameReader
from models.world.renderer import render_scene


def _area(r) -> float:
    return (r[2] - r[0]) * (r[3] - r[1])


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


# -- merge_regions and person_regions --------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200), st.integers(1, 80), st.integers(1, 80)),
                min_size=0, max_size=14))
def test_merged_regions_cover_every_box_and_leave_no_pair_worth_merging(raw):
    boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in raw], np.float64).reshape(-1, 4)
    out = merge_regions(boxes)
    assert out.shape[1] == 4 and len(out) <= len(boxes)
    for b in boxes:  # every box lies inside one region
        assert any(r[0] <= b[0] and r[1] <= b[1] and b[2] <= r[2] and b[3] <= r[3] for r in out), b
    for i in range(len(out)):  # no two regions that overlap would be cheaper as one
        for j in range(i + 1, len(out)):
            a, b = out[i], out[j]
            if _overlap(a, b):
                union = (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))
                assert _area(union) > _area(a) + _area(b)
    assert [tuple(r[[1, 0]]) for r in out] == sorted(tuple(r[[1, 0]]) for r in out)


def test_merging_joins_overlapping_boxes_and_keeps_distant_ones_apart():
    out = merge_regions(np.array([[0, 0, 10, 10], [2, 2, 12, 12], [100, 100, 110, 110]]))
    assert out.tolist() == [[0, 0, 12, 12], [100, 100, 110, 110]]
    # two long thin boxes crossing: their bounding box would be mostly empty, so they stay two
    cross = merge_regions(np.array([[0, 45, 100, 55], [45, 0, 55, 100]]))
    assert len(cross) == 2
    assert merge_regions(np.zeros((0, 4))).shape == (0, 4)


def test_person_regions_grow_by_the_margin_of_a_person_height_and_stay_in_the_frame():
    boxes = np.array([[100, 100, 140, 200],    # a whole person, 100 px tall
                      [300, 150, 320, 170],    # a blob 20 px tall: counts as min_height (60) tall
                      [5, 5, 30, 80]])         # near the corner
    out = person_regions(boxes, min_height=60, margin=0.5, width=400, height=300)
    assert out[0].tolist() == [50, 50, 190, 250]
    assert out[1].tolist() == [270, 100, 350, 220]      # centre 160, 60 tall, 30 px on every side
    assert out[2].tolist() == [0, 0, 67.5, 117.5]
    assert scanned_fraction(np.array([[0, 0, 200, 150]]), 400, 300) == pytest.approx(0.25)


# -- the background model ------------------------------------------------------------------------
FLOOR = np.full((240, 320, 3), 100, np.uint8) + np.random.default_rng(0).integers(0, 4, (240, 320, 3)).astype(np.uint8)


def _scene(x: int) -> np.ndarray:
    frame = FLOOR.copy()
    frame[100:180, x:x + 30] = (30, 200, 240)
    return frame


def test_motion_blobs_find_a_moving_block_once_the_background_is_learnt():
    blobs = MotionBlobs(downscale=4, var_threshold=16.0)
    first = blobs.update(_scene(20))
    assert len(first) == 1 and first[0].tolist() == [0, 0, 320, 240]  # nothing learnt: all foreground
    for k in range(1, 30):
        found = blobs.update(_scene(20 + 6 * k))
    block = np.array([20 + 6 * 29, 100, 50 + 6 * 29, 180], np.float64)
    assert len(found) >= 1 and box_iou(block, found).max() > 0.4, found
    with pytest.raises(ValueError, match="differs from the first frame"):
        blobs.update(np.zeros((120, 160, 3), np.uint8))
    blobs.reset()
    assert len(blobs.update(np.zeros((120, 160, 3), np.uint8))) == 1


# -- the detector --------------------------------------------------------------------------------
@pytest.mark.parametrize("change, message", [
    ({"regions": "tiles"}, "regions"),
    ({"full_frame_every": 0}, "full_frame_every"),
    ({"full_frame_every": 2.5}, "full_frame_every"),
    ({"motion_downscale": 0}, "motion_downscale"),
    ({"motion_downscale": True}, "motion_downscale"),
    ({"motion_var_threshold": -1}, "motion_var_threshold"),
    ({"region_margin": float("nan")}, "region_margin"),
    ({"max_region_fraction": 0}, "max_region_fraction"),
    ({"region_memory": -1}, "region_memory"),
])
def test_bad_region_settings_are_rejected_with_the_setting_named(change, message):
    with pytest.raises(ValueError, match=message):
        build_detector("person", change)
    with pytest.raises(ValueError, match=message):
        HogByteTrackConfig.from_dict({"detectors": {"person": change}})


def test_scanning_the_whole_frame_as_one_region_is_the_frame_mode(rendered_small):
    with FrameReader(rendered_small.path) as reader:
        frame = reader.read(8)
    det = build_detector("person", {})
    boxes, scores = det.detect(frame, 8)
    again, again_scores = det.scan(frame, np.array([[0, 0, frame.shape[1], frame.shape[0]]]))
    assert len(boxes) >= 2 and np.array_equal(boxes, again) and np.array_equal(scores, again_scores)
    # a region around one person finds that person again
    region = person_regions(boxes[:1], min_height=72, margin=0.25, width=frame.shape[1], height=frame.shape[0])
    inside, _ = det.scan(frame, region)
    assert len(inside) >= 1 and box_iou(boxes[0], inside).max() >= 0.8


@pytest.mark.parametrize("variation", [0.0, 1.0], ids=["still-camera", "moving-camera"])
def test_motion_regions_find_what_the_whole_frame_finds_scanning_less(small_scene_spec, tmp_path, variation):
    # the regions come from background subtraction, built for a still camera: there they scan less
    # than a quarter of the frame's area away; under the rendered world's pan, shake and moving
    # band they still find what the whole frame finds, scanning more of it
    path = tmp_path / "small.mp4"
    render_scene(dataclasses.replace(small_scene_spec, variation=variation), path)
    whole, motion = build_detector("person", {}), build_detector("person", {"regions": "motion"})
    found = matched = 0
    with FrameReader(path) as reader:
        for index, frame in reader.iter_frames(0, None, 2):
            expected, _ = whole.detect(frame, index)
            got, _ = motion.detect(frame, index)
            found += len(expected)
            if len(expected) and len(got):
                matched += int(np.sum(box_iou(expected, got).max(axis=1) >= 0.5))
    assert found >= 40
    assert matched >= 0.85 * found, (matched, found)
    fractions = np.array(motion.scanned_fraction)
    whole_scans = np.flatnonzero(fractions == 1.0)
    # the first call and at least every 16th scan the frame (more often where the regions would
    # cover more than half of it: these people are a third of the frame tall)
    assert len(fractions) == 24 and whole_scans[0] == 0 and np.all(np.diff(whole_scans, append=24) <= 16)
    if variation == 0.0:
        assert fractions.mean() < 0.75, fractions


def test_the_whole_frame_is_scanned_first_every_nth_call_and_after_a_restart():
    frames = [_scene(20 + 6 * k) for k in range(12)]
    det = HogPersonDetector(HogPersonSettings(regions="motion", full_frame_every=4, min_height=60))
    for k, frame in enumerate(frames):
        det.detect(frame, k)
    whole = [f == 1.0 for f in det.scanned_fraction]
    # calls 0, 4 and 8 scan the frame; the background model has learnt the floor by call 1
    assert whole == [k % 4 == 0 for k in range(12)], det.scanned_fraction
    det.detect(frames[0], 3)  # an index that does not increase: a new pass from a clean slate
    assert det.scanned_fraction == [1.0]


def test_the_tracker_default_scans_motion_regions_and_frame_is_one_setting_away():
    assert default_config().detectors["person"]["regions"] == "motion"
    assert HogPersonSettings().regions == "frame"  # the detector alone (and SAM 2's prompts) scan frames whole
    settings = resolve_tracker_settings("hog-bytetrack", categories=["person"],
                                        tracker_settings={"detectors": {"person": {"regions": "frame"}}})
    assert settings["detectors"]["person"]["regions"] == "frame"
