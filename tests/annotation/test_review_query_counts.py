"""How many statements a claim and a vote send, through the API as an annotator's client calls it
(a token, PostgreSQL): pinned, so a change that adds a query to the review path fails here. The
counts include the token check and the transaction's own statements (a savepoint and its release
inside a test's transaction; BEGIN and COMMIT on a server), and grow with nothing: not with the
queue, the seats or the votes already cast."""
from __future__ import annotations

import uuid

import pytest
from django.db import connection
from rest_framework.test import APIClient

from accounts.services import token_for
from annotation.models import Vote, WorkItem

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="the counts of the PostgreSQL path")]

# the token check, the annotator's lock, their open seat, the candidates, the seat's insert, and
# the transaction's two statements
CLAIM = 7
# the token check, the item's locked read with the seat and a replay, the vote's write (the seat
# completed and the labels read with it), and the transaction's two statements
VOTE = 5
DECIDED = 1        # a vote that decides its item writes the item's new state
VOTE_AND_NEXT = VOTE + CLAIM - 1   # one token check
# A claim that takes its preferred item (the upcoming one the client fetched ahead) reads the item
# after it with the preferred item's lock: no statement more.


def _client(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user=user)}")
    return api


def _claim(api, **prefer) -> dict:
    response = api.post("/api/review/next/", {"stage": "usability", **prefer}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def _vote(api, item: int, label: str = "usable", **more) -> dict:
    body = {"label": label, "client_request_id": str(uuid.uuid4()), **more}
    response = api.post(f"/api/review/items/{item}/votes/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_claim_and_a_vote_send_their_pinned_statements(reviewable_run, annotators, django_assert_max_num_queries):
    reviewable_run()
    reviewable_run()
    api = _client(annotators[0])
    with django_assert_max_num_queries(CLAIM):
        first = _claim(api)
    with django_assert_max_num_queries(CLAIM):        # the seat held: the same item again, no new seat
        assert _claim(api)["item"] == first["item"]
    with django_assert_max_num_queries(VOTE):
        _vote(api, first["item"])
    with django_assert_max_num_queries(CLAIM):
        second = _claim(api, prefer=first["upcoming"]["token"])
    assert second["item"] == first["upcoming"]["item"]
    with django_assert_max_num_queries(VOTE_AND_NEXT):
        body = _vote(api, second["item"], next=True, prefer=second["upcoming"]["token"])
    assert body["next"]["item"] == second["upcoming"]["item"]


def test_the_vote_that_decides_its_item_writes_one_statement_more(reviewable_run, annotators,
                                                                  django_assert_max_num_queries):
    reviewable_run()
    panel = [_client(a) for a in annotators[:3]]
    seats = [_claim(api) for api in panel]
    item = seats[0]["item"]
    assert all(s["item"] == item for s in seats), seats      # the queue's first item for each of them
    for api in panel[:2]:
        with django_assert_max_num_queries(VOTE):
            _vote(api, item, "unusable")
    with django_assert_max_num_queries(VOTE + DECIDED):
        _vote(panel[2], item, "unusable")
    decided = WorkItem.objects.get(pk=item)
    assert (decided.state, decided.decision) == (WorkItem.State.DECIDED, "unusable")
    assert list(Vote.objects.filter(item_id=item).order_by("created_at", "id").values_list("label", flat=True)) \
        == ["unusable"] * 3
