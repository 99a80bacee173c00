"""The hog-bytetrack tracker: configuration, protocol, observations and recovery of people."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from models.backends.tracking.base import (
    FrameObjects,
    TrackerConfigError,
    TrackProposal,
    run_tracker,
)
from models.backends.tracking.detectors import build_detector
from models.backends.tracking.hog_bytetrack import (
    HogByteTrackConfig,
    HogByteTrackTracker,
    build_hog_bytetrack,
    default_config,
)
from models.demo.coverage import people_coverage
from models.media.video import FrameReader
from models.world.renderer import render_scene

# The detector on every frame and ByteTrack matching its boxes as they are: the scripted
# association tests below are written for it.
EVERY_FRAME = {"anchor_stride": 1, "match_buffer": 0.0}


# -- helpers -------------------------------------------------------------------------------------
class BlankFrames:
    """A FrameSource of grey frames (for scripted detectors that ignore the pixels)."""

    def __init__(self, n: int, fps: float = 10.0, width: int = 320, height: int = 240):
        self.frame_count, self.fps, self.width, self.height = n, fps, width, height
        self.reads: list[int] = []

    def read(self, index: int) -> np.ndarray:
        if not 0 <= index < self.frame_count:
            raise IndexError(index)
        self.reads.append(index)
        return np.full((self.height, self.width, 3), 127, np.uint8)

    def iter_frames(self, start=0, stop=None, step=1):
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        for i in range(start, stop, step):
            yield i, self.read(i)


class ScriptedDetector:
    """Returns the boxes a script gives for each frame index."""

    stateful = False

    def __init__(self, category, script):
        self.category = category
        self.script = script
        self.calls: list[int] = []

    def detect(self, frame, frame_index):
        self.calls.append(frame_index)
        boxes = np.asarray(self.script.get(frame_index, []), np.float32).reshape(-1, 4)
        return boxes, np.full(len(boxes), 0.9, np.float32)

    def reset(self):
        pass


def scripted_factory(scripts: dict[str, dict[int, list]]):
    made = {}

    def factory(category, settings):
        made[category] = ScriptedDetector(category, scripts.get(category, {}))
        return made[category]

    factory.made = made
    return factory


def walker(frames, x0=20.0, y=60.0, vx=4.0, w=30.0, h=80.0):
    """Script boxes of one object moving right by vx px per frame."""
    return {f: [[x0 + vx * f, y, x0 + vx * f + w, y + h]] for f in frames}


def merge(*scripts):
    out = {}
    for s in scripts:
        for f, boxes in s.items():
            out.setdefault(f, []).extend(boxes)
    return out


def run(config=None, frames=None, categories=("person",), factory=None):
    tracker = HogByteTrackTracker(config or HogByteTrackConfig(**EVERY_FRAME),
                                  **({"detector_factory": factory} if factory else {}))
    return run_tracker(tracker, frames, list(categories))


def check_proposals(proposals: list[TrackProposal], width, height, min_len):
    ids = [p.track_id for p in proposals]
    assert len(ids) == len(set(ids))
    for p in proposals:
        assert len(p.frames) >= min_len
        assert np.all(np.diff(p.frames) > 0)
        assert np.all(p.boxes[:, [0, 2]] >= 0) and np.all(p.boxes[:, [0, 2]] <= width)
        assert np.all(p.boxes[:, [1, 3]] >= 0) and np.all(p.boxes[:, [1, 3]] <= height)
        assert np.all(p.boxes[:, 2] > p.boxes[:, 0]) and np.all(p.boxes[:, 3] > p.boxes[:, 1])


# -- configuration -------------------------------------------------------------------------------
def test_default_config_is_person_and_round_trips_through_json():
    config = default_config()
    assert config.categories == ["person"]
    data = json.loads(json.dumps(config.to_dict()))
    assert HogByteTrackConfig.from_dict(data) == config
    assert build_hog_bytetrack(data).config == config
    assert build_hog_bytetrack(None).name == "hog-bytetrack"


def test_unknown_config_keys_are_rejected_by_name():
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['anchor_strid'\]"):
        HogByteTrackConfig.from_dict({"anchor_strid": 2})


@pytest.mark.parametrize("change, error, message", [
    ({"anchor_stride": 0}, ValueError, "anchor_stride"),
    ({"anchor_stride": 1.5}, ValueError, "anchor_stride"),
    ({"between_anchors": "linear"}, ValueError, "between_anchors"),
    ({"between_anchors": None}, ValueError, "between_anchors"),
    ({"match_buffer": -0.1}, ValueError, "match_buffer"),
    ({"match_buffer": 2.5}, ValueError, "match_buffer"),
    ({"match_buffer": float("nan")}, ValueError, "match_buffer"),
    ({"match_buffer": "wide"}, ValueError, "match_buffer"),
    ({"match_buffer": True}, ValueError, "match_buffer"),
    ({"track_activation_threshold": 1.2}, ValueError, "track_activation_threshold"),
    ({"minimum_matching_threshold": 0}, ValueError, "minimum_matching_threshold"),
    ({"lost_track_buffer": -1}, ValueError, "lost_track_buffer"),
    ({"frame_rate": 0}, ValueError, "frame_rate"),
    ({"minimum_consecutive_frames": 0}, ValueError, "minimum_consecutive_frames"),
    ({"min_track_length": 0}, ValueError, "min_track_length"),
    ({"categories": []}, ValueError, "categories"),
    ({"categories": ["unicorn"]}, TrackerConfigError, "unknown category"),
    ({"detectors": {"unicorn": {}}}, TrackerConfigError, "known categories"),
    ({"detectors": {"person": {"scale": 0.9}}}, ValueError, "scale"),
    ({"detectors": {"person": {"colour": "red"}}}, ValueError, "unknown setting"),
])
def test_bad_config_values_are_rejected(change, error, message):
    with pytest.raises(error, match=message):
        HogByteTrackConfig.from_dict(change)
    with pytest.raises(error, match=message):
        HogByteTrackTracker(HogByteTrackConfig(**change))


# -- protocol ------------------------------------------------------------------------------------
def test_bad_calls_are_rejected_up_front():
    tracker = HogByteTrackTracker()
    with pytest.raises(ValueError, match="FrameSource"):
        tracker.init_state([np.zeros((4, 4, 3), np.uint8)])
    with pytest.raises(ValueError, match="no frames"):
        tracker.init_state(BlankFrames(0))
    state = tracker.init_state(BlankFrames(5))
    with pytest.raises(ValueError, match="add_prompt"):
        tracker.propagate(state)
    with pytest.raises(ValueError, match="has not run"):
        tracker.proposals(state)
    with pytest.raises(TrackerConfigError, match="known categories"):
        tracker.add_prompt(state, category="car")
    with pytest.raises(ValueError, match="category prompts only"):
        tracker.add_prompt(state, category="person", boxes=np.zeros((1, 4)))
    with pytest.raises(ValueError, match="frame_index"):
        tracker.add_prompt(state, category="person", frame_index=3)
    tracker.add_prompt(state, category="Person")
    with pytest.raises(ValueError, match="already added"):
        tracker.add_prompt(state, category="person")
    with pytest.raises(ValueError, match="init_state"):
        tracker.proposals(object())
    steps = tracker.propagate(state)
    next(steps)
    with pytest.raises(ValueError, match="already started"):
        tracker.add_prompt(state, category="moving object")
    with pytest.raises(ValueError, match="has not run"):
        tracker.proposals(state)
    list(steps)
    assert tracker.proposals(state) == []


def test_propagate_yields_every_anchor_frame_with_progress():
    frames = BlankFrames(20)
    factory = scripted_factory({"person": walker(range(20))})
    tracker = HogByteTrackTracker(HogByteTrackConfig(anchor_stride=3, between_anchors="none"), detector_factory=factory)
    state = tracker.init_state(frames)
    tracker.add_prompt(state, category="person")
    steps = list(tracker.propagate(state))
    assert all(isinstance(s, FrameObjects) for s in steps)
    assert [s.frame_index for s in steps] == list(range(0, 20, 3))
    assert factory.made["person"].calls == list(range(0, 20, 3))
    fractions = [s.fraction_done for s in steps]
    assert fractions == sorted(fractions) and fractions[-1] == pytest.approx(1.0) and fractions[0] > 0
    for s in steps:
        assert s.boxes.shape == (len(s.object_ids), 4) and s.scores.shape == (len(s.object_ids),)
        assert s.categories == ["person"] * len(s.object_ids)
    (proposal,) = tracker.proposals(state)
    assert np.all(proposal.frames % 3 == 0)
    assert list(proposal.frames) == list(range(0, 20, 3))


def test_a_track_born_after_the_first_frame_is_reported_from_its_second_detection():
    # ByteTrack confirms a track on its second matched frame (on the very first frame at once)
    script = merge(walker(range(20), y=20.0), walker(range(6, 20), y=140.0))
    proposals = run(frames=BlankFrames(20), factory=scripted_factory({"person": script}))
    assert sorted(int(p.frames[0]) for p in proposals) == [0, 7]


def test_no_observation_on_frames_without_a_detection_and_no_interpolation():
    # the object is detected on frames 0-11 and 18-39 only; ByteTrack keeps its identity
    script = walker([f for f in range(40) if not 12 <= f < 18], vx=2.0)
    proposals = run(frames=BlankFrames(40), factory=scripted_factory({"person": script}))
    assert len(proposals) == 1
    (p,) = proposals
    assert not set(range(12, 18)) & set(p.frames.tolist())
    assert set(range(18, 40)) <= set(p.frames.tolist())
    for f, box in zip(p.frames, p.boxes):
        assert np.array_equal(box, np.asarray(script[int(f)][0], np.float32))


def test_observations_are_the_detection_boxes_clipped_to_the_frame():
    # a box that sticks out of the right edge is clipped in the proposal
    script = walker(range(15), x0=290.0, vx=1.0)
    (p,) = run(frames=BlankFrames(15, width=320), factory=scripted_factory({"person": script}))
    assert p.boxes[:, 2].max() == 320.0
    assert np.array_equal(p.boxes[:, :2], np.asarray([script[int(f)][0][:2] for f in p.frames], np.float32))


def test_track_ids_are_unique_across_categories_and_short_tracks_are_dropped():
    people = merge(walker(range(30), y=20.0), walker(range(30), y=140.0, x0=200.0, vx=-3.0))
    movers = merge(walker(range(30), y=20.0), walker(range(4, 7), y=100.0, x0=150.0))  # a 3-frame blip
    factory = scripted_factory({"person": people, "moving object": movers})
    config = HogByteTrackConfig(min_track_length=5, **EVERY_FRAME)
    proposals = run(config, BlankFrames(30), categories=("person", "moving object"), factory=factory)
    check_proposals(proposals, 320, 240, min_len=5)
    assert sorted(p.category for p in proposals) == ["moving object", "person", "person"]
    assert len({p.track_id for p in proposals}) == 3
    # with min_track_length 2 the blip (3 detections, reported from its second) survives
    proposals = run(HogByteTrackConfig(min_track_length=2, **EVERY_FRAME), BlankFrames(30), ("person", "moving object"),
                    factory=scripted_factory({"person": people, "moving object": movers}))
    assert len(proposals) == 4


def test_propagate_again_starts_from_a_clean_slate():
    frames = BlankFrames(12)
    tracker = HogByteTrackTracker(detector_factory=scripted_factory({"person": walker(range(12))}))
    state = tracker.init_state(frames)
    tracker.add_prompt(state, category="person")
    list(tracker.propagate(state))
    first = tracker.proposals(state)
    list(tracker.propagate(state))
    second = tracker.proposals(state)
    assert len(first) == len(second) == 1
    assert np.array_equal(first[0].frames, second[0].frames)


def test_moving_object_detector_is_primed_with_frames_spread_over_the_video(small_scene_spec, tmp_path):
    # MOG2 is a detector for a still camera: the small scene under the still, even camera
    # (variation 0), as tests/models/test_detectors.py renders it for the same reason
    path = tmp_path / "still.mp4"
    gt = render_scene(dataclasses.replace(small_scene_spec, variation=0.0), path)
    primed = {}

    def factory(category, settings):
        det = build_detector(category, settings)
        original = det.prime

        def prime(frames, **kw):
            primed["n"] = len(frames)
            original(frames, **kw)

        det.prime = prime
        return det

    with FrameReader(path) as reader:
        config = HogByteTrackConfig(categories=["moving object"], detectors={"moving object": {"warmup_frames": 12}},
                                    **EVERY_FRAME)
        proposals = run(config, reader, ("moving object",), factory=factory)
    assert primed["n"] == 12
    coverage = people_coverage(gt, [(p.frames, p.boxes) for p in proposals])
    assert coverage["covered"] >= 2


# -- on video ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small_run(rendered_small):
    """The default tracker on the small rendered scene, with every detection recorded."""
    recorded: dict[int, np.ndarray] = {}

    def factory(category, settings):
        det = build_detector(category, settings)
        detect = det.detect

        def recording(frame, index):
            boxes, scores = detect(frame, index)
            recorded[index] = boxes.copy()
            return boxes, scores

        det.detect = recording
        return det

    config = default_config()
    with FrameReader(rendered_small.path) as reader:
        tracker = HogByteTrackTracker(config, detector_factory=factory)
        proposals = run_tracker(tracker, reader, config.categories)
    return proposals, recorded


def test_default_tracker_recovers_the_rendered_people(rendered_small, small_run):
    proposals, _ = small_run
    gt = rendered_small.gt
    check_proposals(proposals, gt.width, gt.height, default_config().min_track_length)
    assert all(p.category == "person" for p in proposals)
    coverage = people_coverage(gt, [(p.frames, p.boxes) for p in proposals])
    assert coverage["counted"] == 3
    assert coverage["covered"] == 3, coverage
    # no spare tracks on an empty plaza (a ball is not a person)
    assert len(proposals) <= 4


def test_every_detected_observation_is_a_detection_of_its_anchor(small_run):
    proposals, recorded = small_run
    stride = default_config().anchor_stride
    assert sorted(recorded) == list(range(0, max(recorded) + 1, stride))
    n = 0
    for p in proposals:
        detected = p.extra["detected"]
        assert detected.dtype == bool and detected.shape == p.frames.shape
        assert np.array_equal(detected, p.frames % stride == 0)
        for f, box in zip(p.frames[detected], p.boxes[detected]):
            dets = recorded[int(f)]
            assert np.any(np.all(np.isclose(dets, box, atol=1e-4), axis=1)), (p.track_id, int(f))
            n += 1
    assert n > 30


def test_real_pedestrians_are_tracked(vtest_head):
    # every third frame of the first 150 (a 15 s walk through the plaza)
    config = HogByteTrackConfig(anchor_stride=3, between_anchors="none")
    progress = []
    proposals = run_tracker(HogByteTrackTracker(config), vtest_head, ["person"],
                            progress=lambda fraction, message: progress.append(fraction))
    assert progress[-1] == pytest.approx(1.0) and len(progress) == 50
    check_proposals(proposals, vtest_head.width, vtest_head.height, config.min_track_length)
    long_tracks = [p for p in proposals if len(p.frames) >= 10]
    heights = [float(np.median(p.boxes[:, 3] - p.boxes[:, 1])) for p in long_tracks]
    person_sized = [h for h in heights if 55 <= h <= 140]
    assert len(person_sized) >= 4, heights
    # people walk: the long tracks move
    moved = [np.ptp((p.boxes[:, 0] + p.boxes[:, 2]) / 2) for p in long_tracks]
    assert sum(m > 40 for m in moved) >= 3
