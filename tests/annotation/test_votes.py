"""Claims, votes and adjudication through the services, and the database's own guarantees."""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.curation.services.claims import assignment_release, work_item_claim_next
from annotation.curation.services.items import work_items_create_for_run
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.models import Assignment, ReviewPolicy, Vote, WorkItem
from common.errors import ApplicationError, ConflictError

pytestmark = pytest.mark.django_db


def vote_on(item: WorkItem, annotator, label: str, **kw):
    """Give ``annotator`` a seat on ``item`` by claiming until it comes up, then vote."""
    seat = work_item_claim_next(annotator=annotator, stage=item.stage)
    while seat is not None and seat.item_id != item.pk:
        assignment_release(assignment=seat)
        Assignment.objects.create(item=seat.item, annotator=annotator, seat=99, claimed_at=timezone.now(),
                                  lease_expires_at=timezone.now(), completed_at=timezone.now())  # park it
        seat = work_item_claim_next(annotator=annotator, stage=item.stage)
    assert seat is not None and seat.item_id == item.pk
    return vote_cast(item_id=item.pk, annotator=annotator, label=label, **kw)


def test_items_are_created_once_per_trajectory_and_pair(reviewable_run):
    run = reviewable_run()
    assert WorkItem.objects.filter(stage="usability").count() == 4
    assert WorkItem.objects.filter(stage="identity").count() == 1
    assert work_items_create_for_run(run=run) == {"usability": 4, "identity": 1}
    assert WorkItem.objects.count() == 5
    ReviewPolicy.objects.update(panel_size=5, required_votes=3)
    assert set(WorkItem.objects.values_list("panel_size", flat=True)) == {3}  # items keep their policy


def test_a_panel_is_three_distinct_annotators(reviewable_run, annotators):
    reviewable_run()
    item = WorkItem.objects.filter(stage="usability").first()
    seats = []
    for a in annotators:
        seat = work_item_claim_next(annotator=a, stage="usability")
        seats.append(seat)
    on_item = [s for s in seats if s.item_id == item.pk]
    assert len(on_item) == 3 and len({s.annotator_id for s in on_item}) == 3
    assert sorted(s.seat for s in on_item) == [0, 1, 2]
    # asking again while the lease runs returns the same seat
    assert work_item_claim_next(annotator=annotators[0], stage="usability").pk == seats[0].pk


def test_annotators_stay_on_their_video(reviewable_run, annotators):
    first = reviewable_run()
    second = reviewable_run()
    a = annotators[0]
    seat = work_item_claim_next(annotator=a, stage="usability")
    assert seat.item.video_id == first.video_id
    vote_cast(item_id=seat.item_id, annotator=a, label="usable")
    # other annotators take the rest of the first video's items; a keeps getting that video first
    for other in annotators[1:]:
        work_item_claim_next(annotator=other, stage="usability")
    nxt = work_item_claim_next(annotator=a, stage="usability")
    assert nxt.item.video_id == first.video_id
    assert WorkItem.objects.filter(video=second.video).exists()


def test_an_expired_lease_returns_the_seat(reviewable_run, annotators):
    reviewable_run()
    ReviewPolicy.objects.update(panel_size=1, required_votes=1)
    WorkItem.objects.update(panel_size=1, required_votes=1)
    a, b = annotators[:2]
    seat = work_item_claim_next(annotator=a, stage="identity")
    assert work_item_claim_next(annotator=b, stage="identity") is None  # the only seat is taken
    Assignment.objects.filter(pk=seat.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    taken = work_item_claim_next(annotator=b, stage="identity")
    assert taken is not None and taken.item_id == seat.item_id
    assert not Assignment.objects.filter(pk=seat.pk).exists()
    with pytest.raises(ApplicationError) as err:  # a's late vote finds no seat
        vote_cast(item_id=seat.item_id, annotator=a, label="same")
    assert err.value.code == "not_assigned"


def test_majority_decides_and_a_split_panel_goes_to_adjudication(reviewable_run, annotators, adjudicator):
    reviewable_run()
    items = list(WorkItem.objects.filter(stage="usability").order_by("id"))
    for a, label in zip(annotators[:3], ["usable", "usable", "unusable"]):
        vote_on(items[0], a, label)
    items[0].refresh_from_db()
    assert (items[0].state, items[0].decision) == ("decided", "usable")
    for a, label in zip(annotators[:3], ["usable", "unusable", "uncertain"]):
        vote_on(items[1], a, label)
    items[1].refresh_from_db()
    assert items[1].state == "adjudicate"
    with pytest.raises(ApplicationError, match="reason"):
        adjudication_cast(item_id=items[1].pk, adjudicator=adjudicator, label="usable", reason=" ")
    request = uuid.uuid4()
    vote = adjudication_cast(item_id=items[1].pk, adjudicator=adjudicator, label="usable", reason="clear person",
                             client_request_id=request)
    assert vote.is_adjudication and vote.comment == "clear person"
    retry = adjudication_cast(item_id=items[1].pk, adjudicator=adjudicator, label="usable", reason="clear person",
                              client_request_id=request)
    assert retry.pk == vote.pk  # a lost answer can be asked again
    items[1].refresh_from_db()
    assert (items[1].state, items[1].decision) == ("decided", "usable")
    with pytest.raises(ConflictError):
        adjudication_cast(item_id=items[0].pk, adjudicator=adjudicator, label="unusable", reason="disagree")


def test_an_unresolved_adjudication(reviewable_run, annotators, adjudicator):
    reviewable_run()
    item = WorkItem.objects.get(stage="identity")
    for a, label in zip(annotators[:3], ["same", "different", "uncertain"]):
        vote_on(item, a, label)
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="uncertain", reason="cannot tell")
    item.refresh_from_db()
    assert item.state == "unresolved" and item.decision == ""


def test_bad_votes_are_refused_and_change_nothing(reviewable_run, annotators, make_user):
    reviewable_run()
    a, b = annotators[:2]
    seat = work_item_claim_next(annotator=a, stage="usability")
    item_id = seat.item_id
    with pytest.raises(ApplicationError) as err:
        vote_cast(item_id=item_id, annotator=a, label="same")  # an identity label on a usability item
    assert err.value.code == "invalid_label"
    with pytest.raises(ApplicationError) as err:
        vote_cast(item_id=item_id, annotator=make_user("adjudicator"), label="usable")
    assert err.value.code == "not_an_annotator" and err.value.status_code == 403
    with pytest.raises(ApplicationError) as err:
        vote_cast(item_id=item_id, annotator=b, label="usable")  # b holds no seat on it
    assert err.value.code == "not_assigned"
    with pytest.raises(ApplicationError) as err:  # a usability vote declares no payload
        vote_cast(item_id=item_id, annotator=a, label="usable", payload={"natural": 9})
    assert err.value.code == "unexpected_fields" and err.value.extra["fields"] == ["natural"]
    request = uuid.uuid4()
    first, created = vote_cast(item_id=item_id, annotator=a, label="usable", client_request_id=request)
    again, created_again = vote_cast(item_id=item_id, annotator=a, label="usable", client_request_id=request)
    assert created and not created_again and again.pk == first.pk
    with pytest.raises(ConflictError) as err:
        vote_cast(item_id=item_id, annotator=a, label="unusable", client_request_id=request)
    assert err.value.code == "request_id_reused"
    with pytest.raises(ConflictError) as err:
        vote_cast(item_id=item_id, annotator=a, label="unusable")
    assert err.value.code == "already_voted"
    assert Vote.objects.filter(item_id=item_id).count() == 1
    with pytest.raises(ApplicationError, match="does not exist"):
        vote_cast(item_id=987654, annotator=a, label="usable")


def test_a_decided_item_takes_no_more_votes(reviewable_run, annotators):
    reviewable_run()
    item = WorkItem.objects.get(stage="identity")
    for a, label in zip(annotators[:3], ["same", "same", "different"]):
        vote_on(item, a, label)
    late = annotators[3]
    assert work_item_claim_next(annotator=late, stage="identity") is None
    Assignment.objects.create(item=item, annotator=late, seat=7, claimed_at=timezone.now(),
                              lease_expires_at=timezone.now() + timedelta(minutes=5))  # a seat by hand
    with pytest.raises(ConflictError) as err:
        vote_cast(item_id=item.pk, annotator=late, label="different")
    assert err.value.code == "item_closed"
    item.refresh_from_db()
    assert item.decision == "same" and item.votes.count() == 3


def test_database_guarantees_hold_without_the_services(reviewable_run, annotators):
    reviewable_run()
    item = WorkItem.objects.get(stage="identity")
    a, b = annotators[:2]
    vote = Vote.objects.create(item=item, annotator=a, label="same")
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(item=item, annotator=a, label="different")          # a second vote
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(item=item, annotator=b, label="maybe")              # an unknown label
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(item=item, annotator=b, label="same", is_adjudication=True)  # no reason
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.filter(pk=vote.pk).update(label="different")               # an edit
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.filter(pk=vote.pk).delete()                                # a deletion
    now = timezone.now()
    Assignment.objects.create(item=item, annotator=a, seat=0, claimed_at=now, lease_expires_at=now)
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(item=item, annotator=b, seat=0, claimed_at=now, lease_expires_at=now)  # seat taken
    with pytest.raises(IntegrityError), transaction.atomic():
        Assignment.objects.create(item=item, annotator=a, seat=1, claimed_at=now, lease_expires_at=now)  # twice
    assert Vote.objects.get(pk=vote.pk).label == "same"


def test_review_opens_with_the_run_unless_the_policy_says_not_to():
    from tests.trajectories.factories import proposal, run_factory
    from trajectories.services.proposals import trajectories_store

    run = run_factory()
    trajectories_store(run=run, proposals=[proposal(1, 0, 10), proposal(2, 0, 10, x=11)])
    assert WorkItem.objects.filter(trajectory__run=run).count() == 2
    assert WorkItem.objects.filter(stage="identity").count() == 1
    ReviewPolicy.objects.update(open_review_automatically=False)
    quiet = run_factory()
    trajectories_store(run=quiet, proposals=[proposal(1, 0, 10)])
    assert not WorkItem.objects.filter(trajectory__run=quiet).exists()


def test_a_held_seat_is_returned_only_for_its_stage(reviewable_run, annotators):
    reviewable_run()
    a = annotators[0]
    usability_seat = work_item_claim_next(annotator=a, stage="usability")
    identity_seat = work_item_claim_next(annotator=a, stage="identity")
    assert identity_seat.item.stage == "identity" and identity_seat.pk != usability_seat.pk
    assert work_item_claim_next(annotator=a, stage="usability").pk == usability_seat.pk


def test_a_claim_finds_the_free_item_behind_a_queue_whose_head_is_full(reviewable_run, annotators):
    reviewable_run()
    reviewable_run()
    items = list(WorkItem.objects.filter(stage="usability").order_by("video_id", "id"))
    now = timezone.now()
    for item in items[:-1]:  # every usability item but the last has a full panel of others
        for seat, user in enumerate(annotators[1:4]):
            Assignment.objects.create(item=item, annotator=user, seat=seat, claimed_at=now,
                                      lease_expires_at=now + timedelta(minutes=10))
    seat = work_item_claim_next(annotator=annotators[0], stage="usability")
    assert seat is not None and seat.item_id == items[-1].pk
    vote_cast(item_id=seat.item_id, annotator=annotators[0], label="usable")
    assert work_item_claim_next(annotator=annotators[0], stage="usability") is None
