"""The SAM 3 tracker on a small random-weight SAM 3, built, saved and loaded by the sam3 package.

Random weights give arbitrary masks: these tests check the code path (the builder's loading,
frame feeding, text and exemplar prompts, forward and backward propagation, mask -> box,
identities) and every refusal, not accuracy. Boxes are checked against the boxes SAM 3 itself
reports for the same masks (``out_boxes_xywh``, inclusive pixel corners, normalised). A model
that finds nothing, stored as an empty run, is in ``tests/trajectories/test_proposals.py``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from models.backends.tracking.base import FrameObjects, TrackerConfigError, mask_boxes, run_tracker
from models.backends.tracking.sam3_tracker import (
    MAX_CONCEPT_CHARS,
    CudaToCpu,
    Sam3Tracker,
    Sam3TrackerConfig,
)
from models.media.video import FrameReader, content_sha256
from tests.conftest import write_video
from tests.models.sam3_tiny import tiny_sam3_architecture

N_FRAMES, WIDTH, HEIGHT = 3, 160, 120

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def small_sam3():
    """The tiny architecture for every build and load in this module."""
    with tiny_sam3_architecture():
        yield


@pytest.fixture(scope="module")
def checkpoint(sam3_tiny_checkpoint):
    return sam3_tiny_checkpoint


@pytest.fixture(scope="module")
def tracker(checkpoint):
    return Sam3Tracker(Sam3TrackerConfig(checkpoint=str(checkpoint), device="cpu"))


@pytest.fixture(scope="module")
def video(tmp_path_factory):
    path = write_video(tmp_path_factory.mktemp("video") / "moving.mp4", n_frames=N_FRAMES, size=(WIDTH, HEIGHT))
    reader = FrameReader(str(path))
    yield reader
    reader.close()


# -- pieces ------------------------------------------------------------------------------------------
def test_mask_boxes_are_pixel_edge_boxes_of_torch_and_numpy_masks():
    masks = np.zeros((3, 10, 12), dtype=bool)
    masks[0, 2:5, 3:9] = True          # rows 2..4, cols 3..8
    masks[1, 9, 11] = True             # the bottom-right pixel
    boxes, areas = mask_boxes(masks)
    assert boxes.dtype == np.float32 and areas.tolist() == [18, 1, 0]
    assert boxes[0].tolist() == [3, 2, 9, 5] and boxes[1].tolist() == [11, 9, 12, 10]
    same, _ = mask_boxes(torch.from_numpy(masks))
    assert np.array_equal(same[:2], boxes[:2])
    empty_boxes, empty_areas = mask_boxes(np.zeros((0, 10, 12), dtype=bool))
    assert empty_boxes.shape == (0, 4) and empty_areas.shape == (0,)


def test_cuda_requests_run_on_the_cpu_only_inside_the_mode():
    with CudaToCpu():
        a = torch.zeros(3, device="cuda")
        b = torch.ones(2, device=torch.device("cuda", 0)).cuda()
        c = torch.arange(4).to("cuda:0").pin_memory()
        d = torch.empty(2).to(device="cuda", dtype=torch.float16)
    assert {t.device.type for t in (a, b, c, d)} == {"cpu"} and d.dtype == torch.float16
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.zeros(1, device="cuda")  # nothing was changed globally


def test_settings_that_cannot_mean_anything_are_refused():
    for bad, match in (({"model_config": "sam3.yaml"}, "model_config must be empty"),
                       ({"categories": []}, "categories"), ({"categories": ["  "]}, "categories"),
                       ({"score_threshold": float("nan")}, "score_threshold"),
                       ({"new_object_threshold": 1.5}, "new_object_threshold"),
                       ({"max_propagation_frames": -1}, "max_propagation_frames"),
                       ({"min_mask_area": 0}, "min_mask_area"), ({"device": "tpu"}, "device")):
        with pytest.raises(ValueError, match=match):
            Sam3TrackerConfig(**bad)
    with pytest.raises(ValueError, match="score_treshold"):
        Sam3TrackerConfig.from_dict({"score_treshold": 0.3})
    # the query-conditioned concept prompt (seed 002 C.1): text, not blank, short, one category
    for concept, match in (("   ", "blank"), (5, "must be text"), ("red\x00umbrella", "control characters"),
                           ("x" * (MAX_CONCEPT_CHARS + 1), f"at most {MAX_CONCEPT_CHARS}")):
        with pytest.raises(ValueError, match=match):
            Sam3TrackerConfig(concept=concept)
    with pytest.raises(ValueError, match="exactly one category"):
        Sam3TrackerConfig(concept="person with a red umbrella", categories=["person", "car"])
    assert Sam3TrackerConfig(concept=" person  with a\tred umbrella ").concept == "person with a red umbrella"


# -- loading -----------------------------------------------------------------------------------------
def test_a_missing_checkpoint_is_an_error_naming_the_file(tmp_path):
    missing = tmp_path / "weights" / "sam3.pt"
    with pytest.raises(TrackerConfigError, match=r"SAM 3 checkpoint not found: .*weights/sam3.pt.*huggingface.co/facebook/sam3"):
        Sam3Tracker(Sam3TrackerConfig(checkpoint=str(missing), device="cpu"))
    with pytest.raises(TrackerConfigError, match=r"not found: \(none set\)"):
        Sam3TrackerConfig().check_files()
    with pytest.raises(TrackerConfigError, match="vocabulary not found: .*nowhere.txt.gz"):
        Sam3TrackerConfig(checkpoint=str(__file__), bpe_path=str(tmp_path / "nowhere.txt.gz")).check_files()


def test_a_corrupt_or_foreign_checkpoint_is_a_clear_error(tmp_path, checkpoint):
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(checkpoint.read_bytes()[:4096])
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint at all")
    foreign = tmp_path / "sam2.pt"
    torch.save({"model": {"image_encoder.weight": torch.zeros(2, 2)}}, foreign)
    for path in (truncated, garbage, foreign):
        with pytest.raises(TrackerConfigError, match=f"SAM 3 checkpoint {path} does not load into SAM 3's video model"):
            Sam3Tracker(Sam3TrackerConfig(checkpoint=str(path), device="cpu"))


def test_a_cuda_device_without_cuda_is_refused(checkpoint):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(TrackerConfigError, match="CUDA is not available"):
        Sam3Tracker(Sam3TrackerConfig(checkpoint=str(checkpoint), device="cuda"))


# -- running -----------------------------------------------------------------------------------------
def test_text_prompt_tracks_with_boxes_from_sam3s_own_masks(tracker, video, monkeypatch):
    reported = []  # what SAM 3 returned per frame, next to what the tracker made of it
    observe = tracker._observe

    def spy(state, category, frame_idx, outputs):
        objects = observe(state, category, frame_idx, outputs)
        reported.append((frame_idx, {k: np.asarray(outputs[k]) for k in ("out_obj_ids", "out_boxes_xywh")}, objects))
        return objects

    monkeypatch.setattr(tracker, "_observe", spy)
    steps = []
    proposals = run_tracker(tracker, video, ["person"], progress=lambda f, m: steps.append(f))
    assert steps == sorted(steps) and steps[-1] == 1.0 and len(steps) == N_FRAMES
    assert sorted(f for f, _, _ in reported) == list(range(N_FRAMES))
    assert proposals, "the tiny model detects on every frame: SAM 3 must report its masklet"
    for _, out, objects in reported:
        # every reported mask is non-empty at this size, so every object has an observation
        assert len(objects) == len(out["out_obj_ids"])
        for (_, box, score), xywh in zip(objects, out["out_boxes_xywh"]):
            x0, y0 = xywh[0] * WIDTH, xywh[1] * HEIGHT
            x1, y1 = x0 + xywh[2] * WIDTH, y0 + xywh[3] * HEIGHT          # SAM 3: inclusive corners
            np.testing.assert_allclose(box, [x0, y0, x1 + 1, y1 + 1], atol=0.01)
            assert 0 <= box[0] < box[2] <= WIDTH and 0 <= box[1] < box[3] <= HEIGHT and 0 <= score <= 1
    # identities: one track per (category, SAM 3 object id), numbered as they appear
    assert [p.track_id for p in proposals] == list(range(1, len(proposals) + 1))
    assert len({p.extra["sam3_obj_id"] for p in proposals}) == len(proposals)
    assert all(p.category == "person" and p.extra["prompt"] == "person" for p in proposals)
    assert sum(len(p.frames) for p in proposals) == sum(len(o) for _, _, o in reported)
    info = tracker.run_info()
    assert info["checkpoint_sha256"] == content_sha256(tracker.checkpoint_path) and info["prompts"] == ["person"]
    assert info["device"] == "cpu" and info["autocast"] == "bfloat16" and info["fill_hole_area"] == 0
    assert not torch.is_autocast_enabled("cuda") and not torch.is_autocast_enabled("cpu")  # nothing left on


def test_a_concept_is_sam3s_text_prompt_for_its_category(tracker, video, monkeypatch):
    concept = "person with a red umbrella"
    monkeypatch.setattr(tracker, "config", replace(tracker.config, concept=concept))
    sent = []                                                    # the text SAM 3 itself was given

    class Stop(Exception):
        """Raised once SAM 3 has its prompt: what it detects is the text prompt test's business."""

    def spy(session, **kwargs):
        sent.append((kwargs["frame_idx"], kwargs["text_str"]))
        raise Stop

    monkeypatch.setattr(tracker.model, "add_prompt", spy)
    state = tracker.init_state(video)
    tracker.add_prompt(state, category="person")
    with pytest.raises(Stop):
        next(tracker.propagate(state))
    assert sent == [(0, concept)]
    assert [(p.category, p.text) for p in state.prompts] == [("person", concept)]   # stored as a person
    info = tracker.run_info()
    assert info["prompts"] == [concept] and info["concept"] == concept


def test_exemplar_boxes_on_a_middle_frame_propagate_both_ways(tracker, video):
    state = tracker.init_state(video)
    tracker.add_prompt(state, category="car", frame_index=1, boxes=[[40, 30, 80, 70]])
    steps = list(tracker.propagate(state))
    assert all(isinstance(s, FrameObjects) for s in steps)
    assert [s.frame_index for s in steps] == [1, 2, 0]           # forward from the prompt, then back
    assert state.stats["sessions"] == 1 and state.stats["frames_processed"] == N_FRAMES
    proposals = tracker.proposals(state)
    assert proposals and {p.category for p in proposals} == {"car"}
    assert all(list(p.frames) == sorted(p.frames) for p in proposals)


def test_a_prompt_on_the_last_frame_is_tracked_backward(tracker, video):
    # sam3 would only fetch cached outputs for a pass that follows one from the last frame
    state = tracker.init_state(video)
    tracker.add_prompt(state, category="person", frame_index=N_FRAMES - 1)
    steps = list(tracker.propagate(state))
    assert [s.frame_index for s in steps] == [2, 1, 0]
    assert all(len(s.object_ids) > 0 for s in steps), [len(s.object_ids) for s in steps]
    observed = {f for p in tracker.proposals(state) for f in p.frames}
    assert observed == {0, 1, 2}


def test_two_categories_are_two_sessions_with_their_own_identities(checkpoint, video):
    tracker = Sam3Tracker(Sam3TrackerConfig(checkpoint=str(checkpoint), device="cpu", max_propagation_frames=0))
    state = tracker.init_state(video)
    tracker.add_prompt(state, category="person")
    tracker.add_prompt(state, category="dog", frame_index=1)
    steps = list(tracker.propagate(state))
    assert [s.frame_index for s in steps] == [0, 1] and state.stats["sessions"] == 2
    proposals = tracker.proposals(state)
    assert {p.category for p in proposals} == {"person", "dog"}
    assert len({p.track_id for p in proposals}) == len(proposals)


def test_bad_prompts_are_refused_before_anything_runs(tracker, video):
    state = tracker.init_state(video)
    for kwargs, match in (({"category": ""}, "non-empty"), ({"category": "person", "frame_index": N_FRAMES}, "outside"),
                          ({"category": "person", "boxes": [[1, 1, 5, 5]]}, "frame_index"),
                          ({"category": "person", "frame_index": 0, "boxes": [[10, 10, WIDTH + 5, 50]]}, "outside"),
                          ({"category": "person", "frame_index": 0, "boxes": [[10, float("nan"), 20, 50]]}, "not finite"),
                          ({"category": "person", "frame_index": 0, "boxes": [[30, 10, 20, 50]]}, "inverted"),
                          ({"category": "person", "frame_index": 0, "boxes": [1, 2, 3]}, "shape"),
                          ({"category": "person", "frame_index": 0, "boxes": [[1, 1, 9, 9], [20, 20, 40, 40]]},
                           "one exemplar box")):
        with pytest.raises(ValueError, match=match):
            tracker.add_prompt(state, **kwargs)
    with pytest.raises(ValueError, match="no prompts"):
        tracker.propagate(state)
    tracker.add_prompt(state, category="person")
    with pytest.raises(ValueError, match="already prompted"):
        tracker.add_prompt(state, category="person")
    with pytest.raises(ValueError, match="propagate the state"):
        tracker.proposals(state)
    with pytest.raises(TypeError, match="FrameSource"):
        tracker.init_state([np.zeros((HEIGHT, WIDTH, 3), np.uint8)])
    with pytest.raises(TypeError, match="init_state"):
        tracker.add_prompt(object(), category="person")
