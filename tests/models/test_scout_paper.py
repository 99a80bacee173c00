"""SCOUT as in the paper: B = 128 per forward without gathered negatives (and sweepable),
class-balanced batches in the training plan, and per-query Spearman decorrelation."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from models.retrievers.decorrelation import (
    decorrelation_summary,
    pairwise_decorrelation,
    per_query_spearman,
)
from models.training.batching import BatchingConfig, TrainingPlan
from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)

TINY_RETRIEVER = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_prompts": 4},
                  "features": {"n_fast_max": 6}}


@pytest.fixture(scope="module")
def tiny_retriever():
    from models.training.trainer import build_model

    torch.manual_seed(0)
    return build_model("scout", TINY_RETRIEVER)


# -- B = 128, no gathered negatives, sweepable ------------------------------------------------------
def test_scout_trains_with_b_128_and_no_gathered_negatives_by_default(tiny_retriever):
    from models.training.trainer import TrainConfig, resolve_config

    cfg, taken = resolve_config(TrainConfig(steps=100), tiny_retriever)
    assert (cfg.batch_size, cfg.gather_negatives) == (128, False)
    assert taken["batch_size"] == 128 and taken["gather_negatives"] is False


@pytest.mark.parametrize("b", [16, 64, 256])
def test_a_batch_size_the_caller_sets_wins(tiny_retriever, b):
    from models.training.trainer import TrainConfig, resolve_config

    cfg, taken = resolve_config(TrainConfig.from_dict({"steps": 100, "batch_size": b}), tiny_retriever)
    assert cfg.batch_size == b and "batch_size" not in taken and cfg.gather_negatives is False


def test_b_is_also_swept_through_the_predictor_recipe():
    from models.training.trainer import TrainConfig, build_model, resolve_config

    # the trainer's own default (32) cannot be asked for in TrainConfig (the documented rule): the recipe can
    model = build_model("scout", {**TINY_RETRIEVER, "predictor": {**TINY_RETRIEVER["predictor"], "batch_size": 32,
                                                                   "gather_negatives": True}})
    cfg, _ = resolve_config(TrainConfig(steps=10), model)
    assert (cfg.batch_size, cfg.gather_negatives) == (32, True)
    with pytest.raises(ValueError, match="batch_size"):
        build_model("scout", {"predictor": {"batch_size": 0}})


def test_other_models_keep_the_trainers_batch_size():
    from models.training.trainer import TrainConfig, build_model, resolve_config

    model = build_model("vtrajembed", {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "embed_dim": 32,
                                       "geo_hidden": 16, "agg_layers": 1, "heads": 2, "agg_heads": 2})
    cfg, _ = resolve_config(TrainConfig(steps=10), model)
    assert (cfg.batch_size, cfg.gather_negatives) == (32, True)


# -- class-balanced batches -----------------------------------------------------------------------
def labelled_snapshot(n_walk: int = 9, n_stand: int = 3, n_plain: int = 6) -> RelationSnapshotData:
    """One video per query (its target and one confirmed negative); queries of three behaviour
    classes: walks, stands, and appearance only."""
    videos, tracks, queries, relations = [], [], [], []
    kinds = ["walks"] * n_walk + ["stands"] * n_stand + [None] * n_plain
    frames = np.arange(4, dtype=np.int32)
    boxes = np.tile(np.asarray([[1, 1, 9, 9]], np.float32), (4, 1))
    for i, kind in enumerate(kinds):
        vid, target, other, qid = 100 + i, 1000 + 2 * i, 1001 + 2 * i, 5000 + i
        videos.append(SnapshotVideo(vid, f"/v{i}.mp4", 32, 32, 10.0, 4))
        tracks += [SnapshotTrack(target, vid, frames, boxes), SnapshotTrack(other, vid, frames, boxes)]
        predicates = [{"name": "upper_colour", "value": "red", "fact_ids": []}]
        if kind:
            predicates.append({"name": kind, "value": "left" if kind == "walks" else "still", "fact_ids": []})
        queries.append(SnapshotQuery(qid, vid, f"query {i}", predicates, target))
        relations += [Relation(qid, target, 1), Relation(qid, other, 0)]
    return RelationSnapshotData("train", videos, tracks, queries, relations)


def test_class_balanced_batches_give_each_behaviour_an_equal_share():
    plan = TrainingPlan(labelled_snapshot(), BatchingConfig(sampler="class_balanced", noisy_gt=False), seed=3)
    assert plan.class_counts() == {"none": 6, "stands": 3, "walks": 9}
    seen = Counter()
    for step in range(12):
        groups = plan.batch_groups(step, 6)
        classes = Counter(plan.group_class(g) for g in groups)
        assert classes == {"none": 2, "stands": 2, "walks": 2}, (step, classes)
        assert len({g.query_id for g in groups}) == 6                      # never twice in one batch
        seen.update(g.query_id for g in groups)
    # the small class is revisited more often: that is the balancing
    stands = [g.query_id for g in plan.groups if plan.group_class(g) == "stands"]
    walks = [g.query_id for g in plan.groups if plan.group_class(g) == "walks"]
    assert min(seen[q] for q in stands) > max(seen[q] for q in walks)


def test_class_balanced_batches_are_a_pure_function_of_the_seed():
    snap = labelled_snapshot()
    cfg = BatchingConfig(sampler="class_balanced", noisy_gt=False)
    run = TrainingPlan(snap, cfg, seed=7)
    sequence = [[g.query_id for g in run.batch_groups(s, 6)] for s in range(10)]
    resumed = TrainingPlan(snap, cfg, seed=7)                               # a resumed run starts at step 8
    assert [[g.query_id for g in resumed.batch_groups(s, 6)] for s in (8, 9)] == sequence[8:]
    assert [g.query_id for g in resumed.batch_groups(2, 6)] == sequence[2]
    other = TrainingPlan(snap, cfg, seed=8)
    assert [[g.query_id for g in other.batch_groups(s, 6)] for s in range(10)] != sequence
    # the batch tensors follow the groups
    assert run.batch(4, 6).query_ids == sequence[4]


def test_the_default_sampler_is_the_relation_aware_one_unchanged():
    snap = labelled_snapshot()
    default = TrainingPlan(snap, BatchingConfig(noisy_gt=False), seed=1)
    uniform = TrainingPlan(snap, BatchingConfig(noisy_gt=False, sampler="uniform", class_by="speed"), seed=1)
    balanced = TrainingPlan(snap, BatchingConfig(noisy_gt=False, sampler="class_balanced"), seed=1)
    first = [[g.query_id for g in default.batch_groups(s, 6)] for s in range(6)]
    assert first == [[g.query_id for g in uniform.batch_groups(s, 6)] for s in range(6)]
    assert first != [[g.query_id for g in balanced.batch_groups(s, 6)] for s in range(6)]
    # uniform batches of 6 are not balanced by behaviour in general: 9 of 18 queries walk
    assert any(Counter(default.group_class(g) for g in default.batch_groups(s, 6))["walks"] != 2 for s in range(6))


def test_class_by_a_predicate_value_and_clear_refusals():
    plan = TrainingPlan(labelled_snapshot(), BatchingConfig(sampler="class_balanced", class_by="walks"), seed=0)
    assert plan.class_counts() == {"left": 9, "none": 9}
    tight = TrainingPlan(labelled_snapshot(), BatchingConfig(sampler="class_balanced"), seed=0)
    with pytest.raises(ValueError, match="fewer items than their per-batch share.*uniform sampler"):
        tight.batch_groups(0, 12)                                          # 4 seats per class, 3 stand
    with pytest.raises(ValueError, match="sampler must be one of"):
        BatchingConfig(sampler="balanced")


# -- per-query Spearman decorrelation ------------------------------------------------------------
def test_spearman_of_known_rankings():
    a = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0], [0.1, 0.4, 0.2, 0.3]])
    b = torch.tensor([[10.0, 20.0, 30.0, 40.0], [4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0], [1.0, 4.0, 2.0, 3.0]])
    rho = per_query_spearman(a, b)
    assert rho[0] == pytest.approx(1.0) and rho[1] == pytest.approx(-1.0) and rho[3] == pytest.approx(1.0)
    assert torch.isnan(rho[2])                                              # a constant row ranks nothing
    # one swap of neighbours among 4: rho = 1 - 6 * 2 / (4 * 15) = 0.8
    assert per_query_spearman([[1.0, 2.0, 3.0, 4.0]], [[2.0, 1.0, 3.0, 4.0]])[0] == pytest.approx(0.8)


def test_spearman_matches_scipy_with_ties_and_masks():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, size=(30, 12)).astype(float)                    # many ties
    b = a + rng.normal(0, 2.0, size=a.shape)
    mask = rng.random(a.shape) > 0.25
    rho = per_query_spearman(a, b, mask)
    for i in range(30):
        x, y = a[i, mask[i]], b[i, mask[i]]
        want = spearmanr(x, y).statistic if len(x) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0 else float("nan")
        if np.isnan(want):
            assert torch.isnan(rho[i])
        else:
            assert float(rho[i]) == pytest.approx(want, abs=1e-12)


def test_decorrelation_summary_and_pairs():
    summary = decorrelation_summary(torch.tensor([1.0, -1.0, 0.5, float("nan"), 0.5]), bins=4)
    assert summary["n_queries"] == 4 and summary["n_undefined"] == 1
    assert summary["mean"] == pytest.approx(0.25) and summary["median"] == pytest.approx(0.5)
    assert summary["histogram"] == {"edges": [-1.0, -0.5, 0.0, 0.5, 1.0], "counts": [1, 0, 0, 3]}
    g = torch.Generator().manual_seed(0)
    s1 = torch.randn(8, 20, generator=g)
    pairs = pairwise_decorrelation({"dense": s1, "same": 2 * s1 + 1, "flipped": -s1})
    assert list(pairs) == ["dense|same", "dense|flipped", "same|flipped"]
    assert pairs["dense|same"]["mean"] == pytest.approx(1.0) and pairs["dense|flipped"]["mean"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least two"):
        pairwise_decorrelation({"one": s1})
    with pytest.raises(ValueError, match="both be"):
        per_query_spearman(s1, s1[:, :3])


def test_the_batch_sweep_preset_trains_each_variant_at_its_b():
    from models.experiments.grid import PRESETS, merge
    from models.training.trainer import TrainConfig, build_model, resolve_config

    preset = PRESETS["scout-batch-sweep"]
    for name, override in preset.variants.items():
        cfg = TrainConfig.from_dict(merge(merge({"steps": 10, "model": TINY_RETRIEVER}, preset.base), override))
        resolved, _ = resolve_config(cfg, build_model("scout", cfg.model))
        assert (resolved.batch_size, resolved.gather_negatives) == (int(name[1:]), False), name
