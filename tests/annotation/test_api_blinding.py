"""Blinding, endpoint by endpoint: nobody sees another person's vote before adjudication."""
from __future__ import annotations

import json
import uuid

import pytest

from annotation.models import Vote, WorkItem

pytestmark = pytest.mark.django_db
FORBIDDEN_KEYS = {"votes", "tally", "state", "decision", "counts", "labels_cast"}


def body_text(response) -> str:
    return json.dumps(response.json()) if response.content else ""


def test_the_review_flow_over_http(reviewable_run, annotators, adjudicator, client_for, manager_client):
    run = reviewable_run()
    r = manager_client.post("/api/review/items/", {"run": run.pk}, format="json")
    assert r.status_code == 201 and r.json() == {"usability": 4, "identity": 1}
    clients = [client_for(a) for a in annotators[:3]]
    item_id = None
    for client, label in zip(clients, ["same", "different", "uncertain"]):
        seat = client.post("/api/review/next/", {"stage": "identity"}, format="json")
        assert seat.status_code == 200
        item_id = seat.json()["item"]
        assert seat.json()["labels"] == ["same", "different", "uncertain"]
        assert seat.json()["my_vote"] is None
        request_id = str(uuid.uuid4())
        vote = client.post(f"/api/review/items/{item_id}/votes/",
                           {"label": label, "reasons": ["looked twice"], "time_spent_ms": 4200,
                            "client_request_id": request_id}, format="json")
        assert vote.status_code == 201, vote.content
        retry = client.post(f"/api/review/items/{item_id}/votes/",
                            {"label": label, "client_request_id": request_id}, format="json")
        assert retry.status_code == 200 and retry.json()["id"] == vote.json()["id"]
        second = client.post(f"/api/review/items/{item_id}/votes/", {"label": "same"}, format="json")
        assert second.status_code == 409 and second.json()["code"] == "already_voted"
    assert clients[0].post("/api/review/next/", {"stage": "identity"}, format="json").status_code == 204
    queue = client_for(adjudicator).get("/api/adjudication/")
    assert [i["item"] for i in queue.json()] == [item_id]
    assert sorted(v["label"] for v in queue.json()[0]["votes"]) == ["different", "same", "uncertain"]
    decided = client_for(adjudicator).post(f"/api/adjudication/{item_id}/", {"label": "same", "reason": "same coat"},
                                           format="json")
    assert decided.status_code == 201
    assert WorkItem.objects.get(pk=item_id).decision == "same"
    summary = manager_client.get("/api/review/summary/").json()
    assert summary["identity"]["states"] == {"decided": 1} and summary["identity"]["adjudication_rate"] == 1.0


def test_annotators_never_see_other_votes(reviewable_run, annotators, client_for):
    reviewable_run()
    a, b = client_for(annotators[0]), client_for(annotators[1])
    seat_a = a.post("/api/review/next/", {"stage": "identity"}, format="json").json()
    item_id = seat_a["item"]
    a.post(f"/api/review/items/{item_id}/votes/", {"label": "different", "reasons": ["two people"]}, format="json")
    seat_b = b.post("/api/review/next/", {"stage": "identity"}, format="json")
    assert seat_b.json()["item"] == item_id
    responses = {
        "next": seat_b,
        "item": b.get(f"/api/review/items/{item_id}/"),
        "own item of a": a.get(f"/api/review/items/{item_id}/"),
    }
    for name, response in responses.items():
        text = body_text(response)
        assert not FORBIDDEN_KEYS & set(response.json()), (name, response.json())
        if name != "own item of a":
            assert "two people" not in text and "different" not in text.replace('"labels": ["same", "different", "uncertain"]', "")
    assert responses["own item of a"].json()["my_vote"]["label"] == "different"  # one's own vote is visible
    assert b.get(f"/api/review/items/{item_id}/").json()["my_vote"] is None
    # other people's items, the adjudication queue and the summary are closed to annotators
    c = client_for(annotators[2])
    assert c.get(f"/api/review/items/{item_id}/").status_code == 404
    assert b.get("/api/adjudication/").status_code == 403
    assert b.get(f"/api/adjudication/{item_id}/").status_code == 403
    assert b.get("/api/review/summary/").status_code == 403
    # and the generic record endpoints carry no votes either
    for url in ("/api/duplicate-candidates/", f"/api/trajectories/?video={WorkItem.objects.get(pk=item_id).video_id}"):
        assert "two people" not in body_text(b.get(url))


def test_adjudicators_see_votes_only_of_items_they_adjudicate(reviewable_run, annotators, make_user, client_for):
    reviewable_run()
    both = make_user("annotator", "adjudicator", username="both")
    item = WorkItem.objects.get(stage="identity")
    clients = [client_for(u) for u in (both, annotators[0], annotators[1])]
    for client, label in zip(clients, ["same", "different", "uncertain"]):
        seat = client.post("/api/review/next/", {"stage": "identity"}, format="json").json()
        assert seat["item"] == item.pk
        client.post(f"/api/review/items/{item.pk}/votes/", {"label": label}, format="json")
    # the panel member who is also an adjudicator may not see or decide this item
    assert clients[0].get("/api/adjudication/").json() == []
    assert clients[0].get(f"/api/adjudication/{item.pk}/").status_code == 404
    refused = clients[0].post(f"/api/adjudication/{item.pk}/", {"label": "same", "reason": "mine"}, format="json")
    assert refused.status_code == 403 and refused.json()["code"] == "panel_member"
    # an adjudicator does not see items that are not in adjudication
    other = make_user("adjudicator", username="adj2")
    open_item = WorkItem.objects.filter(stage="usability").first()
    assert client_for(other).get(f"/api/adjudication/{open_item.pk}/").status_code == 404
    assert len(client_for(other).get("/api/adjudication/").json()[0]["votes"]) == 3


def test_managers_see_aggregates_not_votes(reviewable_run, annotators, client_for, manager_client):
    reviewable_run()
    a = client_for(annotators[0])
    item_id = a.post("/api/review/next/", {"stage": "usability"}, format="json").json()["item"]
    a.post(f"/api/review/items/{item_id}/votes/", {"label": "unusable", "reasons": ["a shadow"]}, format="json")
    summary = manager_client.get("/api/review/summary/")
    assert summary.status_code == 200 and "a shadow" not in body_text(summary)
    assert summary.json()["usability"]["panel_votes"] == 1
    assert manager_client.get(f"/api/review/items/{item_id}/").status_code == 403  # managers are not annotators
    assert manager_client.get("/api/adjudication/").status_code == 403


def test_wrong_roles_and_bad_input_over_http(reviewable_run, annotators, adjudicator, client_for, manager_client):
    reviewable_run()
    adj = client_for(adjudicator)
    assert adj.post("/api/review/next/", {}, format="json").status_code == 403
    a = client_for(annotators[0])
    bad_stage = a.post("/api/review/next/", {"stage": "relations"}, format="json")
    assert bad_stage.status_code == 400
    item_id = a.post("/api/review/next/", {"stage": "usability"}, format="json").json()["item"]
    unknown = a.post(f"/api/review/items/{item_id}/votes/", {"label": "maybe"}, format="json")
    assert unknown.status_code == 400
    wrong_stage = a.post(f"/api/review/items/{item_id}/votes/", {"label": "same"}, format="json")
    assert wrong_stage.status_code == 400 and wrong_stage.json()["code"] == "invalid_label"
    skip = a.delete(f"/api/review/items/{item_id}/")
    assert skip.status_code == 204
    assert Vote.objects.count() == 0
    assert a.post("/api/review/items/", {"run": 1}, format="json").status_code == 403
