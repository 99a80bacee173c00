"""The ByteTrack trackers between anchors: Kalman boxes on the frames the detector skips, and the
buffered matching that keeps identities across a stride."""
from __future__ import annotations

import numpy as np
import pytest
from supervision.tracker.byte_tracker.kalman_filter import KalmanFilter

from models.backends.tracking.base import run_tracker
from models.backends.tracking.dnn_bytetrack import DnnByteTrackConfig
from models.backends.tracking.hog_bytetrack import (
    HogByteTrackConfig,
    HogByteTrackTracker,
    default_config,
    kalman_boxes,
    widen_boxes,
)
from tests.models.test_hog_bytetrack import BlankFrames, merge, scripted_factory, walker


def tracked(config: HogByteTrackConfig, frames, script: dict, categories=("person",)):
    """(steps, proposals, detector calls) of a run on scripted detections."""
    factory = scripted_factory({c: script for c in categories})
    tracker = HogByteTrackTracker(config, detector_factory=factory)
    state = tracker.init_state(frames)
    for category in categories:
        tracker.add_prompt(state, category=category)
    steps = list(tracker.propagate(state))
    return steps, tracker.proposals(state), factory.made[categories[0]].calls


def random_script(rng, n_frames: int, width: int, height: int) -> dict[int, list]:
    """Up to five walkers entering and leaving at random, each missed on some frames."""
    script: dict[int, list] = {}
    for _ in range(int(rng.integers(1, 6))):
        start = int(rng.integers(0, n_frames - 5))
        stop = int(rng.integers(start + 3, n_frames + 1))
        x, y = rng.uniform(0, width - 40), rng.uniform(0, height - 90)
        vx, vy = rng.uniform(-6, 6), rng.uniform(-2, 2)
        w, h = rng.uniform(20, 40), rng.uniform(50, 90)
        for f in range(start, stop):
            if rng.random() < 0.15:
                continue  # a missed detection
            t = f - start
            script.setdefault(f, []).append([x + vx * t, y + vy * t, x + vx * t + w, y + vy * t + h])
    return script


# -- the box arithmetic --------------------------------------------------------------------------
def test_kalman_boxes_are_the_filters_prediction_over_part_of_a_step():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(1, 6))
        x1, y1 = rng.uniform(0, 500, n), rng.uniform(0, 300, n)
        boxes = np.stack([x1, y1, x1 + rng.uniform(5, 80, n), y1 + rng.uniform(10, 160, n)], axis=1)  # [n, 4]
        velocities = rng.normal(0, [6, 3, 0.01, 2], (n, 4))                                         # [n, 4]
        fraction = float(rng.uniform(0, 1))
        # the reference: supervision's own Kalman predict with a motion matrix of `fraction` steps
        kf = KalmanFilter()
        kf._motion_mat[:4, 4:] = np.eye(4) * fraction
        expected = []
        for box, v in zip(boxes, velocities):
            w, h = box[2] - box[0], box[3] - box[1]
            mean = np.r_[box[0] + w / 2, box[1] + h / 2, w / h, h, v]                               # [8] xyah + rates
            cx, cy, a, h2 = kf.predict(mean, np.eye(8))[0][:4]
            expected.append([cx - a * h2 / 2, cy - h2 / 2, cx + a * h2 / 2, cy + h2 / 2])
        np.testing.assert_allclose(kalman_boxes(boxes, velocities, fraction), expected, rtol=1e-5, atol=1e-3)
    box = np.array([[10, 20, 40, 100]], np.float32)
    assert np.array_equal(kalman_boxes(box, np.zeros((1, 4)), 0.7), box)
    assert kalman_boxes(np.zeros((0, 4)), np.zeros((0, 4)), 0.5).shape == (0, 4)


def test_widen_boxes_grows_every_side_by_a_fraction_of_the_size():
    boxes = np.array([[10, 20, 40, 100], [0, 0, 10, 10]], np.float32)
    np.testing.assert_allclose(widen_boxes(boxes, 0.5), [[-5, -20, 55, 140], [-5, -5, 15, 15]])
    assert np.array_equal(widen_boxes(boxes, 0.0), boxes)


# -- between anchors -----------------------------------------------------------------------------
def test_frames_between_anchors_get_kalman_boxes_and_are_not_decoded():
    frames = BlankFrames(30)
    script = walker(range(30), vx=4.0)
    steps, proposals, calls = tracked(HogByteTrackConfig(anchor_stride=3, match_buffer=0.0), frames, script)
    anchors = list(range(0, 30, 3))
    assert calls == anchors and frames.reads == anchors       # the detector and the decoder: anchors only
    assert [s.frame_index for s in steps] == list(range(30))  # one step per video frame
    fractions = [s.fraction_done for s in steps]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0)
    (p,) = proposals
    assert list(p.frames) == list(range(30))
    assert np.array_equal(p.extra["detected"], p.frames % 3 == 0)
    assert p.extra["between_anchors"] == "kalman" and p.extra["anchor_stride"] == 3
    truth = np.array([script[int(f)][0] for f in p.frames], np.float32)
    detected = p.extra["detected"]
    assert np.array_equal(p.boxes[detected], truth[detected])  # anchors: the detections themselves
    # between anchors: where the walker is, once the filter has seen it move (after 3 anchors)
    late = (~detected) & (p.frames > 9)
    assert np.abs(p.boxes[late] - truth[late]).max() < 3.0
    assert np.all(p.scores == np.float32(0.9))                  # the anchor's score carries over
    for s in steps:
        assert s.boxes.shape == (len(s.object_ids), 4) and s.scores.shape == (len(s.object_ids),)


def test_kalman_boxes_stay_inside_the_frame():
    frames = BlankFrames(40, width=200)
    script = walker(range(20), x0=100.0, vx=5.0)  # detected until it reaches the right edge
    _, proposals, _ = tracked(HogByteTrackConfig(anchor_stride=4, min_track_length=2), frames, script)
    assert proposals
    for p in proposals:
        assert np.all(p.boxes[:, [0, 2]] >= 0) and np.all(p.boxes[:, [0, 2]] <= 200)
        assert np.all(p.boxes[:, [1, 3]] >= 0) and np.all(p.boxes[:, [1, 3]] <= 240)
        assert np.all(p.boxes[:, 2] - p.boxes[:, 0] >= 1) and np.all(p.boxes[:, 3] - p.boxes[:, 1] >= 1)


@pytest.mark.parametrize("seed", range(12))
def test_anchor_observations_and_kept_tracks_do_not_depend_on_between_anchors(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 60))
    stride = int(rng.integers(1, 6))
    buffer = float(rng.choice([0.0, 0.3, 0.5]))
    script = merge(random_script(rng, n, 320, 240))
    frames_none, frames_kalman = BlankFrames(n), BlankFrames(n)
    common = {"anchor_stride": stride, "match_buffer": buffer, "min_track_length": int(rng.integers(1, 4))}
    steps_none, plain, _ = tracked(HogByteTrackConfig(between_anchors="none", **common), frames_none, script)
    steps_kalman, filled, _ = tracked(HogByteTrackConfig(between_anchors="kalman", **common), frames_kalman, script)
    assert frames_none.reads == frames_kalman.reads == list(range(0, n, stride))
    assert [s.frame_index for s in steps_none] == list(range(0, n, stride))
    assert [s.frame_index for s in steps_kalman] == list(range(n))
    assert [(p.track_id, p.category) for p in plain] == [(p.track_id, p.category) for p in filled]
    for a, b in zip(plain, filled):
        detected = b.extra["detected"]
        assert np.array_equal(a.frames, b.frames[detected])
        assert np.array_equal(a.boxes, b.boxes[detected])
        assert np.array_equal(a.scores, b.scores[detected])
        # every predicted box follows a detection of its track by less than a stride
        anchor_of = np.maximum.accumulate(np.where(detected, b.frames, -1))
        assert np.all(anchor_of >= 0) and np.all(b.frames - anchor_of < stride)
        assert np.all(np.diff(b.frames) > 0)
        assert np.all(b.boxes[:, 2] - b.boxes[:, 0] >= 1) and np.all(b.boxes[:, 3] - b.boxes[:, 1] >= 1)
    if stride == 1:  # nothing between anchors: the same run
        assert all(np.array_equal(a.boxes, b.boxes) and b.extra["detected"].all() for a, b in zip(plain, filled))


def test_match_buffer_keeps_a_fast_walker_in_one_track():
    # 10 px a frame, 30 px wide: 40 px between two anchors of stride 4, so the plain boxes of two
    # anchors never overlap and ByteTrack cannot confirm a track
    script = walker(range(60), x0=0.0, vx=10.0, w=30.0)
    config = {"anchor_stride": 4, "min_track_length": 3}
    _, plain, _ = tracked(HogByteTrackConfig(match_buffer=0.0, **config), BlankFrames(60, width=700), script)
    _, buffered, _ = tracked(HogByteTrackConfig(match_buffer=1.0, **config), BlankFrames(60, width=700), script)
    assert len(plain) == 0 or max(len(p.frames) for p in plain) < 30
    (p,) = buffered
    assert len(p.frames) >= 50
    truth = np.array([script[int(f)][0] for f in p.frames], np.float32)
    assert np.array_equal(p.boxes[p.extra["detected"]], truth[p.extra["detected"]])


# -- defaults ------------------------------------------------------------------------------------
def test_defaults_are_the_documented_fast_settings():
    hog, dnn = default_config(), DnnByteTrackConfig()
    assert (hog.anchor_stride, hog.between_anchors, hog.match_buffer) == (2, "kalman", 0.3)
    assert hog.detectors["person"]["regions"] == "motion" and hog.detectors["person"]["full_frame_every"] == 16
    assert (dnn.anchor_stride, dnn.between_anchors, dnn.match_buffer) == (2, "kalman", 0.5)
    assert HogByteTrackConfig.from_dict(hog.as_dict()) == hog


def test_the_default_tracker_gives_every_frame_a_step(rendered_small):
    from models.media.video import FrameReader

    with FrameReader(rendered_small.path) as reader:
        progress: list[float] = []
        proposals = run_tracker(HogByteTrackTracker(), reader, ["person"], progress=lambda f, m: progress.append(f))
        assert len(progress) == reader.frame_count and progress[-1] == pytest.approx(1.0)
    assert proposals and all((~p.extra["detected"]).any() for p in proposals)
