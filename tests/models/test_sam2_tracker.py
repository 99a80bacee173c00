"""The SAM 2 tracker on a tiny random-weight SAM 2 model, saved and loaded through SAM 2's code.

Random weights give arbitrary masks: these tests check the code path (loading, frame feeding,
prompts, forward and backward propagation, mask -> box, identity merging), not accuracy. The
tracker's observations are checked against SAM 2's own documented video workflow
(``init_state`` on a JPEG folder, ``add_new_points_or_box``, ``propagate_in_video`` forward and
``reverse=True``) with boxes recomputed here from the raw mask logits.
"""
from __future__ import annotations

import functools
import hashlib

import cv2
import numpy as np
import pytest
import torch

from models.backends.tracking.base import FrameObjects, TrackerConfigError
from models.backends.tracking.sam2_anchors import (
    AnchorIdentity,
    MaskCrop,
    Observation,
    anchor_frames,
    mask_iou,
    merge_anchor_identities,
)
from models.backends.tracking.sam2_frames import Sam2State
from models.backends.tracking.sam2_tracker import Sam2Tracker, Sam2TrackerConfig
from models.media.video import FrameReader
from tests.models.sam2_tiny import build_tiny_sam2

N_FRAMES, HEIGHT, WIDTH = 24, 72, 96
ANCHOR = 10
PROMPT_BOX = [30.0, 20.0, 50.0, 50.0]


def _rect_x(i: int) -> int:
    return 10 + 2 * i


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny model's ops are too small to gain from threads, and on a shared machine
    OpenMP's spinning threads make them many times slower; restore the setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_sam2(tmp_path_factory.mktemp("sam2_tiny"))


@pytest.fixture(scope="module")
def video_dir(tmp_path_factory):
    """A red rectangle moving right over noise, as "<index>.jpg" files (what SAM 2 reads)."""
    folder = tmp_path_factory.mktemp("video")
    rng = np.random.default_rng(7)
    for i in range(N_FRAMES):
        img = rng.integers(0, 255, (HEIGHT, WIDTH, 3), dtype=np.uint8)
        x = _rect_x(i)
        cv2.rectangle(img, (x, 20), (x + 20, 50), (0, 0, 255), -1)
        assert cv2.imwrite(str(folder / f"{i}.jpg"), img)
    return folder


def _config(tiny, **overrides) -> Sam2TrackerConfig:
    config_path, checkpoint_path = tiny
    return Sam2TrackerConfig(checkpoint=str(checkpoint_path), model_config=str(config_path),
                             device="cpu", **overrides)


@pytest.fixture(scope="module")
def tracker(tiny):
    return Sam2Tracker(_config(tiny))


# -- configuration and loading ---------------------------------------------------------------------
def test_from_dict_rejects_unknown_keys_and_bad_values():
    config = Sam2TrackerConfig.from_dict({"checkpoint": "x.pt", "merge_iou": 0.6,
                                          "detector": {"person": {"min_score": 0.3}}})
    assert config.merge_iou == 0.6 and config.detector == {"person": {"min_score": 0.3}}
    with pytest.raises(ValueError, match="mask_treshold"):
        Sam2TrackerConfig.from_dict({"checkpoint": "x.pt", "mask_treshold": 0.5})
    with pytest.raises(ValueError, match="merge_iou"):
        Sam2TrackerConfig.from_dict({"merge_iou": 1.5})
    with pytest.raises(ValueError, match="device"):
        Sam2TrackerConfig(device="tpu")


def test_missing_checkpoint_is_a_config_error_naming_the_path(tmp_path, tiny):
    missing = tmp_path / "nowhere" / "sam2.1_hiera_tiny.pt"
    with pytest.raises(TrackerConfigError, match="SAM 2 checkpoint not found: .*sam2.1_hiera_tiny.pt"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(missing), model_config=str(tiny[0]), device="cpu"))
    with pytest.raises(TrackerConfigError, match="checkpoint not found"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint="", device="cpu"))


def test_missing_model_config_is_a_config_error(tmp_path, tiny):
    with pytest.raises(TrackerConfigError, match="model config not found: .*no_such.yaml"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(tiny[1]), model_config=str(tmp_path / "no_such.yaml"),
                                      device="cpu"))
    with pytest.raises(TrackerConfigError, match="configs/sam2.1/sam2.1_hiera_x.yaml"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(tiny[1]), model_config="configs/sam2.1/sam2.1_hiera_x.yaml",
                                      device="cpu"))


def test_check_files_resolves_paths_and_packaged_config_names(tiny):
    checkpoint, config = Sam2TrackerConfig(checkpoint=str(tiny[1]), model_config=str(tiny[0])).check_files()
    assert (checkpoint, config) == (tiny[1].resolve(), tiny[0].resolve())
    _, packaged = Sam2TrackerConfig(checkpoint=str(tiny[1])).check_files()  # the default config name
    assert packaged.is_file() and packaged.parts[-3:] == ("configs", "sam2.1", "sam2.1_hiera_t.yaml")
    with pytest.raises(TrackerConfigError, match="checkpoint not found: missing.pt"):
        Sam2TrackerConfig(checkpoint="missing.pt").check_files()


def test_checkpoint_of_another_model_is_a_config_error(tmp_path, tiny):
    saved = torch.load(tiny[1], map_location="cpu", weights_only=True)["model"]
    saved.pop(next(iter(saved)))
    broken = tmp_path / "broken.pt"
    torch.save({"model": saved}, broken)
    with pytest.raises(TrackerConfigError, match="does not load into the model"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(broken), model_config=str(tiny[0]), device="cpu"))
    torch.save({"weights": saved}, broken)
    with pytest.raises(TrackerConfigError, match="does not load into the model"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(broken), model_config=str(tiny[0]), device="cpu"))
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(TrackerConfigError, match="does not load into the model"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(broken), model_config=str(tiny[0]), device="cpu"))
    no_model = tmp_path / "no_model.yaml"
    no_model.write_text("trunk: {embed_dim: 8}\n")
    with pytest.raises(TrackerConfigError, match="no 'model' section"):
        Sam2Tracker(Sam2TrackerConfig(checkpoint=str(tiny[1]), model_config=str(no_model), device="cpu"))


def test_loads_the_saved_weights(tracker, tiny):
    saved = torch.load(tiny[1], map_location="cpu", weights_only=True)["model"]
    loaded = tracker.predictor.state_dict()
    assert set(loaded) == set(saved)
    for key, value in saved.items():
        assert torch.equal(loaded[key], value), key
    assert type(tracker.predictor).__name__ == "SAM2VideoPredictor"
    assert tracker.image_size == 128
    assert tracker.checkpoint_sha256 == hashlib.sha256(tiny[1].read_bytes()).hexdigest()
    info = tracker.run_info()
    assert info["checkpoint_sha256"] == tracker.checkpoint_sha256 and info["backend"] == "sam2"


def _public_attributes(model: torch.nn.Module) -> dict:
    out = {}
    for name, module in model.named_modules():
        for key, value in vars(module).items():
            if not key.startswith("_") and key != "training":
                out[f"{name}.{key}"] = value
    return out


def test_model_equals_the_one_sam2s_own_builder_makes(tracker, tiny):
    """Our config composition gives the model ``build_sam2_video_predictor`` (hydra) gives."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.initialize import get_gh_backup, restore_gh_from_backup
    from sam2.build_sam import build_sam2_video_predictor

    config_path, checkpoint_path = tiny
    backup = get_gh_backup()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_path.parent), version_base="1.2"):
            reference = build_sam2_video_predictor(config_path.name, str(checkpoint_path), device="cpu")
    finally:
        restore_gh_from_backup(backup)
    assert type(reference) is type(tracker.predictor)
    ours, theirs = _public_attributes(tracker.predictor), _public_attributes(reference)
    assert set(ours) == set(theirs)
    # SAM 2's hole filling needs its CUDA extension; the tracker turns it off on this CPU build.
    assert theirs.pop(".fill_hole_area") == 8 and ours.pop(".fill_hole_area") == tracker.fill_hole_area == 0
    for key, value in theirs.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(ours[key], value), key
        elif isinstance(value, functools.partial):
            assert (ours[key].func, ours[key].args, ours[key].keywords) == (value.func, value.args, value.keywords)
        else:
            assert ours[key] == value, key
    for key, value in reference.state_dict().items():
        assert torch.equal(tracker.predictor.state_dict()[key], value), key


def test_inference_state_and_frames_match_sam2s_init_state(tracker, video_dir):
    reference = tracker.predictor.init_state(str(video_dir))
    state = tracker.init_state(FrameReader(video_dir))
    ours = tracker._new_inference_state(state)
    assert set(ours) == set(reference)
    assert (ours["video_height"], ours["video_width"], ours["num_frames"]) == (HEIGHT, WIDTH, N_FRAMES)
    for i in range(N_FRAMES):
        assert torch.equal(state.images[i], reference["images"][i]), f"frame {i}"


# -- tracking ---------------------------------------------------------------------------------------
def _reference_logits(predictor, video_dir, anchor, box) -> dict[int, np.ndarray]:
    """SAM 2's documented workflow: one box on the anchor, propagate forward then backward."""
    state = predictor.init_state(str(video_dir))
    predictor.add_new_points_or_box(state, frame_idx=anchor, obj_id=1, box=box)
    logits = {}
    for reverse in (False, True):
        for frame, _, masks in predictor.propagate_in_video(state, start_frame_idx=anchor, reverse=reverse):
            logits[frame] = masks[0, 0].numpy().copy()
    return logits


def _expected_observations(logits, threshold, min_area) -> dict[int, list[float]]:
    expected = {}
    for frame, logit in logits.items():
        ys, xs = np.nonzero(logit > threshold)
        if len(ys) >= min_area:
            expected[frame] = [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
    return expected


def _assert_well_formed(proposals, frame_count, width, height):
    for p in proposals:
        assert p.frames.dtype == np.int32 and p.boxes.dtype == np.float32 and p.scores.dtype == np.float32
        assert len(p.frames) > 0 and (np.diff(p.frames) > 0).all()
        assert p.frames.min() >= 0 and p.frames.max() < frame_count
        assert (p.boxes[:, 0] >= 0).all() and (p.boxes[:, 1] >= 0).all()
        assert (p.boxes[:, 2] <= width).all() and (p.boxes[:, 3] <= height).all()
        assert (p.boxes[:, 2] > p.boxes[:, 0]).all() and (p.boxes[:, 3] > p.boxes[:, 1]).all()
        assert ((p.scores > 0) & (p.scores < 1)).all()


def test_box_prompt_on_a_middle_anchor_tracks_both_ways_like_sam2(tiny, tracker, video_dir):
    # given: SAM 2's raw mask logits for a box on frame 10, and a threshold and minimum area
    # chosen from them so that some frames have a mask and others do not
    logits = _reference_logits(tracker.predictor, video_dir, ANCHOR, PROMPT_BOX)
    assert sorted(logits) == list(range(N_FRAMES))
    threshold = float(np.median([np.quantile(v, 0.99) for v in logits.values()]))
    min_area = 40
    expected = _expected_observations(logits, threshold, min_area)
    assert 0 < len(expected) < N_FRAMES
    assert min(expected) < ANCHOR < max(expected)
    assert any(b != [0, 0, WIDTH, HEIGHT] for b in expected.values())
    sam2 = Sam2Tracker(_config(tiny, mask_threshold=threshold, min_mask_area=min_area))

    # when: the tracker runs on the same frames through a FrameReader
    state = sam2.init_state(FrameReader(video_dir))
    sam2.add_prompt(state, category="box", frame_index=ANCHOR, boxes=np.array([PROMPT_BOX]))
    steps = list(sam2.propagate(state))
    proposals = sam2.proposals(state)

    # then: forward from the anchor to the end, then backward to frame 0, each frame once
    assert all(isinstance(s, FrameObjects) for s in steps)
    assert [s.frame_index for s in steps] == list(range(ANCHOR, N_FRAMES)) + list(range(ANCHOR - 1, -1, -1))
    fractions = [s.fraction_done for s in steps]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    for s in steps:
        assert s.object_ids == ([1] if s.frame_index in expected else [])
        assert s.boxes.shape == (len(s.object_ids), 4) and s.boxes.dtype == np.float32
    # and: observations exactly on the frames whose mask is non-empty, boxes from those masks
    assert len(proposals) == 1
    (p,) = proposals
    _assert_well_formed(proposals, N_FRAMES, WIDTH, HEIGHT)
    assert p.category == "box" and p.extra["anchors"] == [ANCHOR]
    assert p.frames.tolist() == sorted(expected)
    np.testing.assert_array_equal(p.boxes, np.array([expected[f] for f in sorted(expected)], dtype=np.float32))
    # and: outputs out of the memory's reach were dropped (the results above are still SAM 2's)
    assert state.stats["max_stored_frames"] < N_FRAMES
    assert state.stats["frames_processed"] == N_FRAMES


def test_keeping_every_output_gives_the_same_proposals(tiny, video_dir):
    results = []
    for prune in (True, False):
        sam2 = Sam2Tracker(_config(tiny, prune_memory=prune, mask_threshold=0.02))
        state = sam2.init_state(FrameReader(video_dir))
        sam2.add_prompt(state, category="box", frame_index=ANCHOR, boxes=[PROMPT_BOX])
        sam2.add_prompt(state, category="box", frame_index=3, boxes=[[5, 30, 40, 70]])
        for _ in sam2.propagate(state):
            pass
        results.append((sam2.proposals(state), state.stats["max_stored_frames"]))
    (pruned, stored_pruned), (kept, stored_kept) = results
    assert stored_pruned < stored_kept == N_FRAMES
    assert [p.track_id for p in pruned] == [p.track_id for p in kept] and pruned
    for a, b in zip(pruned, kept):
        assert np.array_equal(a.frames, b.frames) and np.array_equal(a.boxes, b.boxes)
        assert np.array_equal(a.scores, b.scores)


class _FakeDetector:
    """Stands in for models.backends.tracking.detectors: the drawn rectangle plus a weaker second box."""

    def __init__(self, calls):
        self.calls = calls

    def detect(self, frame_bgr, frame_index):
        self.calls.append((frame_index, frame_bgr.copy()))
        x = _rect_x(frame_index)
        boxes = np.array([[5, 5, 25, 25], [x, 20, x + 21, 51]], dtype=np.float32)
        return boxes, np.array([0.4, 0.9], dtype=np.float32)


def test_category_prompt_runs_the_detector_on_anchor_frames(tiny, video_dir):
    calls, factory_args = [], []

    def factory(category, settings):
        factory_args.append((category, settings))
        return _FakeDetector(calls)

    sam2 = Sam2Tracker(
        _config(tiny, anchor_stride=8, max_anchors=3, max_objects_per_anchor=1, max_propagation_frames=5,
                mask_threshold=0.0, detector={"car": {"min_score": 0.25}}),
        detector_factory=factory,
    )
    reader = FrameReader(video_dir)
    state = sam2.init_state(reader)
    sam2.add_prompt(state, category="car")
    assert factory_args == [("car", {"min_score": 0.25})]
    assert [f for f, _ in calls] == [0, 8, 16]
    for f, frame in calls:
        assert np.array_equal(frame, reader.read(f))
    # only the best box of each anchor became a prompt
    assert {a: [p.box.tolist() for p in ps] for a, ps in state.prompts.items()} == {
        a: [[_rect_x(a), 20, _rect_x(a) + 21, 51]] for a in (0, 8, 16)
    }
    steps = list(sam2.propagate(state))
    assert [s.frame_index for s in steps] == (
        list(range(6)) + list(range(8, 14)) + list(range(7, 2, -1)) + list(range(16, 22)) + list(range(15, 10, -1))
    )
    proposals = sam2.proposals(state)
    _assert_well_formed(proposals, N_FRAMES, WIDTH, HEIGHT)
    members = sorted(m for p in proposals for m in p.extra["members"])
    assert members == [1, 2, 3]
    windows = {1: range(6), 2: range(3, 14), 3: range(11, 22)}
    for p in proposals:
        assert p.category == "car"
        assert len(p.extra["anchors"]) == len(p.extra["members"])
        covered = set().union(*(state.identities[m].observations for m in p.extra["members"]))
        assert p.frames.tolist() == sorted(covered)
        assert all(any(f in windows[m] for m in p.extra["members"]) for f in p.frames.tolist())


class _FakeStatefulDetector(_FakeDetector):
    stateful = True

    def reset(self):
        self.calls.append(("reset", None))


def test_a_stateful_detector_sees_every_frame_up_to_the_last_anchor(tiny, video_dir):
    calls = []
    sam2 = Sam2Tracker(_config(tiny, anchor_stride=8, max_anchors=3, max_objects_per_anchor=2),
                       detector_factory=lambda category, settings: _FakeStatefulDetector(calls))
    state = sam2.init_state(FrameReader(video_dir))
    sam2.add_prompt(state, category="moving object")
    assert [f for f, _ in calls] == ["reset", *list(range(17))]
    assert sorted(state.prompts) == [0, 8, 16]
    assert [len(ps) for ps in state.prompts.values()] == [2, 2, 2]
    assert [p.score for p in state.prompts[8]] == pytest.approx([0.9, 0.4])  # best first


def test_a_model_that_sees_no_object_gives_no_observations(tmp_path, video_dir):
    config_path, checkpoint_path = build_tiny_sam2(tmp_path, object_score_bias=0.0)
    sam2 = Sam2Tracker(Sam2TrackerConfig(checkpoint=str(checkpoint_path), model_config=str(config_path),
                                         device="cpu", mask_threshold=-1000.0))
    state = sam2.init_state(FrameReader(video_dir))
    sam2.add_prompt(state, category="box", frame_index=ANCHOR, boxes=[PROMPT_BOX])
    steps = list(sam2.propagate(state))
    assert len(steps) == N_FRAMES and all(s.object_ids == [] for s in steps)
    assert sam2.proposals(state) == []


def test_bad_calls_are_rejected_up_front(tracker, video_dir):
    state = tracker.init_state(FrameReader(video_dir))
    assert isinstance(state, Sam2State)
    with pytest.raises(ValueError, match="add_prompt"):
        tracker.propagate(state)
    with pytest.raises(ValueError, match="propagate"):
        tracker.proposals(state)
    with pytest.raises(ValueError, match="frame_index"):
        tracker.add_prompt(state, category="box", boxes=[PROMPT_BOX])
    with pytest.raises(ValueError, match="outside"):
        tracker.add_prompt(state, category="box", frame_index=N_FRAMES, boxes=[PROMPT_BOX])
    with pytest.raises(ValueError, match="shape"):
        tracker.add_prompt(state, category="box", frame_index=0, boxes=[1, 2, 3])
    with pytest.raises(ValueError, match="inverted"):
        tracker.add_prompt(state, category="box", frame_index=0, boxes=[[50, 20, 30, 40]])
    with pytest.raises(ValueError, match="outside the 96x72 frame"):
        tracker.add_prompt(state, category="box", frame_index=0, boxes=[[200, 100, 300, 200]])
    assert state.prompts == {}
    tracker.add_prompt(state, category="box", frame_index=0, boxes=[[-5, -5, 20, 20]])
    assert state.prompts[0][0].box.tolist() == [0, 0, 20, 20]  # clipped to the frame
    for _ in tracker.propagate(state):
        pass
    with pytest.raises(ValueError, match="already"):
        tracker.propagate(state)
    with pytest.raises(ValueError, match="already"):
        tracker.add_prompt(state, category="box", frame_index=0, boxes=[PROMPT_BOX])


# -- pure pieces ------------------------------------------------------------------------------------
def test_anchor_frames():
    assert anchor_frames(24, 8, 3) == [0, 8, 16]
    assert anchor_frames(5, 30, 8) == [0]
    assert anchor_frames(100, 10, 4) == [0, 33, 66, 99]
    assert anchor_frames(0, 10, 4) == []


def _identity(pid, anchor, frames, offset=0, size=10, score=0.9, category="person"):
    obs = {}
    for f in frames:
        grid = np.zeros((64, 64), dtype=bool)
        grid[10:10 + size, offset + f:offset + f + size] = True
        box = np.array([offset + f, 10, offset + f + size, 10 + size], dtype=np.float32)
        obs[f] = Observation(box, score, MaskCrop.from_mask(grid))
    return AnchorIdentity(pid, anchor, category, obs)


def test_mask_iou_on_crops_matches_full_masks():
    rng = np.random.default_rng(0)
    for _ in range(50):
        a, b = rng.random((20, 30)) > 0.7, rng.random((20, 30)) > 0.6
        a[:, :5] = False
        b[15:] = False
        union = np.logical_or(a, b).sum()
        assert mask_iou(MaskCrop.from_mask(a), MaskCrop.from_mask(b)) == pytest.approx(
            np.logical_and(a, b).sum() / union
        )
    assert mask_iou(None, MaskCrop.from_mask(np.ones((3, 3), bool))) == 0.0


def test_merging_identities_across_anchors():
    a = _identity(1, 0, range(12))                          # anchor 0
    b = _identity(2, 8, range(2, 20), score=0.5)                # same object, anchor 8
    c = _identity(3, 8, range(2, 20), offset=30)                # another object on anchor 8
    d = _identity(4, 0, range(12), offset=1)                 # near-copy of a, also anchor 0
    e = _identity(5, 8, range(2, 20), category="car")           # same pixels, other category
    empty = AnchorIdentity(6, 16, "person")                      # no observations
    proposals = merge_anchor_identities([a, b, c, d, e, empty], merge_iou=0.5)
    by_id = {p.track_id: p for p in proposals}
    # b joins a (IoU 1 beats d's 0.82); d cannot join too: it shares a's anchor
    assert sorted(by_id) == [1, 3, 4, 5]
    assert by_id[1].extra == {"anchors": [0, 8], "members": [1, 2]}
    assert by_id[1].frames.tolist() == list(range(20))
    # on shared frames 2..11 the member with the nearer anchor gives the observation (on the
    # tie at frame 4, the higher score)
    np.testing.assert_allclose(by_id[1].scores, [0.9 if f <= 4 else 0.5 for f in range(20)])
    assert by_id[5].category == "car" and by_id[5].extra["members"] == [5]
    assert merge_anchor_identities([a, b], merge_iou=1.0)[0].extra["members"] == [1, 2]
    assert len(merge_anchor_identities([a, c], merge_iou=0.01)) == 2
