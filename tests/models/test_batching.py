"""Training groups, the noisy-GT augmentation of paper B.3 / D.1 and relation-aware batches, on hand-built
snapshots whose labels are known, and the batch tensors against the loss's consistency rules."""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.training.batching import (
    CROSS_VIDEO,
    GROUP_SIZE,
    NEGATIVE,
    PLAN_VERSION,
    BatchingConfig,
    TrainBatch,
    TrainingPlan,
    noisy_gt,
)
from models.training.losses import mask_guided_loss
from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)

W, H = 200, 100


def track(tid: int, vid: int, n: int = 20, x: float = 50.0) -> SnapshotTrack:
    frames = np.arange(n, dtype=np.int32) * 2
    boxes = np.tile(np.array([[x, 20, x + 20, 80]], np.float32), (n, 1))
    boxes[:, [0, 2]] += np.arange(n)[:, None]
    return SnapshotTrack(tid, vid, frames, boxes)


def snapshot_with(relations: list[tuple[int, int, int]], *, pseudo: set[tuple[int, int]] = frozenset(),
                  n_videos: int = 3, n_tracks: int = 3) -> RelationSnapshotData:
    """Videos 1..n, each with tracks 10v+1..10v+n_tracks and one query 100v+1 whose target is 10v+1."""
    videos = [SnapshotVideo(v, f"/nonexistent/{v}.mp4", W, H, 10.0, 60) for v in range(1, n_videos + 1)]
    tracks = [track(10 * v + k, v, x=5.0 + 16 * k) for v in range(1, n_videos + 1) for k in range(1, n_tracks + 1)]
    queries = [SnapshotQuery(100 * v + 1, v, f"query {v}", target_id=10 * v + 1) for v in range(1, n_videos + 1)]
    rels = [Relation(q, t, lab, "pseudo" if (q, t) in pseudo else "human",
                     "within" if q // 100 == t // 10 else "easy_negative", pseudo=(q, t) in pseudo)
            for q, t, lab in relations]
    snap = RelationSnapshotData("train", videos, tracks, queries, rels)
    snap.validate()
    return snap


def within_rows(n_videos: int = 3) -> list[tuple[int, int, int]]:
    """Each query: its target matches, the second track does not, the third is ⊥."""
    return [(100 * v + 1, 10 * v + 1, 1) for v in range(1, n_videos + 1)] + \
           [(100 * v + 1, 10 * v + 2, 0) for v in range(1, n_videos + 1)] + \
           [(100 * v + 1, 10 * v + 3, -1) for v in range(1, n_videos + 1)]


# -- noisy GT --------------------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 80), seed=st.integers(0, 2**31))
def test_noisy_gt_properties(n, seed):
    t = track(1, 1, n=n)
    frames, boxes = noisy_gt(t.frames, t.boxes, W, H, np.random.default_rng(seed))
    assert 1 <= len(frames) <= max(1, n - 1)                      # a segment is always removed when n > 1
    assert set(frames.tolist()) <= set(t.frames.tolist()) and np.all(np.diff(frames) > 0)
    orig = t.boxes[np.searchsorted(t.frames, frames)]
    assert np.all(boxes[:, [0, 2]] >= 0) and np.all(boxes[:, [0, 2]] <= W)
    assert np.all(boxes[:, [1, 3]] >= 0) and np.all(boxes[:, [1, 3]] <= H)
    assert np.all(boxes[:, 2] > boxes[:, 0]) and np.all(boxes[:, 3] > boxes[:, 1])
    w0, h0 = orig[:, 2] - orig[:, 0], orig[:, 3] - orig[:, 1]
    # centre moved by at most 5% of the original size, sides scaled within [0.9, 1.1] (no clipping here)
    assert np.all(np.abs((boxes[:, 0] + boxes[:, 2]) - (orig[:, 0] + orig[:, 2])) / 2 <= 0.05 * w0 + 1e-4)
    assert np.all(np.abs((boxes[:, 1] + boxes[:, 3]) - (orig[:, 1] + orig[:, 3])) / 2 <= 0.05 * h0 + 1e-4)
    ratio = (boxes[:, 2] - boxes[:, 0]) / w0
    assert np.all((ratio >= 0.9 - 1e-5) & (ratio <= 1.1 + 1e-5))


def test_noisy_gt_removes_one_segment_of_ten_to_twenty_percent():
    t = track(1, 1, n=60)
    cfg = BatchingConfig(drop_probability=0.0)
    for seed in range(30):
        frames, _ = noisy_gt(t.frames, t.boxes, W, H, np.random.default_rng(seed), cfg)
        kept = np.searchsorted(t.frames, frames)
        gaps = np.flatnonzero(np.diff(np.concatenate([[-1], kept, [60]])) > 1)
        assert len(gaps) == 1                                                      # one contiguous hole
        assert 6 <= 60 - len(frames) <= 12                                         # 10-20% of 60
    # with drops, about 10% of the rest go too
    lengths = [len(noisy_gt(t.frames, t.boxes, W, H, np.random.default_rng(s))[0]) for s in range(200)]
    assert 60 * 0.85 * 0.9 - 2 < np.mean(lengths) < 60 * 0.85 * 0.9 + 2


def test_noisy_gt_restores_boxes_that_clipping_would_empty():
    frames = np.array([0, 1, 2, 3, 4], np.int32)
    boxes = np.array([[W - 0.6, 10, W, 30]] * 5, np.float32)                      # a sliver at the right edge
    cfg = BatchingConfig(drop_probability=0.0, center_jitter=0.0, scale_range=(0.5, 0.5))
    _, out = noisy_gt(frames, boxes, W, H, np.random.default_rng(0), cfg)
    np.testing.assert_array_equal(out, boxes[: len(out)])                          # clipped to < 1 px: restored
    with pytest.raises(ValueError):
        noisy_gt(frames[:0], boxes[:0], W, H, np.random.default_rng(0))


# -- groups and batch tensors ---------------------------------------------------------------------------
def columns_of(batch: TrainBatch) -> dict:
    cols = {}
    for j, key in enumerate(batch.records):
        cols.setdefault(key, []).append(j)
    return cols


def test_groups_and_tensors_follow_the_labels():
    # 101 matches 21 in another video (a cross-video column, never a group slot) and mismatches 31
    rels = [*within_rows(), (101, 21, 1), (101, 31, 0), (201, 11, 0), (301, 11, -1)]
    snap = snapshot_with(rels)
    plan = TrainingPlan(snap, BatchingConfig(noisy_variants=3), seed=5)
    assert [g.query_id for g in plan.groups] == [101, 201, 301] and not plan.excluded
    g101 = plan.groups[0]
    assert g101.target_id == 11 and g101.positives == [] and g101.negatives == [12] and g101.cross_matches == [21]
    assert plan.counts() == {"queries": 3, "groups": 3, "bi_only": 0, "excluded": 0, "cross_video": 1}
    variants = plan.variant_observations()
    assert set(variants) == {(t, k) for t in (11, 21, 31) for k in (1, 2, 3)}
    batch = plan.batch(0, 3)
    # 4 slots per group and one cross-video column for 101
    assert len(batch.records) == GROUP_SIZE * 3 + 1 and batch.group.shape == batch.relation.shape == (3, 13)
    assert batch.offsets[-1] == 13 and batch.target_columns == batch.offsets[:3]
    for i, qid in enumerate(batch.query_ids):
        g = next(g for g in plan.groups if g.query_id == qid)
        own = batch.records[batch.columns(i)]
        clean, noisy, third, neg, *cross = own
        assert clean == (g.target_id, 0) and noisy[0] == g.target_id and noisy[1] in (1, 2, 3)
        # no other positive in its own video: the clean target again (at most one noisy GT, D.1)
        assert third == clean
        assert neg == (g.negatives[0], 0)
        assert cross == ([(21, 0)] if qid == 101 else [])
        assert batch.slots[batch.columns(i)] == [0, 1, 2, 3] + [CROSS_VIDEO] * len(cross)
        assert batch.group[i, batch.columns(i)].tolist() == [1, 1, 1, 0] + [-1] * len(cross)
        assert batch.relation[i, batch.columns(i)].tolist() == [1, 1, 1, 0] + [1] * len(cross)
        assert (batch.group[i] != -1).sum() == 4
    rel = batch.relation
    cols = columns_of(batch)
    row = batch.query_ids.index(101)
    # stored records carry the snapshot's labels, across videos too
    assert all(rel[row, j] == 1 for j in cols[(21, 0)])
    assert all(rel[row, j] == 0 for j in cols[(31, 0)])
    # noisy variants: a match of their own target's queries, ⊥ for every other query
    for (tid, k), js in cols.items():
        for j in js:
            for i, qid in enumerate(batch.query_ids):
                target = next(g.target_id for g in plan.groups if g.query_id == qid)
                if k > 0:
                    assert rel[i, j] == (1 if tid == target else -1)
    # the tensors pass the loss's consistency rules, and the stats count them
    q = torch.nn.functional.normalize(torch.randn(3, 8), dim=1)
    v = torch.nn.functional.normalize(torch.randn(13, 8), dim=1)
    out = mask_guided_loss(q, v, batch.group, batch.relation, torch.tensor(20.0))
    assert torch.isfinite(out["loss"])
    stats = batch.stats()
    assert stats["positives"] == int((rel == 1).sum()) and stats["cross_video_positives"] >= 2
    assert stats["positives"] + stats["negatives"] + stats["unknown"] == 39
    assert (stats["group_rows"], stats["bi_only_rows"], stats["cross_video_columns"]) == (3, 0, 1)


def test_the_third_slot_without_a_within_video_positive():
    rels = within_rows()
    for n_variants in (1, 2, 5):
        plan = TrainingPlan(snapshot_with(rels), BatchingConfig(noisy_variants=n_variants, repeat_clean_gt=False),
                            seed=1)
        seen = set()
        for step in range(12):
            batch = plan.batch(step, 3)
            for i in range(3):
                _, (t2, k2), (t3, k3), _ = batch.records[batch.columns(i)]
                assert t2 == t3 == batch.records[batch.target_columns[i]][0]
                assert (k3 != k2) if n_variants >= 2 else (k3 == k2 == 1)
                seen.add((k2, k3))
        if n_variants == 5:
            assert len({k for pair in seen for k in pair}) == 5            # every variant gets drawn
    # without the augmentation: the clean target again
    plain = TrainingPlan(snapshot_with(rels), BatchingConfig(noisy_gt=False), seed=1)
    batch = plain.batch(0, 3)
    for i in range(3):
        clean, second, third, _ = batch.records[batch.columns(i)]
        assert clean == second == third and clean[1] == 0
    # the default (repeat_clean_gt): one noisy variant and the clean target again (at most one noisy GT, D.1)
    once = TrainingPlan(snapshot_with(rels), BatchingConfig(), seed=1)
    batch = once.batch(0, 3)
    for i in range(3):
        clean, second, third, _ = batch.records[batch.columns(i)]
        assert third == clean and clean[1] == 0 and second[0] == clean[0] and second[1] >= 1


def test_without_noisy_gt_within_video_positives_fill_the_slots():
    # 101 matches 13 and 14 in its own video, and 21 and 31 in other videos
    rels = [r for r in within_rows() if r[0] != 101] + \
        [(101, 11, 1), (101, 12, 0), (101, 13, 1), (101, 14, 1), (101, 21, 1), (101, 31, 1)]
    plan = TrainingPlan(snapshot_with(rels, n_tracks=4), BatchingConfig(noisy_gt=False), seed=0)
    assert plan.variant_observations() == {}
    g = plan.groups[0]
    assert (g.positives, g.cross_matches) == ([13, 14], [21, 31])
    crossed = set()
    for step in range(8):
        batch = plan.batch(step, 3)
        i = batch.query_ids.index(101)
        recs = batch.records[batch.columns(i)]
        assert recs[0] == (11, 0) and {recs[1], recs[2]} == {(13, 0), (14, 0)} and recs[3] == (12, 0)
        assert len(recs) == 5 and recs[4] in ((21, 0), (31, 0))             # one cross-video column
        crossed.add(recs[4])
        assert all(k == 0 for _, k in batch.records)
    assert crossed == {(21, 0), (31, 0)}
    # with one own positive left for two slots: the positive and the clean target again
    one = [r for r in rels if r[:2] != (101, 14)]
    batch = TrainingPlan(snapshot_with(one, n_tracks=4), BatchingConfig(noisy_gt=False), seed=0).batch(0, 3)
    i = batch.query_ids.index(101)
    assert sorted(batch.records[batch.columns(i)][1:3]) == [(11, 0), (13, 0)]
    # more cross-video columns when asked, none with 0
    for n_cross, want in ((2, 2), (5, 2), (0, 0)):
        cfg = BatchingConfig(noisy_gt=False, cross_video_columns=n_cross)
        batch = TrainingPlan(snapshot_with(rels, n_tracks=4), cfg, seed=0).batch(0, 3)
        i = batch.query_ids.index(101)
        extra = [batch.records[j] for j in range(*batch.columns(i).indices(len(batch.records)))
                 if batch.slots[j] == CROSS_VIDEO]
        assert len(extra) == len(set(extra)) == want and set(extra) <= {(21, 0), (31, 0)}
    with pytest.raises(ValueError, match="cross_video_columns"):
        BatchingConfig(cross_video_columns=-1)


def test_exclusions_and_pseudo_labels():
    # 101: a verified within-video negative; 201: no negative at all; 301: a verified negative only in
    # another video (12) and a within-video negative that is only a pseudo-label (32)
    rels = [(101, 11, 1), (101, 12, 0), (201, 21, 1), (301, 31, 1), (301, 12, 0), (301, 32, 0)]
    snap = snapshot_with(rels, pseudo={(301, 32)})
    for use_pseudo in (False, True):
        plan = TrainingPlan(snap, BatchingConfig(use_pseudo=use_pseudo), seed=0)
        # N_b holds confirmed within-video negatives only (paper 3.2, D.1); pseudo-labels never fill it
        # (D.2): 201 and 301 stay as L_bi-only rows
        assert plan.excluded == {}
        assert [(g.query_id, g.negatives, g.bi_only) for g in plan.groups] == \
            [(101, [12], False), (201, [], True), (301, [], True)]
        assert plan.counts() == {"queries": 3, "groups": 1, "bi_only": 2, "excluded": 0, "cross_video": 0}
    assert BatchingConfig().use_pseudo is False
    # left out: a recorded target that is no verified match, or that lies in another video, and a
    # query with neither a target nor a verified match in its video
    videos = [SnapshotVideo(v, f"/nonexistent/{v}.mp4", W, H, 10.0, 60) for v in (1, 2)]
    tracks = [track(11, 1), track(12, 1), track(21, 2)]
    queries = [SnapshotQuery(1, 1, "a", target_id=12), SnapshotQuery(2, 1, "b", target_id=21),
               SnapshotQuery(3, 2, "c"), SnapshotQuery(4, 1, "d")]
    snap = RelationSnapshotData("train", videos, tracks, queries,
                                [Relation(1, 11, 1), Relation(2, 21, 1), Relation(3, 11, 1), Relation(4, 12, 1)])
    plan = TrainingPlan(snap, seed=0)
    assert plan.excluded == {1: "its target 12 is not a verified match", 2: "its target 21 is in another video",
                             3: "no verified match in its own video"}
    assert [(g.query_id, g.target_id, g.bi_only) for g in plan.groups] == [(4, 12, True)]
    bad = snapshot_with([(101, 12, 1), (101, 13, 0)])               # the recorded target is not a match
    with pytest.raises(ValueError, match="no query can form a training group"):
        TrainingPlan(bad, seed=0)


def test_a_query_without_a_within_video_negative_is_an_l_bi_only_row():
    # 201 has no negative in its own video; it matches 11 (the target of 101) in video 1 and
    # mismatches 31 (the target of 301), so its row feeds the batch terms
    rels = [r for r in within_rows() if r[0] != 201] + [(201, 21, 1), (201, 23, -1), (201, 11, 1), (201, 31, 0)]
    snap = snapshot_with(rels)
    plan = TrainingPlan(snap, seed=4)
    g = next(g for g in plan.groups if g.query_id == 201)
    assert g.bi_only and g.cross_matches == [11] and not plan.excluded
    assert plan.counts()["bi_only"] == 1
    torch.manual_seed(0)
    for step in range(6):
        batch = plan.batch(step, 3)
        i = batch.query_ids.index(201)
        own = batch.columns(i)
        # its own columns: the clean target, two noisy variants and its cross-video match; no negative
        assert batch.records[own][0] == (21, 0) and [t for t, _ in batch.records[own][:3]] == [21, 21, 21]
        assert batch.slots[own] == [0, 1, 2, CROSS_VIDEO] and batch.records[own][3] == (11, 0)
        assert (batch.group[i] == -1).all()                                    # no group label at all
        assert batch.relation[i, own].tolist() == [1, 1, 1, 1]                  # its positives are there
        # and the rest of its row: the snapshot's labels (11 and 31, the other groups' targets)
        for j, (tid, k) in enumerate(batch.records):
            if k == 0 and tid in (11, 31):
                assert batch.relation[i, j] == (1 if tid == 11 else 0)
        st = batch.stats()
        assert (st["bi_only_rows"], st["group_rows"], st["cross_video_columns"]) == (1, 2, 1)
        q = torch.nn.functional.normalize(torch.randn(3, 8), dim=1).requires_grad_(True)
        v = torch.nn.functional.normalize(torch.randn(len(batch.records), 8), dim=1).requires_grad_(True)
        out = mask_guided_loss(q, v, batch.group, batch.relation, torch.tensor(20.0))
        assert all(torch.isfinite(out[k]) for k in ("loss", "group", "t2v", "v2t"))
        # L_group is the mean over the two full groups only; the L_bi-only row adds to t2v
        others = [r for r in range(3) if r != i]
        keep = [j for j in range(len(batch.records)) if not (batch.offsets[i] <= j < batch.offsets[i + 1])]
        alone = mask_guided_loss(q[others], v[keep], batch.group[others][:, keep],
                                 batch.relation[others][:, keep], torch.tensor(20.0))
        assert out["group"].item() == pytest.approx(alone["group"].item(), rel=1e-6)
        out["loss"].backward()
        assert torch.isfinite(q.grad).all() and q.grad[i].abs().sum() > 0     # the row gets batch-term signal


def random_snapshot(seed: int, n_videos: int = 6, n_tracks: int = 5) -> RelationSnapshotData:
    """Random labels: each query's target matches, its own pool 1 / 0 / ⊥ at random (some queries
    without a negative), and a few verified cross-video matches and mismatches."""
    rng = np.random.default_rng(seed)
    rels = []
    for v in range(1, n_videos + 1):
        rels.append((100 * v + 1, 10 * v + 1, 1))
        for k in range(2, n_tracks + 1):
            rels.append((100 * v + 1, 10 * v + k, int(rng.choice([1, 0, -1], p=[0.25, 0.35, 0.4]))))
        for u in rng.choice([u for u in range(1, n_videos + 1) if u != v], size=3, replace=False):
            k = int(rng.integers(1, n_tracks + 1))
            rels.append((100 * v + 1, 10 * int(u) + k, int(rng.choice([1, 0], p=[0.6, 0.4]))))
    return snapshot_with(rels, n_videos=n_videos, n_tracks=n_tracks)


@pytest.mark.parametrize("config", [{}, {"noisy_gt": False}, {"noisy_variants": 1}, {"cross_video_columns": 2},
                                    {"cross_video_columns": 0}, {"use_pseudo": True}])
def test_group_masks_hold_no_cross_video_positive(config):
    for seed in range(4):
        snap = random_snapshot(seed)
        plan = TrainingPlan(snap, BatchingConfig(**config), seed=seed)
        track_video = {t.id: t.video_id for t in snap.tracks}
        assert any(g.cross_matches for g in plan.groups)                     # there is something to leak
        matrix, qids, tids = snap.matrix(include_pseudo=False)
        label = {(q, t): int(matrix[a, b]) for a, q in enumerate(qids) for b, t in enumerate(tids)}
        n_cross = 0
        for step in range(10):
            batch = plan.batch(step, 4)
            for i, qid in enumerate(batch.query_ids):
                video = batch.query_videos[i]
                members = (batch.group[i] != -1).nonzero().flatten().tolist()
                for j in members:                                            # P_b and N_b: its own video
                    assert batch.record_videos[j] == track_video[batch.records[j][0]] == video, (step, qid, j)
                    assert batch.offsets[i] <= j < batch.offsets[i + 1]
                assert all(batch.record_videos[j] == video for j in (batch.group[i] == 1).nonzero().flatten().tolist())
                g = next(g for g in plan.groups if g.query_id == qid)
                assert len(members) == (0 if g.bi_only else GROUP_SIZE)
                # cross-video columns: group ⊥ on every row, relation 1 on their own row, a verified match
                for j in range(batch.offsets[i], batch.offsets[i + 1]):
                    if batch.slots[j] == CROSS_VIDEO:
                        n_cross += 1
                        tid = batch.records[j]
                        assert tid[1] == 0 and tid[0] in g.cross_matches and batch.record_videos[j] != video
                        assert label[(qid, tid[0])] == 1 and batch.relation[i, j] == 1
                        assert (batch.group[:, j] == -1).all()
                assert sum(batch.slots[j] == CROSS_VIDEO for j in range(batch.offsets[i], batch.offsets[i + 1])) == \
                    min(plan.config.cross_video_columns, len(g.cross_matches))
            out = mask_guided_loss(torch.nn.functional.normalize(torch.randn(4, 8), dim=1),
                                   torch.nn.functional.normalize(torch.randn(len(batch.records), 8), dim=1),
                                   batch.group, batch.relation, torch.tensor(20.0))
            assert torch.isfinite(out["loss"])
            assert batch.stats()["cross_video_columns"] == sum(s == CROSS_VIDEO for s in batch.slots)
        assert (n_cross > 0) == (plan.config.cross_video_columns > 0)


def test_rank_blocks_split_a_batch_with_extra_columns_at_group_boundaries():
    plan = TrainingPlan(random_snapshot(7, n_videos=8), seed=2)
    uneven = False
    for step in range(6):
        batch = plan.batch(step, 8)
        for world in (1, 2, 4, 8):
            blocks = [batch.local_slices(r, world) for r in range(world)]
            uneven |= len({c.stop - c.start for _, c in blocks}) > 1         # ranks encode different P_r
            # rows and columns tile the batch in rank order; each rank's columns are its groups' columns
            assert [rows.start for rows, _ in blocks] == [r * 8 // world for r in range(world)]
            assert blocks[0][1].start == 0 and blocks[-1][1].stop == len(batch.records)
            assert all(a[1].stop == b[1].start for a, b in pairwise(blocks))
            for rows, cols in blocks:
                assert cols == slice(batch.offsets[rows.start], batch.offsets[rows.stop])
                inside = batch.group[rows][:, cols]
                assert int((inside != -1).sum()) == int((batch.group[rows] != -1).sum())   # own labels inside
            # the stats of the blocks add up to what the rows and columns hold
            assert sum(batch.stats(*b)["cross_video_columns"] for b in blocks) == batch.stats()["cross_video_columns"]
            assert sum(batch.stats(*b)["bi_only_rows"] for b in blocks) == batch.stats()["bi_only_rows"]
    assert uneven
    # a hand-built batch without offsets keeps the fixed layout of four records per group
    fixed = TrainBatch(step=0, query_ids=[1, 2], query_videos=[1, 1], records=[(1, 0)] * 8, record_videos=[1] * 8,
                       group=torch.full((2, 8), -1, dtype=torch.int8), relation=torch.full((2, 8), -1, dtype=torch.int8))
    assert fixed.target_columns == [0, 4] and fixed.local_slices(1, 2) == (slice(1, 2), slice(4, 8))
    assert fixed.slots == [0, 1, 2, NEGATIVE] * 2
    with pytest.raises(ValueError, match="offsets"):
        TrainBatch(step=0, query_ids=[1], query_videos=[1], records=[(1, 0)] * 3, record_videos=[1] * 3,
                   group=torch.full((1, 3), -1), relation=torch.full((1, 3), -1), offsets=[0, 2], slots=[0, 1, 2])


def test_pseudo_labels_fill_batch_relations_only_and_are_counted_apart():
    # 101 has a verified within-video negative (12) and a pseudo one (13); a pseudo cross-video
    # negative (21, the target of 201) and a verified one (31, the target of 301)
    rels = [r for r in within_rows() if r[:2] != (101, 13)] + [(101, 13, 0), (101, 21, 0), (101, 31, 0)]
    snap = snapshot_with(rels, pseudo={(101, 13), (101, 21)})
    strict = TrainingPlan(snap, seed=0)
    loose = TrainingPlan(snap, BatchingConfig(use_pseudo=True), seed=0)
    assert strict.groups[0].negatives == loose.groups[0].negatives == [12]
    for step in range(4):
        a, b = strict.batch(step, 3), loose.batch(step, 3)        # every group in each (pseudo links may reorder)
        for batch in (a, b):
            row = batch.query_ids.index(101)
            negatives = [batch.records[j] for j in range(len(batch.records)) if batch.group[row, j] == 0]
            assert negatives == [(12, 0)]                         # G: the verified within-video negative only
        stats = {}
        for name, batch in (("strict", a), ("loose", b)):
            row = batch.query_ids.index(101)
            col_21 = [j for j, key in enumerate(batch.records) if key == (21, 0)]
            col_31 = [j for j, key in enumerate(batch.records) if key == (31, 0)]
            assert col_21 and col_31
            want_21 = 0 if name == "loose" else -1
            assert all(batch.relation[row, j] == want_21 and bool(batch.pseudo[row, j]) == (name == "loose")
                       for j in col_21)
            assert all(batch.relation[row, j] == 0 and not batch.pseudo[row, j] for j in col_31)
            assert int(batch.pseudo.sum()) == (len(col_21) if name == "loose" else 0)
            stats[name] = (batch.stats(), len(col_21))
        (sa, _), (sb, n_21) = stats["strict"], stats["loose"]
        assert sb["pseudo_negatives"] == n_21 and sa["pseudo_negatives"] == sb["pseudo_positives"] == 0
        for key in ("positives", "negatives", "cross_video_positives", "cross_video_negatives"):
            assert sa[key] == sb[key], key                        # the verified core is the same
        assert sb["unknown"] == sa["unknown"] - n_21


def test_stats_of_a_loss_block_give_the_losses_zero_negative_rates():
    n = 8
    rels = within_rows(n)
    for v in range(1, n + 1, 2):
        rels += [(100 * v + 1, 10 * (v + 1) + 1, 0), (100 * (v + 1) + 1, 10 * v + 1, 1)]
    snap = snapshot_with(rels, n_videos=n, pseudo={(101, 21)})
    plan = TrainingPlan(snap, BatchingConfig(use_pseudo=True), seed=3)
    torch.manual_seed(0)
    for step in range(4):
        batch = plan.batch(step, 4)
        assert batch.loss_block(0, 1) == batch.local_slices(0, 1) == (slice(0, 4), slice(0, len(batch.records)))
        assert batch.loss_block(1, 2, gather=True) == (slice(None), slice(None))
        pooled = {"t2v_rows": 0, "t2v_rows_without_negative": 0, "v2t_cols": 0, "v2t_cols_without_negative": 0}
        for rank in range(2):
            rows, cols = batch.loss_block(rank, 2, gather=False)
            assert (rows, cols) == batch.local_slices(rank, 2)
            group, relation = batch.group[rows, cols], batch.relation[rows, cols]
            q = torch.nn.functional.normalize(torch.randn(group.shape[0], 8), dim=1)
            v = torch.nn.functional.normalize(torch.randn(group.shape[1], 8), dim=1)
            out = mask_guided_loss(q, v, group, relation, torch.tensor(20.0))
            st = batch.stats(rows, cols)
            assert st["t2v_rows_without_negative"] / st["t2v_rows"] == pytest.approx(out["zero_neg_row_rate"])
            assert st["v2t_cols_without_negative"] / st["v2t_cols"] == pytest.approx(out["zero_neg_col_rate"])
            assert st["positives"] + st["negatives"] + st["unknown"] + st["pseudo_positives"] + \
                st["pseudo_negatives"] == group.numel()
            for k in pooled:
                pooled[k] += st[k]
        whole = batch.stats()
        assert whole["t2v_rows"] == pooled["t2v_rows"] == 4 and whole["positives"] >= 12
        # the blocks of two ranks leave out the cross-rank labels that the whole batch holds
        assert whole["negatives"] >= sum(batch.stats(*batch.local_slices(r, 2))["negatives"] for r in range(2))


def test_batches_are_a_pure_function_of_the_seed():
    snap = snapshot_with(within_rows(6), n_videos=6)
    a = TrainingPlan(snap, seed=3)
    b = TrainingPlan(snap, seed=3)
    late = b.batch(7, 4)                                             # asked out of order
    for step in range(8):
        x = a.batch(step, 4)
        if step == 7:
            assert x.records == late.records and torch.equal(x.relation, late.relation)
    assert a.batch(2, 4).records != TrainingPlan(snap, seed=4).batch(2, 4).records or \
        a.batch(3, 4).records != TrainingPlan(snap, seed=4).batch(3, 4).records
    # every query once per epoch (6 queries, batches of 3)
    seen = [g.query_id for s in range(2) for g in a.batch_groups(s, 3)]
    assert sorted(seen) == [101, 201, 301, 401, 501, 601]
    # with L_bi-only rows and cross-video columns too: every tensor and the layout
    snap = random_snapshot(3, n_videos=8)
    a, b = TrainingPlan(snap, seed=11), TrainingPlan(snap, seed=11)
    assert any(g.bi_only for g in a.groups) and any(g.cross_matches for g in a.groups)
    late = [b.batch(s, 4) for s in (9, 2, 5)]
    for s, y in zip((9, 2, 5), late):
        x = a.batch(s, 4)
        assert (x.records, x.offsets, x.slots, x.query_ids) == (y.records, y.offsets, y.slots, y.query_ids)
        assert torch.equal(x.group, y.group) and torch.equal(x.relation, y.relation) and torch.equal(x.pseudo, y.pseudo)
    assert PLAN_VERSION == 2


def test_linked_queries_share_batches():
    n = 12
    rels = within_rows(n)
    # pairs (1,2), (3,4), ...: each query is verified against the other's target
    for v in range(1, n + 1, 2):
        rels += [(100 * v + 1, 10 * (v + 1) + 1, 0), (100 * (v + 1) + 1, 10 * v + 1, 1)]
    snap = snapshot_with(rels, n_videos=n)

    def pairs_together(link_fraction: float) -> float:
        plan = TrainingPlan(snap, BatchingConfig(link_fraction=link_fraction), seed=1)
        hits = 0
        for step in range(30):
            videos = {qid // 100 for qid in plan.batch(step, 4).query_ids}
            hits += sum(1 for v in range(1, n + 1, 2) if v in videos and v + 1 in videos)
        return hits

    assert pairs_together(0.5) > 2 * max(1, pairs_together(0.0))
    plan = TrainingPlan(snap, seed=1)
    batch = plan.batch(0, 4)
    assert batch.stats()["cross_video_positives"] + batch.stats()["cross_video_negatives"] > 0
    with pytest.raises(ValueError, match="cannot split"):
        batch.local_slices(0, 3)
    assert batch.local_slices(1, 2) == (slice(2, 4), slice(batch.offsets[2], len(batch.records)))
