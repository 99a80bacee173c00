"""Matching proposals to annotated tubes (seed D.1): hand-computed cases and a plain-loop reference."""
from __future__ import annotations

import numpy as np
import pytest

from models.curation.tube_matching import (
    AMBIGUOUS,
    INTERMEDIATE,
    LOW_OVERLAP,
    MATCHED,
    POSITIVE,
    UNMATCHED,
    Track,
    TubeMatchConfig,
    frame_ious,
    match_tubes,
    overlap,
)


def track(id_, frames, boxes):
    return Track(id_, np.asarray(frames), np.asarray(boxes, float).reshape(-1, 4))


def test_max_iou_coverage_and_mean_iou_by_hand():
    # tube: frames 0-3, the box [0,0,10,10] on each
    tube = track(1, [0, 1, 2, 3], [[0, 0, 10, 10]] * 4)
    # frame 0 exact (IoU 1); frame 1 shifted 5 px (50 / 150 = 1/3); frame 2 absent (0);
    # frame 3 twice as tall (100 / 200 = 0.5); frame 7 outside G_b does not count
    prop = track(9, [0, 1, 3, 7], [[0, 0, 10, 10], [5, 0, 15, 10], [0, 0, 10, 20], [50, 50, 60, 60]])
    np.testing.assert_allclose(frame_ious(tube, prop), [1.0, 1 / 3, 0.0, 0.5])
    pair = overlap(tube, prop, TubeMatchConfig())
    assert pair.max_iou == pytest.approx(1.0)
    assert pair.coverage == pytest.approx(2 / 4)                  # C_0.5: frames 0 and 3
    assert pair.mean_iou == pytest.approx((1 + 1 / 3 + 0 + 0.5) / 4)
    assert pair.relation == POSITIVE                              # 0.5 ≥ 0.5 and 0.458 ≥ 0.4
    # a stricter mean-IoU screening turns the same overlap into an intermediate one
    assert overlap(tube, prop, TubeMatchConfig(min_mean_iou=0.5)).relation == INTERMEDIATE
    # C_τ at τ = 0.3 also counts frame 1 (1/3 ≥ 0.3)
    assert overlap(tube, prop, TubeMatchConfig(tau=0.3)).coverage == pytest.approx(3 / 4)


def test_tau_safe_proposes_low_overlap_negatives_only_below_0_2():
    tube = track(1, [0, 1], [[0, 0, 10, 10]] * 2)
    # IoU on frame 0: [8,0,18,10] overlaps 2x10 = 20 of 180 → 0.111 < 0.2
    low = track(2, [0], [[8, 0, 18, 10]])
    # IoU [5,0,15,10] → 1/3 ≥ 0.2: neither positive (C = 0) nor negative
    mid = track(3, [0, 1], [[5, 0, 15, 10]] * 2)
    cfg = TubeMatchConfig()
    assert overlap(tube, low, cfg).max_iou == pytest.approx(20 / 180)
    assert overlap(tube, low, cfg).relation == LOW_OVERLAP
    assert overlap(tube, mid, cfg).relation == INTERMEDIATE
    report = match_tubes([tube], [low, mid], cfg)
    (out,) = report.tubes
    assert out.status == UNMATCHED and out.negative_candidates == [2] and out.ignored == [3]


def test_matched_ambiguous_and_unmatched_tubes():
    frames = list(range(10))
    a = track(1, frames, [[0, 0, 10, 10]] * 10)                   # person A, left
    b = track(2, frames, [[100, 0, 110, 10]] * 10)                # person B, right
    c = track(3, frames, [[200, 0, 210, 10]] * 10)                # person C, nobody tracks it
    follows_a = track(10, range(0, 30), [[0, 0, 10, 10]] * 30)    # full extent beyond G_b is kept
    # switches from B to C half-way: positive of B (C = 0.5) and of C? only 5 of C's 10 frames → C_τ 0.5 too
    switcher = track(11, frames, [[100, 0, 110, 10]] * 5 + [[200, 0, 210, 10]] * 5)
    far = track(12, frames, [[400, 300, 420, 340]] * 10)
    report = match_tubes([a, b, c], [follows_a, switcher, far])
    status = {t.tube: t for t in report.tubes}
    assert status[1].status == MATCHED and status[1].raw_positives == [10]
    assert status[2].status == AMBIGUOUS and status[2].positive_candidates == [11] and status[2].raw_positives == []
    assert "tube(s) [3]" in status[2].reasons["11"]
    assert status[3].status == AMBIGUOUS
    assert report.counts() == {MATCHED: 1, AMBIGUOUS: 2, UNMATCHED: 0}
    # the far track is a negative candidate of every tube; A's track is one for B and C
    assert status[2].negative_candidates == [10, 12]
    # without the switcher, C has no positive at all
    report = match_tubes([a, b, c], [follows_a, far])
    assert [t.status for t in report.tubes] == [MATCHED, UNMATCHED, UNMATCHED]


def test_a_track_that_briefly_follows_another_tube_is_not_identity_checked():
    frames = list(range(10))
    a = track(1, frames, [[0, 0, 10, 10]] * 10)
    b = track(2, range(20, 30), [[0, 0, 10, 10]] * 10)            # B stands where A stood, later
    # covers A fully, then follows B on 3 of B's frames (still only C = 0.3 for B: not its positive)
    r = track(5, [*frames, 20, 21, 22], [[0, 0, 10, 10]] * 13)
    report = match_tubes([a, b], [r])
    out_a = report.tubes[0]
    assert out_a.status == AMBIGUOUS and out_a.raw_positives == []
    assert "3 frame(s) of tube 2" in out_a.reasons["5"]


def test_possible_same_identity_fragments_are_not_proposed_as_negatives():
    tube = track(1, range(10), [[0, 0, 10, 10]] * 10)
    main = track(5, range(10), [[0, 0, 10, 10]] * 10)
    fragment = track(6, range(10, 20), [[0, 0, 10, 10]] * 10)     # after the tube's interval: maxIoU 0
    other = track(7, range(10), [[300, 300, 310, 310]] * 10)
    out = match_tubes([tube], [main, fragment, other], same_identity=[(5, 6)]).tubes[0]
    assert out.negative_candidates == [7]
    assert out.ignored == [6] and "fragment" in out.reasons["6"]


def test_against_a_plain_loop_on_random_tracks():
    rng = np.random.default_rng(0)

    def rand_track(i):
        frames = np.sort(rng.choice(40, size=rng.integers(3, 20), replace=False))
        xy = rng.uniform(0, 50, size=(len(frames), 2))
        wh = rng.uniform(5, 30, size=(len(frames), 2))
        return track(i, frames, np.hstack([xy, xy + wh]))

    def iou(p, q):
        ix = max(0.0, min(p[2], q[2]) - max(p[0], q[0]))
        iy = max(0.0, min(p[3], q[3]) - max(p[1], q[1]))
        inter = ix * iy
        return inter / ((p[2] - p[0]) * (p[3] - p[1]) + (q[2] - q[0]) * (q[3] - q[1]) - inter)

    cfg = TubeMatchConfig(tau=0.3)
    for _ in range(30):
        tube, prop = rand_track(1), rand_track(2)
        boxes = {int(f): b for f, b in zip(prop.frames, prop.boxes)}
        a = [iou(tb, boxes[int(f)]) if int(f) in boxes else 0.0 for f, tb in zip(tube.frames, tube.boxes)]
        got = overlap(tube, prop, cfg)
        assert got.max_iou == pytest.approx(max(a))
        assert got.coverage == pytest.approx(sum(x >= 0.3 for x in a) / len(a))
        assert got.mean_iou == pytest.approx(sum(a) / len(a))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="tau_safe"):
        TubeMatchConfig(tau_safe=0.5, min_mean_iou=0.4)
    with pytest.raises(ValueError, match="unknown"):
        TubeMatchConfig.from_dict({"tau": 0.5, "iou": 1})
    with pytest.raises(ValueError, match="unique"):
        match_tubes([track(1, [0], [[0, 0, 1, 1]])] * 2, [])
