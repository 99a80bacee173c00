"""The managers' relation screens in real Chromium against a live server on PostgreSQL: snapshots
per split (a complete train snapshot taken; an incomplete dev split refused with the relations it
misses; those cross-video pairs sent to review and one reviewed from the keyboard), and a training
run's live loss curve and evaluation figures.

The benchmark is built by the services on rendered videos with simulated reviewers (the helpers
of ``tests/annotation/test_relation_chain.py``); the training run's rows are written directly, the
way the trainer reports them, so the curve's values are known."""
from __future__ import annotations

import math
import re
from itertools import pairwise

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.benchmark.services.descriptions import (
    description_run_create,
    description_run_execute,
)
from annotation.benchmark.services.mining import completeness_report
from annotation.benchmark.services.queries import generation_run_create, generation_run_execute
from annotation.curation.services.pools import pool_freeze
from annotation.demo.simulation import simulate_annotators
from annotation.demo.simulation_relations import simulate_relation_review
from annotation.models import CrossPair, Query, RelationSnapshot, Release, Vote, WorkItem
from models.world.scene import GroundTruth
from tests.annotation.test_relation_chain import _gt_run, _rendered_videos
from tests.browser.conftest import nav, open_item, wait_first_frame
from trajectories.models import SplitGroup
from workers.models import EvaluationRun, TrainingRun, TrainingStep

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def verified_splits(people, media_root, tmp_path, settings):
    """One train and two dev videos taken through curation, descriptions and relation rows by
    simulated reviewers, with no cross-video review: train can be snapshotted, dev misses every
    cross-video relation its galleries need."""
    settings.VAR_DIR = tmp_path / "var"
    videos = _rendered_videos(tmp_path, 3)
    for video, split in zip(videos, ["train", "dev", "dev"]):
        SplitGroup.objects.filter(pk=video.split_group_id).update(split=split)
    runs = [_gt_run(v, GroundTruth.load(media_root / v.metadata["ground_truth"])) for v in videos]
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    pools = [pool_freeze(run=run, frozen_by=people["boss"]) for run in runs]
    description_run_execute(run=description_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=1, stage=WorkItem.Stage.DESCRIPTION)
    generation_run_execute(run=generation_run_create(pools=pools, queue=False))
    simulate_relation_review(accuracy=1.0, seed=2, stage=WorkItem.Stage.RELATION)
    for split in ("train", "dev"):
        assert Query.objects.filter(status="accepted", video__split_group__split=split).exists()
    return pools


def test_a_manager_takes_snapshots_and_sees_what_an_incomplete_split_misses(open_page, people, verified_splits, shot):
    page = open_page("boss")
    nav(page, "Snapshots")
    train = page.get_by_role("region", name=re.compile(r"^train "))
    dev = page.get_by_role("region", name="dev incomplete")
    expect(dev).to_contain_text("missing")
    expect(page.get_by_text("No snapshots yet")).to_be_visible()

    # A train snapshot is taken and listed with its hash.
    train.get_by_role("button", name="Take a snapshot of train").click()
    expect(train.get_by_role("status")).to_contain_text("Snapshot #")
    snap = RelationSnapshot.objects.get(split="train")
    assert snap.sealed_at is not None and snap.complete
    expect(page.get_by_role("row", name=f"#{snap.pk} train")).to_contain_text(snap.content_sha256[:12])

    # The dev split misses its cross-video relations: refused, and the refusal lists them.
    dev.get_by_role("button", name="Take a snapshot of dev").click()
    expect(dev.get_by_role("alert")).to_contain_text("The dev snapshot was refused")
    expect(dev.get_by_role("alert")).to_contain_text("incomplete_split")
    missing = dev.get_by_role("region", name="What the dev split misses")
    report = completeness_report(split="dev", limit=50)
    assert report["missing"] > 0 and report["missing_by_kind"]["cross_video"] > 0
    expect(missing).to_contain_text(f"{report['missing']} missing")
    expect(missing).to_contain_text(f"{report['missing_by_kind']['cross_video']} across videos")
    listed = missing.locator("tbody tr")
    expect(listed).to_have_count(len(report["missing_pairs"]))
    q, t = report["missing_pairs"][0]
    expect(listed.first).to_have_text(re.compile(rf"^\s*{q}\s*{t}\s*$"))
    assert not RelationSnapshot.objects.filter(split="dev").exists()
    shot(page, "13-manager-snapshots-refused")

    # The missing cross-video pairs go to pair review from the same card.
    dev.get_by_role("button", name="Send missing cross-video pairs to review").click()
    expect(dev.get_by_role("status")).to_contain_text("cross-video pairs of dev sent to pair review")
    queued = CrossPair.objects.filter(stratum="completion").count()
    assert queued == report["missing_by_kind"]["cross_video"]
    expect(dev.get_by_role("status")).to_contain_text(f"{queued} cross-video pairs of dev sent to pair review")
    assert WorkItem.objects.filter(stage="pair", state="open").count() == queued

    # An annotator reviews one from the keyboard: the query, its source, the candidate, the hint.
    annotator = open_page("ann1")
    annotator.locator(".queue-card", has_text="Cross-video pairs").get_by_role("link", name="Start").click()
    item_id = open_item(annotator, "review/pairs")
    wait_first_frame(annotator, item_id)
    item = WorkItem.objects.select_related("pair__query").get(pk=item_id)
    query = annotator.get_by_role("region", name="Query")
    expect(query).to_contain_text(item.pair.query.text)
    expect(query).to_contain_text(f"Written for trajectory #{item.pair.query.target_id}")
    expect(query).to_contain_text("Writer's proposal")
    expect(annotator.get_by_role("list", name=f"Crops of the query's own trajectory #{item.pair.query.target_id}")
           .get_by_role("listitem")).to_have_count(6)
    shot(annotator, "14-cross-video-pair")
    annotator.keyboard.press("2")
    annotator.wait_for_function("path => location.pathname !== path", arg=f"/review/pairs/{item_id}")
    assert Vote.objects.get(item=item, annotator=people["ann1"]).label == "mismatch"

    # A release of the dev split is refused the same way, with what the split still misses.
    nav(page, "Releases")
    expect(page.get_by_text("No releases yet")).to_be_visible()
    page.get_by_label("test", exact=True).uncheck()
    page.get_by_role("button", name="Publish the release").click()
    # the confirmation says why it would be refused, and offers no way to publish
    confirm = page.get_by_role("dialog", name=re.compile(r"^Publish trajlab"))
    misses = confirm.get_by_role("region", name="What the dev split misses")
    expect(misses).to_contain_text("publishing is refused")
    now_missing = completeness_report(split="dev", limit=50)["missing"]
    assert now_missing == report["missing"] - 1  # the pair just reviewed is binary now
    expect(misses).to_contain_text(f"{now_missing} missing")
    expect(confirm.get_by_role("button", name="Publish", exact=True)).to_be_disabled()
    confirm.get_by_role("button", name="Cancel").click()
    assert not Release.objects.exists()

    # The runs that built the benchmark are listed with their jobs, the frozen pools to choose from.
    nav(page, "Model runs")
    expect(page.get_by_role("table", name="Describer runs, newest first").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_role("table", name="Query-writer runs, newest first").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_role("group", name="Frozen pools (0 of 3 chosen)")).to_have_count(2)


def _loss(step: int) -> float:
    return 2.0 * math.exp(-step / 15) + 0.3


def _record(step: int) -> dict:
    """One step as the trainer reports it (models.training.trainer: lr, loss parts, realized counts)."""
    loss = _loss(step)
    return {"step": step, "lr": 1e-3, "loss": loss, "group": 0.1 * loss, "t2v": 0.9 * loss, "v2t": 0.95 * loss,
            "zero_neg_row_rate": 0.5 / step, "zero_neg_col_rate": 0.25, "logit_scale": 20.0,
            "positives": 8, "negatives": 40 + step % 3, "unknown": 4, "cross_video_positives": 0,
            "cross_video_negatives": 24, "seconds": 0.05}


def _steps(run: TrainingRun, steps: range) -> None:
    TrainingStep.objects.bulk_create([TrainingStep(run=run, step=s, attempt=1, loss=_loss(s), record=_record(s))
                                      for s in steps])
    TrainingRun.objects.filter(pk=run.pk).update(steps_done=steps[-1], updated_at=timezone.now())


def _path_points(d: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+) (-?[\d.]+)", d)]


def test_a_manager_follows_a_training_runs_loss_curve_live(open_page, people, shot):
    now = timezone.now()
    snapshot = RelationSnapshot.objects.create(split="train", name="tiny", content_sha256="0" * 64, path="",
                                               pool_versions={}, counts={"n_relations": 0}, complete=True,
                                               sealed_at=now, created_by=people["boss"])
    run = TrainingRun.objects.create(snapshot=snapshot, model_kind="vtrajembed", steps_total=60, status="running",
                                     config={"steps": 60, "batch_size": 8, "lr": 1e-3, "seed": 0}, started_at=now,
                                     created_by=people["boss"])
    _steps(run, range(1, 31))

    page = open_page("boss")
    # Before any relation work, the other manager screens say plainly that there is nothing yet.
    for link, empty in (("Model runs", "No frozen pools yet"), ("Audits", "No audits yet"), ("Releases", "No releases yet")):
        nav(page, link)
        expect(page.get_by_text(empty).first).to_be_visible()
    nav(page, "Training")
    row = page.get_by_role("row", name=f"Run {run.pk}")
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("30 of 60")
    row.get_by_role("link", name=f"Run {run.pk}").click()
    page.wait_for_url(f"**/manage/training/{run.pk}")

    loss_chart = page.locator('figure[data-chart="Loss and its parts"]')
    loss = loss_chart.locator('g[data-series="loss"]')
    expect(loss).to_have_attribute("data-points", "30")
    assert float(loss.get_attribute("data-last")) == pytest.approx(_loss(30))
    for part in ("group", "t2v", "v2t"):
        expect(loss_chart.locator(f'g[data-series="{part}"]')).to_have_attribute("data-points", "30")
    expect(page.locator('figure[data-chart="Zero-negative row and column rates"] g[data-series="zero_neg_row_rate"]')) \
        .to_have_attribute("data-points", "30")
    expect(page.locator('figure[data-chart="Realized labels per batch"] g[data-series="negatives"]')) \
        .to_have_attribute("data-points", "30")
    expect(page.locator('figure[data-chart="logit scale"]')).to_be_visible()
    # A falling loss is drawn falling: SVG y grows downwards, x with the steps.
    points = _path_points(loss.locator("path").get_attribute("d"))
    assert len(points) == 30
    assert all(b[0] > a[0] for a, b in pairwise(points))
    assert all(b[1] >= a[1] for a, b in pairwise(points))
    expect(loss_chart.get_by_role("img")).to_have_attribute(
        "aria-label", re.compile(re.escape(f"loss from {_loss(1):.4g} at step 1 to {_loss(30):.4g} at step 30")))

    # The worker reports more steps: the curve grows without a reload.
    _steps(run, range(31, 61))
    expect(loss).to_have_attribute("data-points", "60", timeout=10_000)
    assert float(loss.get_attribute("data-last")) == pytest.approx(_loss(60))
    expect(page.get_by_text("60 / 60")).to_be_visible()
    shot(page, "15-training-run-live")

    # The run finishes with its evaluation: the figures appear next to the random baseline.
    metrics = {"t2traj": {"R@1": 62.5, "R@3": 100.0, "R@5": 100.0, "R@10": 100.0, "mAP": 79.1, "mAP@10": 79.1,
                          "n_queries": 8, "random_R@1": 40.0, "strata": {"2": {"R@1": 75.0, "R@3": 100.0, "mAP": 87.5,
                                                                                "n_queries": 4}}},
               "traj2t": {"R@1": 50.0, "R@3": 75.0, "mAP": 66.0, "n_queries": 6},
               "random": {"R@1": 40.0, "R@3": 100.0, "mAP": 70.0, "n_queries": 8}}
    TrainingRun.objects.filter(pk=run.pk).update(status="succeeded", finished_at=timezone.now(), metrics=metrics,
                                                 result={"zero_neg_row_rate": 0.1, "zero_neg_col_rate": 0.25})
    EvaluationRun.objects.create(kind="trained", training_run=run, snapshot=snapshot, model_kind="vtrajembed",
                                 status="succeeded", metrics=metrics, created_by=people["boss"])
    page.keyboard.press("Shift+R")  # refresh now (a finished run is no longer polled)
    figures = page.get_by_role("table", name=f"Final evaluation of run {run.pk} (percent)")
    expect(figures.get_by_role("row", name=re.compile("^T2Traj"))).to_contain_text("62.5")
    expect(figures.get_by_role("row", name=re.compile("^Random ranking"))).to_contain_text("40.0")
    expect(page.get_by_role("table", name="T2Traj by pool size")).to_contain_text("87.5")
    # The final evaluation is shown once; evaluations on other snapshots are listed apart.
    dev = RelationSnapshot.objects.create(split="dev", content_sha256="1" * 64, path="", pool_versions={}, counts={},
                                          complete=True, sealed_at=now)
    EvaluationRun.objects.create(kind="trained", training_run=run, snapshot=dev, model_kind="vtrajembed",
                                 status="succeeded", metrics={"t2traj": {"R@1": 33.3, "n_queries": 3}})
    page.keyboard.press("Shift+R")
    expect(page.get_by_role("table", name=re.compile(r"^Evaluation \d+ on snapshot"))).to_contain_text("33.3")
    expect(page.locator(".badge.status-succeeded").first).to_be_visible()
    shot(page, "16-training-run-finished")
