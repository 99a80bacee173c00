"""The web UI's server side without a browser: the app's page for every UI path, the page when
the UI is not built, and the /api/ui/ reads (queue counts per task type, pipeline progress)."""
from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import vote_cast
from annotation.models import Assignment, CandidatePool, WorkItem
from frontend import selectors, views
from tests.annotation.conftest import panel_votes
from tests.trajectories.factories import video_factory

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, make_user):
    def sign_in(*roles: str):
        user = make_user(*roles)
        client.force_login(user)
        return user

    return sign_in


def test_every_ui_path_gets_the_app_page_with_the_user(client, signed_in, tmp_path, monkeypatch):
    manifest = tmp_path / ".vite" / "manifest.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"index.html": {"file": "assets/index-abc.js", "isEntry": True,
                                                   "css": ["assets/index-def.css"]}}))
    monkeypatch.setattr(views, "MANIFEST", manifest)
    assert client.get("/review/usability/12").status_code == 302  # to the login page first
    user = signed_in("annotator", "adjudicator")
    for path in ["/", "/review/usability/12", "/manage/agreement", "/adjudication/3"]:
        page = client.get(path)
        assert page.status_code == 200, path
        html = page.content.decode()
        assert '<script type="module" src="/static/dist/assets/index-abc.js">' in html
        assert 'href="/static/dist/assets/index-def.css"' in html
        assert 'name="csrf-token"' in html
        me = json.loads(html.split('<script id="trajlab-me" type="application/json">')[1].split("</script>")[0])
        assert me == {"id": user.id, "username": user.username, "roles": ["adjudicator", "annotator"]}
    # The API, the admin and static files are never the app's page.
    assert client.get("/api/no-such-endpoint/").status_code == 404
    assert b"trajlab-me" not in client.get("/admin/").content


def test_without_a_build_the_page_says_how_to_build_it(client, signed_in, tmp_path, monkeypatch):
    monkeypatch.setattr(views, "MANIFEST", tmp_path / "missing" / "manifest.json")
    signed_in("manager")
    page = client.get("/")
    assert page.status_code == 503
    assert b"make frontend" in page.content


def test_the_manifest_is_read_again_after_a_rebuild(tmp_path):
    """A rebuild changes the hashed file names; the page follows without a server restart."""
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"index.html": {"file": "assets/a.js", "isEntry": True}}))
    assert views.app_entry(manifest) == {"js": "dist/assets/a.js", "css": []}
    manifest.write_text(json.dumps({"index.html": {"file": "assets/b.js", "isEntry": True, "css": ["assets/b.css"]}}))
    os.utime(manifest, ns=(1, 10**18))
    assert views.app_entry(manifest) == {"js": "dist/assets/b.js", "css": ["dist/assets/b.css"]}


def test_queues_count_what_each_person_can_take(reviewable_run, annotators, adjudicator, client_for):
    run = reviewable_run()  # 4 usability items, 1 duplicate pair
    items = list(WorkItem.objects.filter(stage="usability").order_by("id"))
    first = annotators[0]
    queues = {q["stage"]: q for q in selectors.annotator_queues(user=first) if q["kind"] == "review"}
    assert (queues["usability"]["available"], queues["identity"]["available"]) == (4, 1)
    # Claiming holds an item; voting on it counts as done and takes it out of the queue.
    seat = work_item_claim_next(annotator=first, stage="usability")
    queues = {q["stage"]: q for q in selectors.annotator_queues(user=first) if q["kind"] == "review"}
    assert queues["usability"]["in_progress"] == seat.item_id
    vote_cast(item_id=seat.item_id, annotator=first, label="usable")
    queues = {q["stage"]: q for q in selectors.annotator_queues(user=first) if q["kind"] == "review"}
    assert (queues["usability"]["available"], queues["usability"]["done"], queues["usability"]["in_progress"]) == (3, 1, None)
    # A full panel (three unexpired seats) leaves the item to nobody else.
    now = timezone.now()
    for seat_no, user in enumerate(annotators[1:4]):
        Assignment.objects.create(item=items[1], annotator=user, seat=seat_no, claimed_at=now,
                                  lease_expires_at=now + timedelta(minutes=5))
    other = {q["stage"]: q for q in selectors.annotator_queues(user=annotators[4]) if q["kind"] == "review"}
    assert other["usability"]["available"] == 3  # items 0, 2, 3 (1 is full)
    # Adjudicators count the items without a majority that they did not sit on.
    panel_votes(items[2], annotators[1:4], ["usable", "unusable", "uncertain"])
    adj = {q["stage"]: q for q in selectors.annotator_queues(user=adjudicator) if q["kind"] == "adjudication"}
    assert adj["usability"]["available"] == 1
    assert not [q for q in selectors.annotator_queues(user=adjudicator) if q["kind"] == "review"]
    body = client_for(first).get("/api/ui/queues/").json()
    assert {q["stage"] for q in body["queues"]} >= {"usability", "identity"}
    assert run.pk


def test_queue_counts_stop_at_the_cap(monkeypatch, reviewable_run, annotators):
    reviewable_run()
    monkeypatch.setattr(selectors, "QUEUE_COUNT_CAP", 2)
    usability = next(q for q in selectors.annotator_queues(user=annotators[0]) if q["stage"] == "usability")
    assert (usability["available"], usability["more"]) == (2, True)


def test_progress_per_stage_and_split(reviewable_run, annotators, client_for, manager, annotator):
    train = reviewable_run(video_factory(split="train"))
    reviewable_run(video_factory(split="dev"))
    video_factory(split="")  # not yet assigned to a split
    for item in WorkItem.objects.filter(trajectory__run=train) | WorkItem.objects.filter(duplicate__trajectory_a__run=train):
        labels = ["usable"] * 3 if item.stage == "usability" else ["different"] * 3
        panel_votes(item, annotators[:3], labels)
    pool_freeze(run=train)
    body = client_for(manager).get("/api/ui/progress/").json()
    assert body["splits"] == ["train", "dev", "test", "unassigned"]
    assert body["videos"] == {"train": 1, "dev": 1, "test": 0, "unassigned": 1}
    assert body["proposal_runs"]["train"] == {"succeeded": 1}
    assert body["review"]["usability"]["train"] == {"decided": 4}
    assert body["review"]["usability"]["dev"] == {"open": 4}
    assert body["review"]["identity"]["train"] == {"decided": 1}
    assert body["pools"]["train"] == {"videos": 1, "videos_with_pool": 1, "pools": 1}
    assert body["pools"]["dev"]["videos_with_pool"] == 0
    assert CandidatePool.objects.count() == 1
    assert client_for(annotator).get("/api/ui/progress/").status_code == 403
    assert client_for(None).get("/api/ui/queues/").status_code == 403
