"""Claims and seats (issue 16, item 9): a closed item keeps its seats, and simultaneous claims by
one annotator give that annotator the one seat they hold."""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.curation.services import claims
from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.votes import vote_cast
from annotation.models import Assignment, Vote, WorkItem
from tests.annotation.test_concurrency import run_threads


@pytest.mark.django_db
def test_an_unvoted_seat_on_a_closed_item_cannot_be_given_back(reviewable_run, annotators, client_for):
    # given: an identity item where the first annotator sits without voting, two others voted
    # differently, and the item went on to adjudication (closed to the panel)
    reviewable_run()
    item = WorkItem.objects.get(stage="identity")
    now = timezone.now()
    for seat, user in enumerate(annotators[:3]):
        Assignment.objects.create(item=item, annotator=user, seat=seat, claimed_at=now,
                                  lease_expires_at=now + timedelta(minutes=10))
    for user, label in zip(annotators[1:3], ["same", "different"]):
        vote_cast(item_id=item.pk, annotator=user, label=label)
    WorkItem.objects.filter(pk=item.pk).update(state=WorkItem.State.ADJUDICATE)
    # when: the first annotator gives the seat back
    response = client_for(annotators[0]).delete(f"/api/review/items/{item.pk}/")
    # then: 409, and the seat is still on the item's record
    assert response.status_code == 409, response.content
    assert response.json()["code"] == "item_closed"
    assert Assignment.objects.filter(item=item, annotator=annotators[0]).exists()


@pytest.mark.django_db
def test_an_unvoted_seat_on_an_open_item_can_be_given_back(reviewable_run, annotators, client_for):
    reviewable_run()
    seat = work_item_claim_next(annotator=annotators[0], stage="identity")
    assert client_for(annotators[0]).delete(f"/api/review/items/{seat.item_id}/").status_code == 204
    assert not Assignment.objects.filter(pk=seat.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_simultaneous_claims_by_one_annotator_return_the_seat_they_hold(reviewable_run, annotators, monkeypatch):
    reviewable_run()
    real_policy = claims.review_policy_get

    def slow_policy():  # widens the window between "holds no seat" and the claim's commit
        time.sleep(0.3)
        return real_policy()

    monkeypatch.setattr(claims, "review_policy_get", slow_policy)
    user = annotators[0]
    barrier = threading.Barrier(2)
    seats = []

    def claim():
        barrier.wait()
        seats.append(work_item_claim_next(annotator=user, stage="identity"))

    run_threads(claim, [(), ()])
    assert len(seats) == 2 and all(s is not None for s in seats), seats
    assert seats[0].pk == seats[1].pk
    assert Assignment.objects.filter(annotator=user).count() == 1


@pytest.mark.django_db
def test_review_time_is_bounded(reviewable_run, make_user, client_for):
    reviewable_run()
    user = make_user("annotator")
    seat = work_item_claim_next(annotator=user, stage="identity")
    response = client_for(user).post(f"/api/review/items/{seat.item_id}/votes/",
                                     {"label": "same", "time_spent_ms": 2**40}, format="json")
    assert response.status_code == 400, response.content
    assert "time_spent_ms" in response.json()["extra"]["fields"]
    assert not Vote.objects.exists()
