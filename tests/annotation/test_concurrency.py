"""Concurrent claims and votes on the real database: the panel size and one vote per person hold."""
from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection

from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.votes import vote_cast
from annotation.models import Assignment, Vote, WorkItem
from annotation.rules import decide

pytestmark = pytest.mark.django_db(transaction=True)


def run_threads(target, args_list):
    errors = []

    def wrap(*args):
        try:
            target(*args)
        except Exception as exc:  # collected and re-raised in the test thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrap, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


def test_racing_claims_never_overfill_a_panel(reviewable_run, make_user):
    reviewable_run()
    users = [make_user("annotator", username=f"racer{i}") for i in range(12)]
    barrier = threading.Barrier(len(users))
    seats = {}

    def claim_and_vote(user):
        barrier.wait()
        seat = work_item_claim_next(annotator=user, stage="identity")
        seats[user.pk] = seat
        if seat is not None:
            request = uuid.uuid4()
            vote_cast(item_id=seat.item_id, annotator=user, label="same", client_request_id=request)
            vote_cast(item_id=seat.item_id, annotator=user, label="same", client_request_id=request)  # a retry

    run_threads(claim_and_vote, [(u,) for u in users])
    item = WorkItem.objects.get(stage="identity")
    assert sum(1 for s in seats.values() if s is not None) == item.panel_size
    assert Assignment.objects.filter(item=item).count() == item.panel_size
    votes = list(Vote.objects.filter(item=item).order_by("created_at", "id").values_list("label", flat=True))
    assert len(votes) == item.panel_size
    assert item.state == "decided" and item.decision == decide(votes, item.decisive)
