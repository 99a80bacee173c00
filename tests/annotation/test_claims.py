"""Claims and seats (issue 16, item 9): a closed item keeps its seats, and simultaneous claims by
one annotator give that annotator the one seat they hold."""
from __future__ import annotations

import random
import threading
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from annotation.curation.selectors import (
    SKIP_COOLDOWN,
    active_assignment,
    claimable_items,
    upcoming_of,
)
from annotation.curation.services import claims
from annotation.curation.services.claims import work_item_claim_next
from annotation.curation.services.votes import vote_cast
from annotation.models import Assignment, SeatEvent, Vote, WorkItem
from tests.annotation.test_concurrency import run_threads
from tests.triggers import triggers_set_aside


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


# -- one round trip: a vote answers with the next item ---------------------------------------------
# The most queries a claim, a vote and a vote with the next item may make in one request on any
# database, the savepoints of their transactions included (SQLite's: 6, 6 and 12; a claim that
# prefers its upcoming item reads the item after it in one more, 7 and 13). PostgreSQL's own, fewer,
# are pinned in test_review_query_counts.py. They grow with nothing: not with the number of open
# items, seats or votes.
CLAIM_QUERIES = 7
VOTE_QUERIES = 6
VOTE_AND_NEXT_QUERIES = 12
PREFERRED = 1  # the upcoming item after the preferred one, read apart where its read does not carry it


def _count(client, path, body):
    with CaptureQueriesContext(connection) as ctx:
        response = client.post(path, body, format="json")
    return response, len(ctx.captured_queries)


@pytest.mark.django_db
def test_a_vote_answers_with_the_next_item_when_asked(reviewable_run, annotators, client_for):
    reviewable_run()
    reviewable_run()  # two videos: more open items than one page of candidates needs
    api = client_for(annotators[0])
    first, claim_queries = _count(api, "/api/review/next/", {"stage": "usability"})
    assert first.status_code == 200 and claim_queries <= CLAIM_QUERIES, claim_queries
    item = first.json()["item"]
    assert first.json()["upcoming"]["stage"] == "usability"
    # a plain vote (scripts): no "next" in the answer
    response, vote_queries = _count(api, f"/api/review/items/{item}/votes/", {"label": "usable"})
    assert response.status_code == 201 and "next" not in response.json()
    assert vote_queries <= VOTE_QUERIES, vote_queries
    # a vote with the next item: one request, and the claim it made holds
    second = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    upcoming = second["upcoming"]["item"]
    response, both = _count(api, f"/api/review/items/{second['item']}/votes/",
                            {"label": "unusable", "next": True, "client_request_id": "9d3c9d9e-7d0e-4b61-8a55-7e0c"
                                                                                    "8d1f2a11"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["label"] == "unusable" and body["next"]["stage"] == "usability"
    assert body["next"]["item"] == upcoming  # the hint named the item that came next
    assert Assignment.objects.get(annotator=annotators[0], item_id=body["next"]["item"]).completed_at is None
    assert both <= VOTE_AND_NEXT_QUERIES, both
    # a retry of the same request answers the same vote and the seat it holds, nothing new
    again = api.post(f"/api/review/items/{second['item']}/votes/",
                     {"label": "unusable", "next": True, "client_request_id": "9d3c9d9e-7d0e-4b61-8a55-7e0c8d1f2a11"},
                     format="json")
    assert again.status_code == 200 and again.json()["next"]["item"] == body["next"]["item"]
    assert Vote.objects.filter(annotator=annotators[0]).count() == 2


@pytest.mark.django_db
def test_claim_and_vote_queries_do_not_grow_with_the_queue(reviewable_run, annotators, client_for):
    reviewable_run()
    reviewable_run()
    api = client_for(annotators[1])
    seat = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    _, small = _count(api, f"/api/review/items/{seat['item']}/votes/", {"label": "usable", "next": True})
    for _ in range(5):
        reviewable_run()
    api2 = client_for(annotators[2])
    api2.post("/api/review/next/", {"stage": "usability"}, format="json")
    seat = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    _, large = _count(api, f"/api/review/items/{seat['item']}/votes/", {"label": "usable", "next": True})
    assert large == small, (small, large)


@pytest.mark.django_db
def test_skip_from_the_api_takes_a_reason_and_answers_the_next_item(reviewable_run, annotators, client_for):
    reviewable_run()
    api = client_for(annotators[0])
    item = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()["item"]
    response = api.post(f"/api/review/items/{item}/skip/", {"reason": "too dark to tell"}, format="json")
    assert response.status_code == 200, response.content
    following = response.json()["next"]
    assert following is not None and following["item"] != item
    assert SeatEvent.objects.get(item_id=item).reason == "too dark to tell"
    assert api.post(f"/api/review/items/{item}/skip/", {}, format="json").status_code == 404  # not theirs now


# -- the claim query is the claim rule ----------------------------------------------------------------
@pytest.mark.django_db
def test_the_claim_query_finds_what_the_claim_rule_allows_in_queue_order(reviewable_run, annotators):
    """``claims._next_candidates`` (SQL, for speed) against ``selectors.claimable_items`` (the
    rule as ORM reads) over seeded random seats: taken, lapsed, voted-on, skipped recently and
    long ago, for every annotator and stage, with and without a last video and a tried list."""
    for _ in range(3):
        reviewable_run()
    rng = random.Random(5)
    now = timezone.now()
    items = list(WorkItem.objects.order_by("id"))
    for item in items:
        people = rng.sample(annotators, rng.randint(0, item.panel_size))
        for seat, user in enumerate(people):
            kind = rng.choice(["running", "lapsed", "voted"])
            Assignment.objects.create(
                item=item, annotator=user, seat=seat, claimed_at=now - timedelta(hours=1),
                lease_expires_at=now + (timedelta(minutes=5) if kind == "running" else -timedelta(minutes=1)),
                completed_at=now if kind == "voted" else None)
        for user in rng.sample(annotators, rng.randint(0, 2)):
            kind = rng.choice(list(SeatEvent.Kind))
            actors = {"by": user, "to": user} if kind == "reassigned" else {"by": user} if kind == "released" else {}
            event = SeatEvent.objects.create(item=item, seat=0, kind=kind, holder=user,
                                             held_since=now - timedelta(hours=2), **actors)
            ago = rng.choice([timedelta(minutes=1), SKIP_COOLDOWN + timedelta(minutes=1)])
            with triggers_set_aside("annotation_seatevent"):  # seat events are immutable
                SeatEvent.objects.filter(pk=event.pk).update(at=now - ago)
    WorkItem.objects.filter(pk__in=[i.pk for i in items[::7]]).update(state=WorkItem.State.ADJUDICATE)
    videos = sorted({i.video_id for i in items})
    checked = afters = 0
    for user in annotators:
        for stage in (None, "usability", "identity"):
            expected = list(claimable_items(annotator=user, stage=stage).order_by("video_id", "id")
                            .values_list("pk", "video_id"))
            for last_video in (None, videos[1]):
                tried = [pk for pk, _ in expected[:1]]
                ordered = ([pk for pk, v in expected if v == last_video]
                           + [pk for pk, v in expected if v != last_video]) if last_video else [pk for pk, _ in expected]
                got = claims._next_candidates(user, stage, last_video, tried, skip_locked=True)
                assert [i.pk for i in got] == [pk for pk in ordered if pk not in tried][:2], (user, stage, last_video)
                one = claims._next_candidates(user, stage, last_video, tried, skip_locked=True, lock=False, want=1)
                assert [i.pk for i in one] == [i.pk for i in got][:1], (user, stage, last_video)
                checked += bool(got)
            # the preferred item's read carries the item after it: what the claim query reads next
            for pk, video in dict.fromkeys([*expected[:3], *expected[-2:]]):   # a video's first, the queue's last
                preferred = claims._preferred_candidate(user, stage, pk)
                after = claims._next_candidates(user, stage, video, [pk], skip_locked=True, lock=False, want=1)
                assert preferred.pk == pk and hasattr(preferred, "after") == (connection.vendor == "postgresql")
                assert claims._upcoming_after(user, stage, preferred) == (upcoming_of(after[0]) if after else None), \
                    (user, stage, pk)
                afters += bool(after)
    assert checked > 10  # the random seats left work to find for most annotators
    assert afters > 10   # and the queue's last item has none after it


class _Undo(Exception):
    pass


def _seat_number_taken_by(take) -> int | None:
    """The seat number ``take()`` claims, with everything it wrote rolled back."""
    taken = []
    try:
        with transaction.atomic():
            seat = take()
            taken.append(None if seat is None else seat.seat)
            raise _Undo
    except _Undo:
        pass
    return taken[0]


@pytest.mark.django_db
def test_the_one_statement_seat_and_active_seat_agree_with_the_full_reads(reviewable_run, annotators):
    """``claims._take_free_seat`` (one conditional insert) against ``claims._take_seat`` (read the
    seats, then write), and ``claims._active_seat`` against ``selectors.active_assignment``, over
    seeded random panels with gaps in the seat numbers (a skip or a release leaves one), running,
    lapsed and voted seats: the insert takes the same seat or leaves the item to the full path,
    which it must whenever a lapsed seat is to be given back."""
    for _ in range(3):
        reviewable_run()
    rng = random.Random(8)
    now = timezone.now()
    items = list(WorkItem.objects.order_by("id"))
    for item in items:
        numbers = rng.sample(range(item.panel_size), rng.randint(0, item.panel_size))
        for number, user in zip(numbers, rng.sample(annotators, len(numbers))):
            kind = rng.choice(["running", "lapsed", "voted"])
            Assignment.objects.create(
                item=item, annotator=user, seat=number, claimed_at=now - timedelta(hours=1),
                lease_expires_at=now + (timedelta(minutes=5) if kind == "running" else -timedelta(minutes=1)),
                completed_at=now if kind == "voted" else None)
    fast_paths = 0
    for item in items:
        seats = list(Assignment.objects.filter(item=item))
        lapsed = any(a.completed_at is None and a.lease_expires_at <= timezone.now() for a in seats)
        for user in annotators:
            fast = _seat_number_taken_by(lambda item=item, user=user: claims._take_free_seat(item, user, 60))
            full = _seat_number_taken_by(lambda item=item, user=user: claims._take_seat(item, user, 60))
            if fast is not None:
                assert fast == full and not lapsed, (item.pk, user.username, fast, full)
                fast_paths += 1
            else:
                assert full is None or lapsed, (item.pk, user.username, full)
    assert fast_paths > 10
    for user in annotators:
        for stage in (None, "usability", "identity"):
            expected = active_assignment(annotator=user, stage=stage)
            got = claims._active_seat(user, stage)
            assert (got and got.pk) == (expected and expected.pk), (user.username, stage)


# -- prefer: the upcoming item the client fetched ahead ------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_preferred_upcoming_item_is_claimed_even_while_another_claim_holds_it(reviewable_run, annotators,
                                                                                client_for):
    """A claim passes over items other claims hold (SKIP LOCKED); the item a client was told comes
    next, and fetched ahead, is waited for instead, so the client gets what it loaded."""
    if not connection.features.has_select_for_update_skip_locked:
        pytest.skip("row locks: SQLite serialises whole transactions instead")
    reviewable_run()
    reviewable_run()
    api = client_for(annotators[0])
    first = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    upcoming = first["upcoming"]
    holding = threading.Event()
    hold_s = 0.5

    def hold_the_upcoming_item():  # another request, mid-transaction on that row for a moment
        with transaction.atomic():
            WorkItem.objects.select_for_update().get(pk=upcoming["item"])
            holding.set()
            time.sleep(hold_s)

    def vote(body):
        holding.wait(timeout=10)
        started = time.monotonic()
        answers.append((api.post(f"/api/review/items/{first['item']}/votes/", body, format="json"),
                        time.monotonic() - started))

    answers = []
    run_threads(lambda job: job(), [(hold_the_upcoming_item,),
                                    (lambda: vote({"label": "usable", "next": True, "prefer": upcoming["token"]}),)])
    ((answer, waited),) = answers
    assert answer.status_code == 201, answer.content
    assert answer.json()["next"]["item"] == upcoming["item"]
    assert waited >= hold_s * 0.8, waited  # it waited for the row instead of passing it over
    # without prefer, a claim made while the row is held passes over it at once
    first = answer.json()["next"]
    upcoming = first["upcoming"]
    holding.clear()
    answers.clear()
    run_threads(lambda job: job(), [(hold_the_upcoming_item,), (lambda: vote({"label": "usable", "next": True}),)])
    ((answer, waited),) = answers
    assert answer.status_code == 201 and answer.json()["next"]["item"] != upcoming["item"]
    assert waited < hold_s, waited


@pytest.mark.django_db
def test_prefer_names_only_an_item_this_server_proposed_to_this_annotator(reviewable_run, annotators, client_for):
    reviewable_run()
    reviewable_run()
    mine, theirs = client_for(annotators[0]), client_for(annotators[1])
    seat = mine.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    other = theirs.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    forged = f"{other['item'] + 3}:{other['upcoming']['token'].split(':', 1)[1]}"
    for token in ("not-a-token", other["upcoming"]["token"], forged):
        response = mine.post(f"/api/review/items/{seat['item']}/votes/",
                             {"label": "usable", "next": True, "prefer": token}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "invalid_prefer", response.content
        assert not Vote.objects.filter(annotator=annotators[0]).exists()  # nothing half-written
        response = mine.post("/api/review/next/", {"stage": "usability", "prefer": token}, format="json")
        assert response.status_code == 400 and response.json()["code"] == "invalid_prefer", response.content
    # an old hint is no preference any more: the claim goes on in queue order, nothing refused
    with mock.patch.object(claims, "UPCOMING_TOKEN_MAX_AGE_S", -1):
        stale = mine.post("/api/review/next/", {"stage": "usability", "prefer": seat["upcoming"]["token"]},
                          format="json")
    assert stale.status_code == 200 and stale.json()["item"] == seat["item"]  # the seat it holds
    # a true token: claimed first, in the query budget, by a vote with next and by a claim
    response, both = _count(mine, f"/api/review/items/{seat['item']}/votes/",
                            {"label": "usable", "next": True, "prefer": seat["upcoming"]["token"]})
    assert response.status_code == 201 and response.json()["next"]["item"] == seat["upcoming"]["item"]
    assert both <= VOTE_AND_NEXT_QUERIES + PREFERRED, both
    seat = response.json()["next"]
    assert mine.post(f"/api/review/items/{seat['item']}/votes/", {"label": "usable"}, format="json").status_code == 201
    response, claim = _count(mine, "/api/review/next/", {"stage": "usability", "prefer": seat["upcoming"]["token"]})
    assert response.status_code == 200 and response.json()["item"] == seat["upcoming"]["item"]
    assert claim <= CLAIM_QUERIES + PREFERRED, claim


@pytest.mark.django_db
def test_a_preferred_item_no_longer_claimable_leaves_the_claim_in_queue_order(reviewable_run, annotators,
                                                                              client_for):
    reviewable_run()
    reviewable_run()
    api = client_for(annotators[0])
    seat = api.post("/api/review/next/", {"stage": "usability"}, format="json").json()
    upcoming = seat["upcoming"]["item"]
    now = timezone.now()
    for number, other in enumerate(annotators[1:4]):  # three others fill the upcoming item's panel
        Assignment.objects.create(item_id=upcoming, annotator=other, seat=number, claimed_at=now,
                                  lease_expires_at=now + timedelta(minutes=30))
    expected = claimable_items(annotator=annotators[0], stage="usability").order_by("video_id", "id").first()
    response = api.post(f"/api/review/items/{seat['item']}/votes/",
                        {"label": "usable", "next": True, "prefer": seat["upcoming"]["token"]}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["next"]["item"] == expected.pk != upcoming
    assert not Assignment.objects.filter(item_id=upcoming, annotator=annotators[0]).exists()
