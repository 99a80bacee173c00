"""Describer, query-writer and mining runs whose worker dies mid-run are picked up again: the task
delivered a second time (as the broker does after the kill) continues where the dead delivery
stopped, each member described once, each approved description written once, each pair mined
once, and the run and its Job end succeeded with two attempts. Two rendered train videos, the
embedded default backends and simulated reviewers (``tests.annotation.test_relation_chain``)."""
from __future__ import annotations

from collections import Counter

import pytest

from annotation import tasks
from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.mining import mining_run_create
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.curation.services.pools import pool_freeze
from annotation.demo.simulation import simulate_annotators
from annotation.demo.simulation_relations import simulate_relation_review
from annotation.models import CrossPair, Description, Query, WorkItem
from models.world.scene import GroundTruth
from tests.annotation.test_relation_chain import _gt_run, _rendered_videos
from tests.common.redelivery import WorkerDied, die_at_report
from trajectories.models import SplitGroup

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def pools(media_root, tmp_path, settings, make_user):
    """Two frozen pools of two members each, on train videos."""
    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    videos = _rendered_videos(tmp_path, 2)
    SplitGroup.objects.filter(pk__in=[v.split_group_id for v in videos]).update(split="train")
    runs = [_gt_run(v, GroundTruth.load(media_root / v.metadata["ground_truth"])) for v in videos]
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    return [pool_freeze(run=run, frozen_by=manager) for run in runs]


def _died_then_delivered_again(task, run):
    """The first delivery dies (the rows stay as the kill leaves them); the second runs it to the end."""
    with pytest.raises(WorkerDied):
        task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert (run.status, run.job.status, run.job.attempts) == ("running", "running", 1)
    result = task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert run.status == "succeeded" and run.job.status == "succeeded" and run.job.attempts == 2, (run.error, result)
    return run


def test_a_description_run_continues_after_its_worker_died(pools, monkeypatch):
    run = description_run_create(pools=pools, queue=False)
    die_at_report(monkeypatch, 2)                      # after two of the four members
    _died_then_delivered_again(tasks.description_run_task, run)
    assert run.stats == {"described": 2, "failed": 0, "skipped": 2}
    described = Counter(Description.objects.values_list("pool_id", "trajectory_id"))
    assert len(described) == 4 and set(described.values()) == {1}
    assert WorkItem.objects.filter(stage="description").count() == 4


def test_a_generation_run_continues_after_its_worker_died(pools, monkeypatch):
    description_run_execute(run=description_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    approved = set(Description.objects.filter(status="approved").values_list("trajectory_id", flat=True))
    run = generation_run_create(pools=pools, queue=False)
    die_at_report(monkeypatch, 1)                      # after the first pool's queries
    with pytest.raises(WorkerDied):
        tasks.generation_run_task(run.pk)
    first_pool = set(Query.objects.filter(run=run).values_list("pk", flat=True))
    assert first_pool and Query.objects.filter(run=run).values("pool").distinct().count() == 1
    tasks.generation_run_task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert run.status == "succeeded" and run.job.attempts == 2, run.error
    # the second delivery wrote only the second pool's: every approved description once
    assert run.stats["descriptions"] == len(approved) - len(
        set(Query.objects.filter(pk__in=first_pool).values_list("target_id", flat=True)))
    assert set(Query.objects.filter(run=run).values_list("target_id", flat=True)) == approved
    again = generation_run_create(pools=pools, queue=False)       # what one clean delivery writes
    generation_run_execute(run=again)
    assert Counter(Query.objects.filter(run=run).values_list("target_id", "text")) == \
        Counter(Query.objects.filter(run=again).values_list("target_id", "text"))


def test_a_mining_run_continues_after_its_worker_died(pools, monkeypatch):
    description_run_execute(run=description_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    generation_run_execute(run=generation_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=2, stage=WorkItem.Stage.RELATION)
    assert Query.objects.filter(status="accepted").exists()
    run = mining_run_create(split="train", queue=False, config={"easy_review_rate": 1.0})
    die_at_report(monkeypatch, 2)                      # after the first pair is stored
    with pytest.raises(WorkerDied):
        tasks.mining_run_task(run.pk)
    stored = CrossPair.objects.count()
    assert stored >= 1
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert (run.status, run.job.attempts) == ("running", 1)
    tasks.mining_run_task(run.pk)
    run.refresh_from_db()
    run.job.refresh_from_db()
    assert run.status == "succeeded" and run.job.attempts == 2, run.error
    pairs = Counter(CrossPair.objects.values_list("query_id", "trajectory_id"))
    assert len(pairs) >= stored and set(pairs.values()) == {1}
    assert run.job.result.get("already_stored") == stored
    assert WorkItem.objects.filter(stage="pair").count() == CrossPair.objects.filter(review="queued").count()
