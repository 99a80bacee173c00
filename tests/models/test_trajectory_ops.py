from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from models.media.trajectory_ops import (
    DuplicateSettings,
    TrajectoryError,
    appearance_descriptor,
    box_iou,
    longest_run,
    pair_signals,
    propose_duplicate_pairs,
    quality_signals,
    validate_observations,
)


def track(start, n, x=0.0, dx=1.0, y=0.0, w=10.0, h=20.0):
    f = np.arange(start, start + n)
    xs = x + dx * (f - start)
    return f, np.stack([xs, np.full(n, y), xs + w, np.full(n, y + h)], axis=1)


def slow_iou(a, b):
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


boxes = st.tuples(st.floats(0, 100), st.floats(0, 100), st.floats(1, 50), st.floats(1, 50)).map(
    lambda t: [t[0], t[1], t[0] + t[2], t[1] + t[3]])


@hsettings(max_examples=200, deadline=None)
@given(a=boxes, b=boxes)
def test_box_iou_matches_a_plain_loop(a, b):
    assert box_iou(np.array([a]), np.array([b]))[0] == pytest.approx(slow_iou(a, b), abs=1e-9)


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 500), min_size=1, max_size=60, unique=True))
def test_longest_run_matches_a_plain_loop(values):
    frames = np.array(sorted(values))
    best = run = 1
    for prev, cur in itertools.pairwise(frames):
        run = run + 1 if cur == prev + 1 else 1
        best = max(best, run)
    assert longest_run(frames) == best


def test_quality_signals_count_abrupt_jumps():
    f, b = track(0, 10, dx=1)
    b[6:] += [200, 0, 200, 0]  # a teleport between frames 5 and 6
    q = quality_signals(f, b)
    assert q.abrupt_changes == 1 and q.longest_run == 10 and q.temporal_coverage == 1.0
    b2 = b.copy()
    b2[8, 2:] += 30  # a box that suddenly grows
    assert quality_signals(f, b2).abrupt_changes >= 2


@pytest.mark.parametrize("mutate, message", [
    (lambda f, b: b.__setitem__((1, 0), np.nan), "not finite"),
    (lambda f, b: b.__setitem__((1, 2), 1000), "outside"),
    (lambda f, b: b.__setitem__((1, 1), -3), "outside"),
    (lambda f, b: b.__setitem__(1, [5, 5, 5, 9]), "empty or inverted"),
    (lambda f, b: f.__setitem__(1, 0), "strictly increasing"),
    (lambda f, b: f.__setitem__(2, 99), "outside 0..49"),
])
def test_validate_observations_names_the_problem(mutate, message):
    f, b = track(0, 5)
    mutate(f, b)
    with pytest.raises(TrajectoryError, match=message):
        validate_observations(f, b, width=100, height=100, frame_count=50)


def test_overlapping_tracks_are_proposed_with_their_iou():
    fa, ba = track(0, 20)
    fb, bb = track(5, 20, x=5.5)
    sig = pair_signals(fa, ba, fb, bb)
    assert "overlap" in sig.reasons and sig.covisible == 15 and sig.mean_iou > 0.8


def test_adjacent_fragments_are_proposed():
    fa, ba = track(0, 20, dx=2)             # ends near x=38 on frame 19
    fb, bb = track(25, 20, x=48, dx=2)      # starts 6 frames later where the first would be
    sig = pair_signals(fa, ba, fb, bb)
    assert sig.reasons == ["adjacent"] and sig.gap_frames == 6
    far = pair_signals(fa, ba, *track(25, 20, x=500))
    assert far.reasons == []
    late = pair_signals(fa, ba, *track(200, 20, x=48))
    assert "adjacent" not in late.reasons


def test_appearance_links_only_tracks_not_seen_apart_at_once():
    fa, ba = track(0, 10)
    fb, bb = track(0, 10, x=300)  # simultaneously visible elsewhere: a different object
    app = np.ones(4, np.float32) / 2
    assert "appearance" not in pair_signals(fa, ba, fb, bb, app, app).reasons
    fc, bc = track(100, 10, x=150)  # later, walked elsewhere, same look
    assert pair_signals(fa, ba, fc, bc, app, app).reasons == ["appearance"]
    other = np.array([1, 0, 0, 0], np.float32)
    assert pair_signals(fa, ba, fc, bc, app, other).reasons == []


def test_propose_pairs_orders_ids_and_skips_unrelated():
    t1, t2, t3 = track(0, 20), track(0, 20, x=0.5), track(0, 20, x=400)
    pairs = propose_duplicate_pairs([(9, *t1, None), (4, *t2, None), (7, *t3, None)], DuplicateSettings())
    assert [(p.a, p.b) for p in pairs] == [(4, 9)]


def test_appearance_descriptor_separates_upper_and_lower_colours():
    red_over_blue = np.zeros((100, 50, 3), np.uint8)
    red_over_blue[:50] = (0, 0, 220)
    red_over_blue[50:] = (220, 0, 0)
    blue_over_red = red_over_blue[::-1].copy()
    box = [0, 0, 50, 100]
    a, b = appearance_descriptor(red_over_blue, box), appearance_descriptor(blue_over_red, box)
    assert np.dot(a, a) == pytest.approx(1.0, abs=1e-5)
    assert np.dot(a, b) < 0.5


def test_appearance_needs_a_reachable_gap():
    fa, ba = track(0, 10)                    # ends at x≈9 on frame 9, 20 px tall
    app = np.ones(4, np.float32) / 2
    too_far = track(14, 10, x=300)           # 5 frames later, 15 heights away: nobody walks that fast
    assert "appearance" not in pair_signals(fa, ba, *too_far, app, app).reasons
    reachable = track(14, 10, x=30)          # 5 frames later, about one height away
    assert "appearance" in pair_signals(fa, ba, *reachable, app, app).reasons


def test_interleaved_fragments_use_the_nearest_observations():
    # One identity lost and re-found: frames {0, 10, 20} and {5, 15} share none but interleave.
    fa = np.array([0, 10, 20])
    ba = np.array([[0, 0, 10, 20], [10, 0, 20, 20], [20, 0, 30, 20]], float)
    fb = np.array([5, 15])
    bb = np.array([[5, 0, 15, 20], [15, 0, 25, 20]], float)
    sig = pair_signals(fa, ba, fb, bb)
    assert sig.gap_frames == 5 and sig.endpoint_iou > 0.3 and "adjacent" in sig.reasons


@hsettings(max_examples=100, deadline=None)
@given(st.sets(st.integers(0, 300), min_size=1, max_size=30), st.sets(st.integers(0, 300), min_size=1, max_size=30))
def test_nearest_in_time_matches_brute_force(a, b):
    from models.media.trajectory_ops import _nearest_in_time

    b = b - a
    if not b:
        return
    fa, fb = np.array(sorted(a)), np.array(sorted(b))
    i, j, gap = _nearest_in_time(fa, fb)
    assert gap == min(abs(x - y) for x in fa for y in fb) == abs(fa[i] - fb[j])


@hsettings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(1, 40), st.floats(0, 300), st.floats(-3, 3)),
                min_size=2, max_size=12), st.integers(0, 3))
def test_the_sweep_finds_exactly_the_pairs_of_a_full_comparison(specs, seed):
    rng = np.random.default_rng(seed)
    tracks = []
    for k, (start, n, x, dx) in enumerate(specs):
        f, b = track(start, n, x=x, dx=dx)
        app = rng.random(4).astype(np.float32)
        tracks.append((k * 7 + 3, f, b, app / np.linalg.norm(app)))
    settings = DuplicateSettings(min_appearance=0.8)
    brute = []
    for i in range(len(tracks)):
        for j in range(len(tracks)):
            a, b = tracks[i], tracks[j]
            if a[0] < b[0]:
                sig = pair_signals(a[1], a[2], b[1], b[2], a[3], b[3], settings, a=a[0], b=b[0])
                if sig.reasons:
                    brute.append((sig.a, sig.b, tuple(sig.reasons)))
    swept = [(p.a, p.b, tuple(p.reasons)) for p in propose_duplicate_pairs(tracks, settings)]
    assert swept == sorted(brute)


# -- the indexed duplicate proposals against the pairwise oracle (issue 27, finding 2) ------------
def _random_tracks(rng, n: int, *, n_frames: int, size: float, apps: bool, shared_look: float):
    """``n`` tracks on ``n_frames`` frames of a ``size`` px square: random spans with gaps (so some
    interleave), boxes that drift, some copies of another track moved a little (duplicates), and
    descriptors that are near copies of a few looks."""
    looks = rng.random((4, 6)).astype(np.float32)
    tracks = []
    for k in range(n):
        if tracks and rng.random() < 0.3:                         # a fragment or copy of an earlier track
            _, f0, b0, _ = tracks[int(rng.integers(len(tracks)))]
            keep = np.sort(rng.choice(len(f0), size=max(1, int(len(f0) * rng.uniform(0.3, 1))), replace=False))
            shift = int(rng.integers(-3, 4))
            frames = np.unique(np.clip(f0[keep] + shift, 0, n_frames - 1))
            boxes = b0[np.searchsorted(f0, np.clip(frames - shift, f0[0], f0[-1])).clip(0, len(f0) - 1)]
            boxes = boxes + rng.normal(0, 3, size=boxes.shape)
        else:
            start = int(rng.integers(0, n_frames))
            length = int(rng.integers(1, 25))
            frames = np.unique(np.clip(start + np.cumsum(rng.integers(1, 4, size=length)), 0, n_frames - 1))
            xy = rng.uniform(0, size, 2) + np.cumsum(rng.normal(0, 2, size=(len(frames), 2)), axis=0)
            wh = rng.uniform(5, 40, 2)
            boxes = np.hstack([xy, xy + wh])
        boxes[:, 2:] = np.maximum(boxes[:, 2:], boxes[:, :2] + 1)
        app = None
        if apps and rng.random() < 0.9:
            app = looks[int(rng.integers(len(looks)))] + rng.normal(0, shared_look, 6).astype(np.float32)
            app = (app / np.linalg.norm(app)).astype(np.float32)
        tracks.append((int(rng.integers(0, 10**6)) * 1000 + k, frames.astype(np.int64), boxes, app))
    return tracks


def _pairs(signals):
    return [(p.a, p.b, tuple(p.reasons), p.covisible, p.gap_frames) for p in signals]


@pytest.mark.parametrize("seed", range(12))
def test_indexed_duplicate_proposals_equal_the_pairwise_comparison(seed):
    from models.media.trajectory_ops import propose_duplicate_pairs_pairwise

    rng = np.random.default_rng(seed)
    tracks = _random_tracks(rng, n=int(rng.integers(20, 90)), n_frames=int(rng.integers(20, 200)),
                            size=float(rng.uniform(60, 400)), apps=seed % 3 != 0, shared_look=0.02)
    settings = [DuplicateSettings(), DuplicateSettings(min_appearance=0.9, max_gap_frames=5),
                DuplicateSettings(min_mean_iou=0.0, min_covisible=1, min_endpoint_iou=0.0)][seed % 3]
    indexed = propose_duplicate_pairs(tracks, settings)
    pairwise = propose_duplicate_pairs_pairwise(tracks, settings)
    assert pairwise, "the case proposes pairs, so it can tell the two apart"
    assert _pairs(indexed) == _pairs(pairwise)
    for a, b in zip(indexed, pairwise):
        assert (a.mean_iou, a.endpoint_iou, a.appearance) == (b.mean_iou, b.endpoint_iou, b.appearance)


def test_indexed_proposals_find_co_visible_interleaved_and_adjacent_pairs_among_many():
    from models.media.trajectory_ops import propose_duplicate_pairs_pairwise

    rng = np.random.default_rng(7)
    tracks = _random_tracks(rng, n=400, n_frames=60, size=300, apps=True, shared_look=0.01)
    indexed = propose_duplicate_pairs(tracks)
    reasons = {r for p in indexed for r in p.reasons}
    assert reasons == {"overlap", "adjacent", "appearance"}
    assert any(p.covisible == 0 and p.gap_frames is not None and p.gap_frames < 5 for p in indexed)
    assert _pairs(indexed) == _pairs(propose_duplicate_pairs_pairwise(tracks))


def test_appearance_of_many_tracks_reads_each_frame_once_and_equals_one_by_one():
    from models.media.trajectory_ops import trajectories_appearance, trajectory_appearance

    rng = np.random.default_rng(3)
    images = {f: rng.integers(0, 255, size=(120, 160, 3), dtype=np.uint8) for f in range(30)}
    reads = []

    def read(f):
        reads.append(f)
        return images[f]

    tracks = []
    for _ in range(25):
        frames = np.sort(rng.choice(30, size=int(rng.integers(1, 12)), replace=False))
        xy = rng.uniform(0, 100, size=(len(frames), 2))
        tracks.append((frames, np.hstack([xy, xy + rng.uniform(8, 50, size=(len(frames), 2))])))
    batched = trajectories_appearance(read, tracks)
    assert reads == sorted(set(reads))                               # in order, each frame once
    for (frames, boxes), vec in zip(tracks, batched):
        np.testing.assert_array_equal(vec, trajectory_appearance(images.__getitem__, frames, boxes))


def test_the_index_finds_adjacent_wide_boxes_whose_centres_lie_far_apart():
    """Wide, flat boxes overlap with IoU 0.053 while their centres lie 90 px (9 heights) apart: the
    index's grid must reach as far as the widest box."""
    frames_a, frames_b = np.arange(0, 5), np.arange(6, 11)
    wide_a = np.tile([9.0, 100.0, 109.0, 110.0], (5, 1))                  # ends centred at x 59
    wide_b = np.tile([99.0, 100.0, 199.0, 110.0], (5, 1))                 # starts centred at x 149
    small = (np.arange(50, 56), np.tile([5.0, 300.0, 15.0, 320.0], (6, 1)))
    tracks = [(1, frames_a, wide_a, None), (2, frames_b, wide_b, None), (3, *small, None)]
    (pair,) = propose_duplicate_pairs(tracks)
    assert (pair.a, pair.b, pair.reasons, pair.gap_frames) == (1, 2, ["adjacent"], 2)
    assert pair.endpoint_iou == pytest.approx(100 / 1900)
