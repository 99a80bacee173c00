"""Per-track and per-query features: the sampling rule of paper C.2, the geometry vector, crops read
from a rendered video checked against an independent read, and the disk cache (a second call
computes nothing)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.backends.encoders import HandcraftedAppearanceEncoder, build_text_encoder
from models.media.video import FrameReader
from models.retrievers.features import (
    FeatureConfig,
    FeatureExtractor,
    geometry_features,
    roi,
    uniform_positions,
)
from models.training.snapshot import (
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 300), k=st.integers(1, 40))
def test_uniform_positions(n, k):
    pos = uniform_positions(n, k)
    assert len(pos) == min(n, k)
    assert pos[0] == 0
    if len(pos) > 1:
        assert pos[-1] == n - 1                                   # both endpoints
        assert np.all(np.diff(pos) > 0)                           # distinct, increasing
        gaps = np.diff(pos)
        assert gaps.max() - gaps.min() <= 1                       # evenly spaced


def test_uniform_positions_examples_and_errors():
    assert uniform_positions(5, 1).tolist() == [0]
    assert uniform_positions(3, 32).tolist() == [0, 1, 2]
    assert uniform_positions(9, 3).tolist() == [0, 4, 8]
    with pytest.raises(ValueError):
        uniform_positions(0, 4)


def test_geometry_by_hand():
    frames = np.array([10, 20])
    boxes = np.array([[0, 0, 20, 40], [10, 0, 50, 40]], np.float32)   # 100x50 frame, 51 frames
    g = geometry_features(frames, boxes, 100, 50, 51)
    assert g.shape == (2, 8)
    np.testing.assert_allclose(g[0], [0.1, 0.4, 0.2, 0.8, 0.16, 0.0, 0.0, 0.2], rtol=1e-6)
    cx1 = 0.3
    np.testing.assert_allclose(g[1], [cx1, 0.4, 0.4, 0.8, 0.32, cx1 - 0.1, np.log(2.0), 0.4], rtol=1e-6)
    # one observation; a one-frame video does not divide by zero
    np.testing.assert_allclose(geometry_features([0], boxes[:1], 100, 50, 1)[0, 5:], [0, 0, 0])
    with pytest.raises(ValueError):
        geometry_features([1, 2], boxes[:1], 100, 50, 10)


def test_roi_is_clipped_and_never_empty():
    frame = np.arange(20 * 30 * 3, dtype=np.uint8).reshape(20, 30, 3)
    assert roi(frame, [5, 2, 15, 12], 0.0).shape == (10, 10, 3)
    assert roi(frame, [5, 2, 15, 12], 0.1).shape == (12, 12, 3)
    assert roi(frame, [-10, -10, 5, 5], 0.0).shape == (5, 5, 3)
    assert roi(frame, [40, 30, 50, 40], 0.0).shape == (1, 1, 3)        # outside: one edge pixel


class CountingEncoder(HandcraftedAppearanceEncoder):
    """The handcrafted encoder, counting what it is asked to encode."""

    def __init__(self):
        super().__init__()
        self.crops = 0
        self.frames = 0

    def encode_rois(self, frames, boxes):
        self.crops += sum(len(b) for b in boxes)
        return super().encode_rois(frames, boxes)

    def encode_frames(self, frames):
        self.frames += len(frames)
        return super().encode_frames(frames)


@pytest.fixture(scope="module")
def small_snapshot(rendered_small) -> RelationSnapshotData:
    gt = rendered_small.gt
    video = SnapshotVideo(1, str(rendered_small.path), gt.width, gt.height, gt.fps, gt.n_frames)
    tracks = [SnapshotTrack(10 + p.id, 1, p.frames(), p.boxes_array()[p.frames()]) for p in gt.people]
    queries = [SnapshotQuery(1, 1, "a person in a red top"), SnapshotQuery(2, 1, "someone walking left")]
    return RelationSnapshotData("train", [video], tracks, queries, [])


def test_track_features_from_a_rendered_video(small_snapshot, tmp_path):
    enc = CountingEncoder()
    fx = FeatureExtractor(FeatureConfig(n_fast_max=8, n_slow_budget=3, cache_dir=str(tmp_path)), enc, slow=enc)
    feats = fx.snapshot_tracks(small_snapshot)
    assert set(feats) == {(t.id, 0) for t in small_snapshot.tracks}
    video = small_snapshot.videos[0]
    with FrameReader(video.path) as reader:
        for t in small_snapshot.tracks:
            f = feats[(t.id, 0)]
            pick = uniform_positions(len(t.frames), 8)
            np.testing.assert_array_equal(f.frames, t.frames[pick])
            np.testing.assert_array_equal(f.boxes, t.boxes[pick])
            assert f.appearance.shape == (8, enc.dim) and f.geometry.shape == (8, 8)
            assert f.slow_positions.tolist() == [0, 4, 7]           # 3 of the 8, endpoints included
            # a_t equals the encoder on crops read independently (no pixel budget: the frame as it is)
            crops = [roi(reader.read(int(fr)), b, 0.0) for fr, b in zip(f.frames, f.boxes)]
            np.testing.assert_allclose(f.appearance, HandcraftedAppearanceEncoder().encode_crops(crops), rtol=1e-6)
            np.testing.assert_allclose(f.geometry, geometry_features(f.frames, f.boxes, video.width, video.height,
                                                                     video.n_frames), rtol=1e-6)
            slow_frames = [reader.read(int(f.frames[p])) for p in f.slow_positions]
            ctx = HandcraftedAppearanceEncoder().encode_frames(slow_frames)
            np.testing.assert_allclose(f.context_global, ctx.global_features, rtol=1e-6)
            assert f.context_tokens.shape == (3, 16, enc.dim) and f.context_mask.all()
    n_tracks = len(small_snapshot.tracks)
    assert enc.crops == 8 * n_tracks
    # tracks of one video share frames: each distinct Slow frame is encoded once
    distinct = {int(f.frames[p]) for f in feats.values() for p in f.slow_positions}
    assert enc.frames == len(distinct) < 3 * n_tracks

    # a second extractor over the same folder computes nothing and gives the same numbers
    enc2 = CountingEncoder()
    fx2 = FeatureExtractor(FeatureConfig(n_fast_max=8, n_slow_budget=3, cache_dir=str(tmp_path)), enc2, slow=enc2)
    again = fx2.snapshot_tracks(small_snapshot)
    assert enc2.crops == 0 and enc2.frames == 0 and fx2.cache.stats["hits"] == n_tracks
    for key, f in feats.items():
        np.testing.assert_array_equal(again[key].appearance, f.appearance)
        assert again[key].key == key
    # other observations (a training variant) are a different entry: only they are computed
    t0 = small_snapshot.tracks[0]
    extra = {(t0.id, 1): (t0.frames[::2], t0.boxes[::2] + 1.0)}
    out = fx2.snapshot_tracks(small_snapshot, extra)
    assert out[(t0.id, 1)].variant == 1 and enc2.crops == min(8, len(t0.frames[::2]))
    # other sampling settings are a different entry too
    fx3 = FeatureExtractor(FeatureConfig(n_fast_max=4, cache_dir=str(tmp_path)), enc2, slow=enc2)
    assert fx3.snapshot_tracks(small_snapshot)[(t0.id, 0)].appearance.shape == (4, enc.dim)


def test_bad_records_are_refused(small_snapshot, tmp_path):
    fx = FeatureExtractor(FeatureConfig(cache_dir=None), HandcraftedAppearanceEncoder())
    t0 = small_snapshot.tracks[0]
    with pytest.raises(ValueError, match="variant 0"):
        fx.snapshot_tracks(small_snapshot, {(t0.id, 0): (t0.frames, t0.boxes)})
    with pytest.raises(ValueError, match="unknown trajectory"):
        fx.snapshot_tracks(small_snapshot, {(999, 1): (t0.frames, t0.boxes)})
    with pytest.raises(ValueError, match="frames must increase"):
        fx.video_tracks(small_snapshot.videos[0], {(t0.id, 1): (t0.frames[::-1], t0.boxes)})
    with pytest.raises(ValueError, match="n_slow_budget"):
        FeatureConfig(n_slow_budget=5)


def test_text_features_are_cached(tmp_path):
    text = build_text_encoder()
    calls = []
    original = text.encode

    def counting(texts):
        calls.append(list(texts))
        return original(texts)

    text.encode = counting
    fx = FeatureExtractor(FeatureConfig(cache_dir=str(tmp_path)), HandcraftedAppearanceEncoder(), text=text)
    texts = ["a person in red", "someone walking to the left at a fast pace", "a person in red"]
    first = fx.text_features([3, 1, 2], texts)
    assert calls == [["a person in red", "someone walking to the left at a fast pace"]]   # distinct texts once
    assert first.pooled.shape == (3, 384) and first.tokens.shape[0] == 3
    np.testing.assert_array_equal(first.pooled[0], first.pooled[2])
    assert first.mask[1].sum() > first.mask[0].sum()
    assert first.rows([2, 3]).tolist() == [2, 0]
    second = fx.text_features([1], ["someone walking to the left at a fast pace"])
    assert len(calls) == 1                                                                 # cache hit
    np.testing.assert_allclose(second.tokens[0, :second.mask[0].sum()], first.tokens[1, :first.mask[1].sum()])
    with pytest.raises(KeyError, match="query 9"):
        first.rows([9])
