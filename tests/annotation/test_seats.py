"""Seats that never lose an item (issue 15, item 1): a lapsed lease is free again for anyone, its
holder included; a skip carries a reason and does not bring the item straight back; managers see
the seats and release or reassign them, on record; a refused freeze names the open items."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.curation import selectors
from annotation.curation.selectors import claimable_items
from annotation.curation.services.claims import assignment_release, work_item_claim_next
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.seats import seat_reassign, seat_release
from annotation.curation.services.votes import vote_cast
from annotation.models import Assignment, SeatEvent, WorkItem
from common.errors import ApplicationError, ConflictError

pytestmark = pytest.mark.django_db


def _lapse(seat: Assignment) -> None:
    Assignment.objects.filter(pk=seat.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def _identity_item_waiting_for_third(annotators):
    """The identity item with two votes in (a tie) and a third seat held by annotators[2]."""
    seats = [work_item_claim_next(annotator=u, stage="identity") for u in annotators[:3]]
    assert len({s.item_id for s in seats}) == 1
    vote_cast(item_id=seats[0].item_id, annotator=annotators[0], label="same")
    vote_cast(item_id=seats[1].item_id, annotator=annotators[1], label="different")
    return seats[2]


def test_a_lapsed_lease_comes_back_to_the_annotator_who_let_it_lapse(reviewable_run, annotators):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    _lapse(held)
    # when the same annotator asks for work again
    again = work_item_claim_next(annotator=annotators[2], stage="identity")
    # then they get the item back, on a fresh lease, and the lapse is on record
    assert again is not None and again.item_id == held.item_id
    assert again.lease_expires_at > timezone.now()
    event = SeatEvent.objects.get(item_id=held.item_id)
    assert (event.kind, event.holder, event.seat) == ("expired", annotators[2], held.seat)
    vote_cast(item_id=again.item_id, annotator=annotators[2], label="same")
    assert WorkItem.objects.get(pk=held.item_id).state == "decided"


def test_a_lapsed_lease_goes_to_another_annotator_and_not_back_to_both(reviewable_run, annotators):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    assert claimable_items(annotator=annotators[3], stage="identity").count() == 0  # the lease still runs
    assert work_item_claim_next(annotator=annotators[3], stage="identity") is None
    _lapse(held)
    assert claimable_items(annotator=annotators[3], stage="identity").count() == 1
    assert claimable_items(annotator=annotators[2], stage="identity").count() == 1
    taken = work_item_claim_next(annotator=annotators[3], stage="identity")
    assert taken.item_id == held.item_id and taken.seat == held.seat
    assert not Assignment.objects.filter(item_id=held.item_id, annotator=annotators[2]).exists()
    assert work_item_claim_next(annotator=annotators[2], stage="identity") is None  # the panel is full again


def test_a_skipped_item_does_not_come_straight_back(reviewable_run, annotators, monkeypatch):
    reviewable_run()
    first = work_item_claim_next(annotator=annotators[0], stage="usability")
    assignment_release(assignment=first, reason="  the video will not load  ")
    event = SeatEvent.objects.get(item_id=first.item_id)
    assert (event.kind, event.reason, event.holder) == ("skipped", "the video will not load", annotators[0])
    # the next claims go through the other items, never the skipped one
    seen = []
    while (seat := work_item_claim_next(annotator=annotators[0], stage="usability")) is not None:
        seen.append(seat.item_id)
        vote_cast(item_id=seat.item_id, annotator=annotators[0], label="usable")
    assert first.item_id not in seen and len(seen) == 3
    assert claimable_items(annotator=annotators[0], stage="usability").count() == 0
    # other people get it as usual, and after the cool-down so does the skipper
    assert work_item_claim_next(annotator=annotators[1], stage="usability").item_id == first.item_id
    monkeypatch.setattr(selectors, "SKIP_COOLDOWN", timedelta(0))  # the cool-down has passed
    assert work_item_claim_next(annotator=annotators[0], stage="usability").item_id == first.item_id


def test_a_skip_reason_is_bounded(reviewable_run, annotators):
    reviewable_run()
    seat = work_item_claim_next(annotator=annotators[0], stage="usability")
    with pytest.raises(ApplicationError) as err:
        assignment_release(assignment=seat, reason="x" * 201)
    assert err.value.code == "invalid_reason"
    assert Assignment.objects.filter(pk=seat.pk).exists() and not SeatEvent.objects.exists()


def test_a_manager_releases_a_running_seat_on_record(reviewable_run, annotators, manager):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    event = seat_release(item_id=held.item_id, seat=held.seat, manager=manager, reason="ann2 is on leave")
    assert (event.kind, event.holder, event.by, event.reason) == ("released", annotators[2], manager,
                                                                   "ann2 is on leave")
    assert not Assignment.objects.filter(pk=held.pk).exists()
    # the holder's vote is now refused, and the seat is anyone's
    with pytest.raises(ApplicationError) as err:
        vote_cast(item_id=held.item_id, annotator=annotators[2], label="same")
    assert err.value.code == "not_assigned"
    assert work_item_claim_next(annotator=annotators[3], stage="identity").item_id == held.item_id


def test_a_manager_reassigns_a_seat_on_record(reviewable_run, annotators, manager):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    event = seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=annotators[4].username,
                          reason="ann4 knows this video")
    assert (event.kind, event.holder, event.to, event.by) == ("reassigned", annotators[2], annotators[4], manager)
    seat = Assignment.objects.get(item_id=held.item_id, seat=held.seat)
    assert seat.annotator == annotators[4] and seat.lease_expires_at > timezone.now()
    # it is the new holder's current item
    assert work_item_claim_next(annotator=annotators[4], stage="identity").pk == seat.pk
    vote_cast(item_id=held.item_id, annotator=annotators[4], label="same")
    assert WorkItem.objects.get(pk=held.item_id).state == "decided"


def test_seat_changes_are_refused_where_they_would_rewrite_the_record(reviewable_run, annotators, manager,
                                                                      make_user):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    voted = Assignment.objects.get(item_id=held.item_id, annotator=annotators[0])
    superuser = get_user_model().objects.create_superuser("root", password="x")
    inactive = make_user("annotator")
    inactive.is_active = False
    inactive.save(update_fields=["is_active"])
    cases = [
        (lambda: seat_release(item_id=held.item_id, seat=voted.seat, manager=manager), "already_voted"),
        (lambda: seat_release(item_id=held.item_id, seat=7, manager=manager), "seat_free"),
        (lambda: seat_release(item_id=held.item_id, seat=held.seat, manager=annotators[0]), "permission_denied"),
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=annotators[1].username),
         "already_seated"),
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=annotators[2].username),
         "same_holder"),
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=make_user("auditor").username),
         "not_an_annotator"),
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to="nobody"),
         "not_an_annotator"),
        # a superuser holds every role implicitly but was never given a panel seat's role
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=superuser),
         "not_an_annotator"),
        (lambda: seat_reassign(item_id=held.item_id, seat=held.seat, manager=manager, to=inactive),
         "not_an_annotator"),
    ]
    for call, code in cases:
        with pytest.raises(ApplicationError) as err:
            call()
        assert err.value.code == code
    assert not SeatEvent.objects.exists()
    assert Assignment.objects.get(pk=held.pk).annotator == annotators[2]


def test_the_seat_api_lists_releases_and_reassigns(reviewable_run, annotators, manager, client_for):
    reviewable_run()
    held = _identity_item_waiting_for_third(annotators)
    boss = client_for(manager)
    page = boss.get("/api/review/seats/", {"stage": "identity"}).json()
    assert page["count"] == 1
    row = page["results"][0]
    assert row["item"] == held.item_id and row["state"] == "open"
    assert [(s["holder"], s["voted"], s["expired"]) for s in row["seats"]] == [
        ("ann0", True, False), ("ann1", True, False), ("ann2", False, False)]
    assert "label" not in str(row["seats"])  # who sits where, never what they said
    assert client_for(annotators[0]).get("/api/review/seats/").status_code == 403
    assert boss.get("/api/review/seats/", {"stage": "nonsense"}).status_code == 400
    assert boss.get("/api/review/seats/", {"holder": "ann2"}).json()["count"] == 1
    assert boss.get("/api/review/seats/", {"holder": "ann4"}).json()["count"] == 0
    response = boss.post(f"/api/review/items/{held.item_id}/seats/{held.seat}/reassign/",
                         {"to": "ann4", "reason": "faster"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "reassigned" and response.json()["to"] == "ann4"
    response = boss.post(f"/api/review/items/{held.item_id}/seats/{held.seat}/release/", {}, format="json")
    assert response.status_code == 201 and response.json()["holder"] == "ann4"
    response = boss.post(f"/api/review/items/{held.item_id}/seats/{held.seat}/release/", {}, format="json")
    assert response.status_code == 404 and response.json()["code"] == "seat_free"
    events = boss.get("/api/review/seats/", {"item": held.item_id}).json()["results"][0]["events"]
    assert [(e["kind"], e["by"]) for e in events] == [("released", manager.username),
                                                      ("reassigned", manager.username)]


def test_a_refused_freeze_names_the_open_items(reviewable_run, annotators):
    run = reviewable_run()
    with pytest.raises(ConflictError) as err:
        pool_freeze(run=run)
    open_ids = sorted(WorkItem.objects.filter(state="open").values_list("pk", flat=True))
    named = err.value.extra["open_items"]
    assert [r["id"] for r in named] == open_ids
    assert (err.value.extra["usability"], err.value.extra["identity"]) == (4, 1)
    for pk in open_ids:
        assert f"#{pk} " in err.value.message


def test_seat_events_are_never_edited_nor_deleted(reviewable_run, annotators):
    reviewable_run()
    seat = work_item_claim_next(annotator=annotators[0], stage="usability")
    assignment_release(assignment=seat, reason="blurred")
    event = SeatEvent.objects.get()
    for change in (lambda: SeatEvent.objects.filter(pk=event.pk).update(reason="edited"),
                   lambda: SeatEvent.objects.filter(pk=event.pk).delete()):
        with pytest.raises(IntegrityError), transaction.atomic():
            change()
    assert SeatEvent.objects.get().reason == "blurred"
