"""ScoutITM's identity-hard negatives (SCOUT 7.2: identity-based and short-list-mined negatives):
drawn from the query's own video among verified mismatches, kept apart from the mined ones, and
present in every training batch beside them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from models.retrievers.scout.itm_training import (
    IDENTITY,
    MINED,
    POSITIVE,
    ScoutITMTraining,
    identity_negatives,
    training_pairs,
)
from models.retrievers.scout.sampler import KindMixedPairBatches

# three queries over six trajectories in two videos (tracks 0-2 in video 10, 3-5 in video 20)
TRACK_VIDEO = torch.tensor([10, 10, 10, 20, 20, 20])
QUERY_VIDEO = torch.tensor([10, 10, 20])
RELEVANCE = torch.tensor([[1, 0, 0, 0, 0, -1],      # q0: target 0; 1, 2 are other people of its video
                          [0, 1, -1, 0, 0, 0],      # q1: target 1; 0 is a mismatch, 2 unknown
                          [0, 0, 0, 0, 0, 0]])      # q2: no match at all
SCORES = torch.tensor([[0.9, 0.1, 0.2, 0.8, 0.7, 0.95],
                       [0.3, 0.9, 0.8, 0.6, 0.2, 0.1],
                       [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]])


def test_identity_negatives_are_other_trajectories_of_the_querys_video():
    q, i = identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, 5)
    pairs = sorted(zip(q.tolist(), i.tolist()))
    assert pairs == [(0, 1), (0, 2), (1, 0)]       # never the target, an unknown pair or a matchless query
    q, i = identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, 1, seed=3)
    assert q.tolist() == [0, 1] and i[0].item() in (1, 2) and i[1].item() == 0
    drawn = {identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, 1, seed=s)[1][0].item() for s in range(20)}
    assert drawn == {1, 2}                          # drawn at random, not by score
    assert identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, 1, seed=3)[1].tolist() == i.tolist()
    assert identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, 0)[0].numel() == 0
    with pytest.raises(ValueError, match=r"\[Q, N\]"):
        identity_negatives(RELEVANCE, QUERY_VIDEO[:2], TRACK_VIDEO, 2)
    with pytest.raises(ValueError, match=">= 0"):
        identity_negatives(RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, -1)


def test_training_pairs_mix_identity_and_mined_negatives_without_repeats():
    config = ScoutITMTraining(enabled=True, n_negatives=2, n_identity_negatives=1)
    pairs = training_pairs(SCORES, RELEVANCE, QUERY_VIDEO, TRACK_VIDEO, config, seed=3)
    rows = list(zip(pairs.query_idx.tolist(), pairs.item_idx.tolist(), pairs.kind.tolist()))
    assert sorted((q, i) for q, i, k in rows if k == POSITIVE) == [(0, 0), (1, 1)]
    identity = sorted((q, i) for q, i, k in rows if k == IDENTITY)
    mined = sorted((q, i) for q, i, k in rows if k == MINED)
    assert len(identity) == 2 and identity[1] == (1, 0)
    # mined: the first stage's top verified mismatches among those the identity draw left
    left_for_q0 = [j for j in (1, 2, 3, 4) if (0, j) not in identity]
    expected_q0 = sorted(sorted(left_for_q0, key=lambda j: -SCORES[0, j].item())[:2])
    assert [i for q, i in mined if q == 0] == expected_q0 and [i for q, i in mined if q == 1] == [3, 4]
    assert len(set((q, i) for q, i, _ in rows)) == len(rows)
    assert (pairs.label == (pairs.kind == POSITIVE).long()).all()
    assert pairs.counts() == {"positives": 2, "mined_negatives": 4, "identity_negatives": 2}
    off = training_pairs(SCORES, RELEVANCE, QUERY_VIDEO, TRACK_VIDEO,
                         ScoutITMTraining(enabled=True, n_negatives=2, n_identity_negatives=0))
    assert off.counts()["identity_negatives"] == 0 and off.counts()["mined_negatives"] == 4


def test_every_batch_holds_each_kind_of_pair_in_its_share():
    kinds = torch.tensor([POSITIVE] * 10 + [MINED] * 87 + [IDENTITY] * 3)
    sampler = KindMixedPairBatches(kinds, 16, seed=0)
    assert sampler.seats.tolist() == [2, 13, 1]     # 1.6 / 13.92 / 0.48: largest remainders, one seat at least
    seen = torch.zeros(3)
    for _ in range(50):
        batch = sampler.batch()
        assert batch.shape == (16,) and torch.bincount(kinds[batch], minlength=3).tolist() == [2, 13, 1]
        seen += torch.bincount(kinds[batch], minlength=3)
    again = KindMixedPairBatches(kinds, 16, seed=0)
    assert torch.equal(again.batch(), KindMixedPairBatches(kinds, 16, seed=0).batch())
    assert len({int(i) for i in KindMixedPairBatches(kinds, 16, seed=1).batch()}) > 1
    with pytest.raises(ValueError, match="kinds of pairs"):
        KindMixedPairBatches(kinds, 2)


def test_identity_negatives_reach_a_training_batch_from_the_same_video(tmp_path):
    from models.demo.benchmark import DemoBenchmarkConfig, build_split

    snapshot = build_split(DemoBenchmarkConfig(videos={"train": 2}), "train", tmp_path,
                           {"video": 1, "track": 1, "query": 1})
    matrix, _, _ = snapshot.matrix(include_pseudo=False)
    relevance = torch.from_numpy(matrix.astype(np.int64))
    query_video = torch.tensor([q.video_id for q in snapshot.queries])
    track_video = torch.tensor([t.video_id for t in snapshot.tracks])
    scores = torch.from_numpy(np.random.default_rng(0).normal(size=matrix.shape)).float()   # a stand-in first stage
    config = ScoutITMTraining(enabled=True, batch_size=16)                 # the defaults: 8 mined, 4 identity-hard
    pairs = training_pairs(scores, relevance, query_video, track_video, config, seed=0)
    batch = KindMixedPairBatches(pairs.kind, config.batch_size, seed=0).batch()
    picked = [(int(pairs.query_idx[j]), int(pairs.item_idx[j])) for j in batch if pairs.kind[j] == IDENTITY]
    assert picked, "no identity-hard negative in the batch"
    for q, i in picked:
        query, track = snapshot.queries[q], snapshot.tracks[i]
        assert track.video_id == query.video_id                           # the same video
        assert track.id != query.target_id and matrix[q, i] == 0          # another trajectory, verified mismatch
    mined = [(int(pairs.query_idx[j]), int(pairs.item_idx[j])) for j in batch if pairs.kind[j] == MINED]
    assert mined and all(matrix[q, i] == 0 for q, i in mined)


def test_the_identity_setting_is_validated():
    assert ScoutITMTraining().n_identity_negatives == 4 and ScoutITMTraining().n_negatives == 8
    with pytest.raises(ValueError, match="n_identity_negatives"):
        ScoutITMTraining(n_identity_negatives=-1)
    with pytest.raises(ValueError, match="n_identity_negatives"):
        ScoutITMTraining(n_identity_negatives=True)
    with pytest.raises(ValueError, match="a seat"):
        ScoutITMTraining(batch_size=2)
    ScoutITMTraining(batch_size=2, n_identity_negatives=0)
