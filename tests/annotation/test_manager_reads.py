"""What the managers' screens read (issue 27, finding 14): each proposal run's review readiness
(decided, open, in adjudication, ready to freeze), one review item opened from Find, and the seat
board a page at a time."""
from __future__ import annotations

import random

import pytest
from django.db.models import Count

from annotation.curation.services.pools import pool_freeze
from annotation.models import DescriptionRun, MiningRun, WorkItem
from common.errors import ApplicationError
from tests.annotation.conftest import panel_votes
from tests.trajectories.factories import run_factory, video_factory

pytestmark = pytest.mark.django_db


def _run_items(run):
    return WorkItem.objects.filter(trajectory__run=run) | WorkItem.objects.filter(duplicate__trajectory_a__run=run)


def _readiness(client, **params) -> dict[int, dict]:
    answer = client.get("/api/review/run-readiness/", params)
    assert answer.status_code == 200, answer.content
    return {row["run"]: row for row in answer.json()["results"]}


def test_each_runs_review_readiness_follows_its_items_to_ready_to_freeze(reviewable_run, annotators, client_for,
                                                                         manager):
    run, other = reviewable_run(), reviewable_run()
    unopened = run_factory(video=video_factory(split="train"))
    client = client_for(manager)
    rows = _readiness(client)
    n = _run_items(run).count()
    assert rows[run.pk] == {"run": run.pk, "items": n, "open": n, "adjudicate": 0, "decided": 0, "unresolved": 0,
                            "ready": False}
    assert rows[unopened.pk]["items"] == 0 and rows[unopened.pk]["ready"] is False
    # when the panels decide every item but one tie, that one waits in adjudication
    items = list(_run_items(run).order_by("id"))
    for item in items[1:]:
        panel_votes(item, annotators[:3], ["usable"] * 3 if item.stage == "usability" else ["same"] * 3)
    panel_votes(items[0], annotators[:3], ["usable", "unusable", "uncertain"] if items[0].stage == "usability"
                else ["same", "different", "uncertain"])
    row = _readiness(client)[run.pk]
    assert (row["open"], row["adjudicate"], row["decided"], row["ready"]) == (0, 1, n - 1, False)
    with pytest.raises(ApplicationError):  # the freeze reads the same items
        pool_freeze(run=run)
    # once it is decided the run is ready to freeze, and the other run is untouched
    WorkItem.objects.filter(pk=items[0].pk).update(state="decided", decision=items[0].labels[0])
    row = _readiness(client)[run.pk]
    assert (row["adjudicate"], row["decided"], row["ready"]) == (0, n, True)
    pool_freeze(run=run)
    assert _readiness(client)[other.pk]["open"] == _run_items(other).count()


def test_run_readiness_is_for_managers_and_pages(reviewable_run, client_for, manager, annotator):
    runs = [reviewable_run() for _ in range(3)]
    assert client_for(annotator).get("/api/review/run-readiness/").status_code == 403
    page = client_for(manager).get("/api/review/run-readiness/", {"limit": 2}).json()
    assert page["count"] == 3 and len(page["results"]) == 2
    assert [r["run"] for r in page["results"]] == [r.pk for r in runs[:2]]  # the runs list's order
    assert client_for(manager).get("/api/review/run-readiness/", {"offset": "x"}).status_code == 400


def test_one_review_item_opens_for_managers_with_its_target(reviewable_run, annotators, client_for, manager,
                                                            annotator):
    run = reviewable_run()
    item = WorkItem.objects.filter(stage="identity", duplicate__trajectory_a__run=run).first()
    panel_votes(item, annotators[:2], ["same", "different"])
    answer = client_for(manager).get(f"/api/review/items/{item.pk}/overview/")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert (body["id"], body["stage"], body["state"], body["n_votes"], body["video"]) == (
        item.pk, "identity", "open", 2, item.video_id)
    assert body["labels"] == list(item.labels)
    ends = {item.duplicate.trajectory_a_id, item.duplicate.trajectory_b_id}
    assert {body["target"]["trajectory_a"], body["target"]["trajectory_b"]} == ends
    assert "votes" not in body  # the managers' reads name no one's label
    assert client_for(manager).get("/api/review/items/999999/overview/").status_code == 404
    assert client_for(annotator).get(f"/api/review/items/{item.pk}/overview/").status_code == 403


def test_model_and_mining_runs_say_their_own_status_beside_their_jobs(client_for, manager):
    """A cancelled run's job ends "failed": the run lists carry the run's status, so the screens
    say "cancelled"."""
    described = DescriptionRun.objects.create(backend={"name": "heuristic"}, prompt_version="t", prompt_sha256="0" * 64,
                                              status="cancelled")
    mined = MiningRun.objects.create(split="train", config={}, status="cancelled")
    client = client_for(manager)
    rows = client.get("/api/description-runs/").json()["results"]
    assert [(r["id"], r["status"]) for r in rows] == [(described.pk, "cancelled")]
    assert [(r["id"], r["status"]) for r in client.get("/api/mining-runs/").json()["results"]] == [(mined.pk, "cancelled")]


def test_the_progress_page_counts_review_items_as_the_obvious_join_does(reviewable_run, client_for, manager):
    """``GET /api/ui/progress/``'s review counts (per stage and video first, then joined to the
    splits) equal one ORM count over every item joined to its split, with items of several
    stages, states and splits, and a video without a split."""
    rng = random.Random(5)
    runs = [reviewable_run(video=video_factory(split=split)) for split in ("train", "dev", "test", "train", "")]
    items = list(WorkItem.objects.filter(video__in=[r.video for r in runs]))
    for item in items:
        state = rng.choice(["open", "adjudicate", "decided", "unresolved"])
        WorkItem.objects.filter(pk=item.pk).update(state=state, decision=item.labels[0] if state == "decided" else "")
    expected: dict = {}
    for r in WorkItem.objects.order_by().values("stage", "video__split_group__split", "state").annotate(n=Count("id")):
        split = r["video__split_group__split"] or "unassigned"
        expected.setdefault(r["stage"], {}).setdefault(split, {})[r["state"]] = r["n"]
    answer = client_for(manager).get("/api/ui/progress/")
    assert answer.status_code == 200, answer.content
    review = {stage: splits for stage, splits in answer.json()["review"].items() if splits}
    assert review == expected and sum(n for s in review.values() for c in s.values() for n in c.values()) == len(items)
