"""The whole relation chain on rendered videos: frozen pools → descriptions → queries → within-video
rows → cross-video mining and pair review → complete dev/test snapshots, with the embedded default
backends and simulated reviewers (DESIGN 2.6-2.10)."""
from __future__ import annotations

import numpy as np
import pytest

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.mining import (
    completeness_report,
    completion_pairs_queue,
    mining_run_create,
    mining_run_execute,
)
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.benchmark.services.snapshots import relation_snapshot_create, relation_snapshot_load
from annotation.curation.services.items import work_items_create_for_run
from annotation.curation.services.pools import pool_freeze
from annotation.demo.simulation import simulate_annotators
from annotation.demo.simulation_relations import simulate_relation_review
from annotation.management.commands.demo import Command as DemoCommand
from annotation.models import Query, Relation, RelationSnapshot, SnapshotRelation, WorkItem
from common.errors import ConflictError
from models.backends.tracking.base import TrackProposal
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec, gt_path_for
from tests.trajectories.factories import run_factory
from trajectories.models import SplitGroup
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.slow

LOOKS = [("red", "blue"), ("green", "black"), ("yellow", "grey"), ("white", "brown"), ("orange", "purple"),
         ("blue", "white")]


def _scene(i: int) -> SceneSpec:
    a, b = LOOKS[i % len(LOOKS)], LOOKS[(i + 2) % len(LOOKS)]
    return SceneSpec(name=f"chain{i}", width=320, height=180, fps=8, n_frames=32, seed=100 + i, background="plaza",
                     people=[PersonSpec(upper=a[0], lower=a[1], direction="right", speed="normal", start=(40, 160),
                                        height=80),
                             PersonSpec(upper=b[0], lower=b[1], direction="left", speed="slow", start=(280, 120),
                                        height=60)])


def _rendered_videos(tmp_path, n: int):
    videos = []
    for i in range(n):
        path = tmp_path / f"chain{i}.mp4"
        render_scene(_scene(i), path).save(gt_path_for(path))
        videos.append(DemoCommand()._import(path, source=f"chain-{i}", name=f"chain{i}", ground_truth=gt_path_for(path)))
    return videos


def _gt_run(video, gt):
    """A proposal run whose trajectories are the people's visible ground-truth boxes."""
    run = run_factory(video=video)
    proposals = []
    for p in gt.people:
        frames = np.array([f for f, b in enumerate(p.boxes) if b is not None and p.visible[f] > 0.3])
        boxes = np.array([p.boxes[f] for f in frames], dtype=np.float64)
        boxes[:, [0, 2]] = boxes[:, [0, 2]].clip(0, gt.width - 1)
        boxes[:, [1, 3]] = boxes[:, [1, 3]].clip(0, gt.height - 1)
        proposals.append(TrackProposal(track_id=p.id + 1, category="person", frames=frames, boxes=boxes,
                                       scores=np.full(len(frames), 0.9)))
    trajectories_store(run=run, proposals=proposals)
    run.refresh_from_db()
    work_items_create_for_run(run=run)
    return run


def test_rendered_demo_reaches_complete_snapshots(db, media_root, tmp_path, settings, make_user):
    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    videos = _rendered_videos(tmp_path, 6)
    for video, split in zip(videos, ["train", "train", "dev", "dev", "test", "test"]):
        SplitGroup.objects.filter(pk=video.split_group_id).update(split=split)
    from models.world.scene import GroundTruth

    runs = [_gt_run(v, GroundTruth.load(media_root / v.metadata["ground_truth"])) for v in videos]

    # curation, then frozen pools
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    pools = [pool_freeze(run=run, frozen_by=manager) for run in runs]
    assert all(p.n_members == 2 for p in pools)

    # descriptions: the heuristic describer proposes, three reviewers approve or correct
    run = description_run_create(pools=pools, created_by=manager, queue=False)
    counts = description_run_execute(run=run)
    assert counts["described"] == 12
    simulate_relation_review(accuracy=0.9, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    assert not WorkItem.objects.filter(stage="description", state__in=["open", "adjudicate"]).exists()

    # queries from approved facts, then each query's row against its complete pool
    gen = generation_run_create(pools=pools, created_by=manager, queue=False)
    generation_run_execute(run=gen)
    assert Query.objects.filter(status="in_review").exists()
    simulate_relation_review(accuracy=0.95, seed=2, stage=WorkItem.Stage.RELATION)
    accepted = Query.objects.filter(status="accepted")
    assert accepted.filter(video__split_group__split="dev").exists()
    assert accepted.filter(video__split_group__split="test").exists()
    for q in Query.objects.filter(status="rejected"):
        assert q.rejection_reason

    # cross-video expansion: mine, review, then complete what dev/test galleries still need
    for split in ("train", "dev", "test"):
        mining = mining_run_create(split=split, created_by=manager, queue=False)
        mining_run_execute(run=mining)
    simulate_relation_review(accuracy=1.0, seed=3, stage=WorkItem.Stage.PAIR)
    for split in ("dev", "test"):
        completion_pairs_queue(split=split)
    simulate_relation_review(accuracy=1.0, seed=4, stage=WorkItem.Stage.PAIR)
    for split in ("dev", "test"):
        report = completeness_report(split=split)
        assert report["complete"], report

    # snapshots: complete dev/test, sealed, hashed and readable back
    snap = relation_snapshot_create(split="dev", created_by=manager)
    assert snap.complete and snap.sealed_at is not None
    data = relation_snapshot_load(snapshot=snap)
    assert data.content_sha256() == snap.content_sha256
    matrix, _, _ = data.matrix()
    assert (matrix != -1).all()                       # fully binary
    assert SnapshotRelation.objects.filter(snapshot=snap).count() == len(data.relations)
    assert snap.counts["zero_neg_row_rate"] == 0.0

    # a sealed snapshot and its relations cannot change, even with raw updates
    from django.db import IntegrityError, InternalError, transaction

    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        SnapshotRelation.objects.filter(snapshot=snap).update(label=1)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        RelationSnapshot.objects.filter(pk=snap.pk).update(name="changed")
    # the live relations may be revised; the snapshot keeps its copy
    assert Relation.objects.exists()


def test_an_incomplete_dev_split_is_refused(db, media_root, tmp_path, settings, make_user):
    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    videos = _rendered_videos(tmp_path, 2)
    for video in videos:
        SplitGroup.objects.filter(pk=video.split_group_id).update(split="dev")
    from models.world.scene import GroundTruth

    runs = [_gt_run(v, GroundTruth.load(media_root / v.metadata["ground_truth"])) for v in videos]
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    pools = [pool_freeze(run=run, frozen_by=manager) for run in runs]
    description_run_execute(run=description_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    generation_run_execute(run=generation_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=2, stage=WorkItem.Stage.RELATION)
    # no cross-video review at all: the dev galleries miss every cross-video relation
    with pytest.raises(ConflictError) as refused:
        relation_snapshot_create(split="dev", created_by=manager)
    assert refused.value.code == "incomplete_split"
    assert refused.value.extra["completeness"]["missing_by_kind"]["cross_video"] > 0
    assert not RelationSnapshot.objects.exists()


def _verified_pools(tmp_path, media_root, manager, splits):
    from models.world.scene import GroundTruth

    videos = _rendered_videos(tmp_path, len(splits))
    for video, split in zip(videos, splits):
        SplitGroup.objects.filter(pk=video.split_group_id).update(split=split)
    runs = [_gt_run(v, GroundTruth.load(media_root / v.metadata["ground_truth"])) for v in videos]
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    pools = [pool_freeze(run=run, frozen_by=manager) for run in runs]
    description_run_execute(run=description_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    generation_run_execute(run=generation_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=2, stage=WorkItem.Stage.RELATION)
    return pools


def test_pseudo_label_gate_calibrates_on_dev_and_labels_train_only(db, media_root, tmp_path, settings, make_user):
    from django.db import IntegrityError, InternalError, transaction

    from annotation.benchmark.services.pseudolabels import (
        pseudo_calibration_sample_queue,
        pseudo_labels_apply,
        pseudo_rule_calibrate,
        pseudo_rule_declare,
    )
    from annotation.models import CrossPair, PseudoLabelRule

    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    _verified_pools(tmp_path, media_root, manager, ["dev"] * 3 + ["train"] * 3)
    # dev pairs are all reviewed (they calibrate); train pairs are mined but none is reviewed
    mining_run_execute(run=mining_run_create(split="dev", queue=False))
    mining_run_execute(run=mining_run_create(split="train", queue=False, config={
        "potential_k": 0, "hard_k": 0, "easy_k": 10, "easy_max": 0.99, "random_k": 0, "easy_review_rate": 0.0}))
    simulate_relation_review(accuracy=1.0, seed=3, stage=WorkItem.Stage.PAIR)
    assert CrossPair.objects.filter(review="not_sampled").exists()

    every_stratum = ["potential_match", "hard_negative", "easy_negative", "random"]
    encoder = CrossPair.objects.first().provenance[0]["encoder"]   # the similarity the rule reads
    rule_row = pseudo_rule_declare(rule={"name": "contradicted colour", "s_max": 1.0, "encoder": encoder,
                                         "strata": every_stratum}, declared_bound=0.6, created_by=manager)
    # applying before calibration is refused
    with pytest.raises(ConflictError) as refused:
        pseudo_labels_apply(rule_row=rule_row)
    assert refused.value.code == "rule_not_accepted"

    # the reviews of the mined pairs saw the writer's proposal: they do not calibrate; a blinded
    # sample of the selected pairs nobody reviewed does
    sample = pseudo_calibration_sample_queue(rule_row=rule_row, size=50, seed=1)
    assert sample["queued"] > 0
    simulate_relation_review(accuracy=1.0, seed=4, stage=WorkItem.Stage.PAIR)
    rule_row = pseudo_rule_calibrate(rule_row=rule_row)
    assert rule_row.calibration["n_blinded"] >= max(4, sample["queued"]) and rule_row.calibration["errors"] == 0
    assert rule_row.calibration["blinded"] and rule_row.accepted
    with pytest.raises(ConflictError):
        pseudo_rule_calibrate(rule_row=rule_row)               # once only

    # the database refuses any change to a calibrated rule
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        PseudoLabelRule.objects.filter(pk=rule_row.pk).update(rule={**rule_row.rule, "s_max": 0.5})

    result = pseudo_labels_apply(rule_row=rule_row)
    assert result["labelled"] > 0
    pseudo = Relation.objects.filter(pseudo=True)
    assert pseudo.count() == result["labelled"]
    assert set(pseudo.values_list("query__video__split_group__split", flat=True)) == {"train"}
    assert all(r.label == 0 and r.source == "pseudo" and r.evidence["contradicted"] for r in pseudo)
    assert pseudo_labels_apply(rule_row=rule_row)["labelled"] == 0      # idempotent


def test_a_rule_with_a_strict_bound_and_few_pairs_is_not_calibrated(db, media_root, tmp_path, settings, make_user):
    from annotation.benchmark.services.pseudolabels import (
        pseudo_rule_calibrate,
        pseudo_rule_declare,
    )
    from annotation.models import CrossPair

    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    _verified_pools(tmp_path, media_root, manager, ["dev", "dev"])
    mining_run_execute(run=mining_run_create(split="dev", queue=False))
    encoder = CrossPair.objects.first().provenance[0]["encoder"]
    rule_row = pseudo_rule_declare(rule={"name": "strict", "s_max": 0.3, "encoder": encoder}, declared_bound=0.01)
    with pytest.raises(ConflictError) as refused:
        pseudo_rule_calibrate(rule_row=rule_row)
    assert refused.value.code == "audit_too_small"
    rule_row.refresh_from_db()
    assert rule_row.calibrated_at is None and not rule_row.accepted
