"""Training groups, the noisy-GT augmentation of paper B.3 / D.1 and relation-aware batches, on hand-built
snapshots whose labels are known, and the batch tensors against the loss's consistency rules."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from models.training.batching import GROUP_SIZE, BatchingConfig, TrainingPlan, noisy_gt
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
                  n_videos: int = 3) -> RelationSnapshotData:
    """Videos 1..n, each with tracks 10v+1..10v+3 and one query 100v+1 whose target is 10v+1."""
    videos = [SnapshotVideo(v, f"/nonexistent/{v}.mp4", W, H, 10.0, 60) for v in range(1, n_videos + 1)]
    tracks = [track(10 * v + k, v, x=20.0 + 40 * k) for v in range(1, n_videos + 1) for k in (1, 2, 3)]
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
def test_groups_and_tensors_follow_the_labels():
    rels = [*within_rows(), (101, 21, 1), (101, 31, 0), (201, 11, 0), (301, 11, -1)]
    snap = snapshot_with(rels)
    plan = TrainingPlan(snap, BatchingConfig(noisy_variants=3), seed=5)
    assert [g.query_id for g in plan.groups] == [101, 201, 301] and not plan.excluded
    g101 = plan.groups[0]
    assert g101.target_id == 11 and g101.positives == [21] and g101.negatives == [12]
    variants = plan.variant_observations()
    assert set(variants) == {(t, k) for t in (11, 21, 31) for k in (1, 2, 3)}
    batch = plan.batch(0, 3)
    assert len(batch.records) == GROUP_SIZE * 3 and batch.group.shape == batch.relation.shape == (3, 12)
    for i, qid in enumerate(batch.query_ids):
        g = next(g for g in plan.groups if g.query_id == qid)
        clean, noisy, raw, neg = batch.records[i * 4:(i + 1) * 4]
        assert clean == (g.target_id, 0) and noisy[0] == g.target_id and noisy[1] in (1, 2, 3)
        assert raw == ((21, 0) if qid == 101 else (g.target_id, 0))       # no other positive: the clean one again
        assert neg == (g.negatives[0], 0)
        assert batch.group[i, i * 4:(i + 1) * 4].tolist() == [1, 1, 1, 0]
        assert (batch.group[i] != -1).sum() == 4
    rel = batch.relation
    cols = {}
    for j, key in enumerate(batch.records):
        cols.setdefault(key, []).append(j)
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
    v = torch.nn.functional.normalize(torch.randn(12, 8), dim=1)
    out = mask_guided_loss(q, v, batch.group, batch.relation, torch.tensor(20.0))
    assert torch.isfinite(out["loss"])
    stats = batch.stats()
    assert stats["positives"] == int((rel == 1).sum()) and stats["cross_video_positives"] >= 1
    assert stats["positives"] + stats["negatives"] + stats["unknown"] == 36


def test_without_noisy_gt_a_second_positive_fills_the_slot():
    rels = [*within_rows(), (101, 21, 1), (101, 31, 1)]
    plan = TrainingPlan(snapshot_with(rels), BatchingConfig(noisy_gt=False), seed=0)
    assert plan.variant_observations() == {}
    for step in range(5):
        batch = plan.batch(step, 3)
        i = batch.query_ids.index(101)
        recs = batch.records[i * 4:(i + 1) * 4]
        assert recs[0] == (11, 0) and {recs[1], recs[2]} == {(21, 0), (31, 0)} and recs[3] == (12, 0)
        assert all(k == 0 for _, k in batch.records)


def test_exclusions_and_pseudo_labels():
    # 101: a verified within-video negative; 201: no negative at all; 301: a verified negative only in
    # another video (12) and a within-video negative that is only a pseudo-label (32)
    rels = [(101, 11, 1), (101, 12, 0), (201, 21, 1), (301, 31, 1), (301, 12, 0), (301, 32, 0)]
    snap = snapshot_with(rels, pseudo={(301, 32)})
    for use_pseudo in (False, True):
        plan = TrainingPlan(snap, BatchingConfig(use_pseudo=use_pseudo), seed=0)
        # N_b holds confirmed within-video negatives only (paper 3.2, D.1); pseudo-labels never fill it (D.2)
        assert plan.excluded == {201: "no confirmed negative in its own video",
                                 301: "no confirmed negative in its own video"}
        assert [(g.query_id, g.negatives) for g in plan.groups] == [(101, [12])]
    assert BatchingConfig().use_pseudo is False
    bad = snapshot_with([(101, 12, 1), (101, 13, 0)])               # the recorded target is not a match
    with pytest.raises(ValueError, match="no query can form a training group"):
        TrainingPlan(bad, seed=0)


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


def test_matched_raw_positive_comes_from_the_own_video_first():
    # 101 matches 13 in its own video and 21 in another one
    rels = [r for r in within_rows() if r[0] != 101] + [(101, 11, 1), (101, 12, 0), (101, 13, 1), (101, 21, 1)]
    snap = snapshot_with(rels)
    plan = TrainingPlan(snap, seed=2)
    g = plan.groups[0]
    assert (g.query_id, g.positives, g.own_positives) == (101, [13, 21], 1)
    for step in range(20):
        batch = plan.batch(step, 3)
        i = batch.query_ids.index(101)
        assert batch.records[i * 4 + 2] == (13, 0)                # never the cross-video match while 13 exists
    # without noisy GT the second slot takes what is left: the cross-video match
    plain = TrainingPlan(snap, BatchingConfig(noisy_gt=False), seed=2)
    for step in range(5):
        batch = plain.batch(step, 3)
        i = batch.query_ids.index(101)
        assert batch.records[i * 4 + 1:i * 4 + 3] == [(21, 0), (13, 0)]


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
        assert batch.loss_block(0, 1) == batch.local_slices(0, 1) == (slice(0, 4), slice(0, 16))
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
    assert batch.local_slices(1, 2) == (slice(2, 4), slice(8, 16))
