"""The panel vote's write in one statement (PostgreSQL: the vote, its seat completed and the
item's labels for the rule, ``annotation.curation.services.votes._cast_sql``) against the ORM's
writes one by one (the path other databases take), on random panels: the same answers, the same
refusals, the same votes, seats and decisions."""
from __future__ import annotations

import random
import uuid
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection, transaction
from django.utils import timezone

from annotation.curation.services import votes
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.models import Assignment, Vote, WorkItem
from common.errors import ApplicationError

pytestmark = [pytest.mark.django_db,
              pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement write is PostgreSQL's")]

LABELS = {"usability": ["usable", "unusable", "uncertain"], "identity": ["same", "different", "uncertain"]}


def _outcome(call) -> tuple:
    try:
        vote, created = call()
    except ApplicationError as error:
        return "refused", error.code, error.status_code
    return "cast", created, vote.label, vote.item_id, vote.reasons, vote.time_spent_ms


def _play(seed: int, items: list[WorkItem], people, adjudicator) -> list:
    """A random session on ``items``: seats given and not, votes, retries with the same request id,
    request ids reused for another vote, second votes, adjudications; what each call answered and
    what the database holds at the end (ids left out: each run draws its own)."""
    rng = random.Random(seed)
    seen: list = []
    used: list[tuple] = []           # (annotator, request id, item, label) of earlier calls
    for item in items:
        panel = rng.randint(1, 4)
        WorkItem.objects.filter(pk=item.pk).update(panel_size=panel, required_votes=rng.randint(1, panel))
    for _ in range(60):
        item = WorkItem.objects.get(pk=rng.choice(items).pk)
        person = rng.choice(people)
        if item.state == WorkItem.State.ADJUDICATE and rng.random() < 0.5:
            label = rng.choice(LABELS[item.stage][:2])
            try:
                seen.append(("adjudicated", adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label=label,
                                                             reason="seen it").label))
            except ApplicationError as error:
                seen.append(("adjudication refused", error.code))
            continue
        seats = Assignment.objects.filter(item=item)
        if rng.random() < 0.85 and not seats.filter(annotator=person).exists() and seats.count() < item.panel_size:
            Assignment.objects.create(item=item, annotator=person, seat=seats.count(), claimed_at=timezone.now(),
                                      lease_expires_at=timezone.now() + timedelta(minutes=10))
        label = rng.choice(LABELS[item.stage])
        request_id = uuid.UUID(int=rng.getrandbits(128), version=4) if rng.random() < 0.9 else None
        mine = [u for u in used if u[0] == person.pk]
        if mine and rng.random() < 0.25:
            _, request_id, earlier_item, earlier_label = rng.choice(mine)
            if rng.random() < 0.6:
                item, label = WorkItem.objects.get(pk=earlier_item), earlier_label   # a retry of that call
        used.append((person.pk, request_id, item.pk, label))
        seen.append(_outcome(partial(vote_cast, item_id=item.pk, annotator=person, label=label, reasons=["looked twice"],
                                     time_spent_ms=rng.randint(0, 9000), client_request_id=request_id)))
    seen.append(sorted((i.pk, i.state, i.decision, i.decided_at is not None)
                       for i in WorkItem.objects.filter(pk__in=[i.pk for i in items])))
    seen.append(list(Vote.objects.filter(item__in=items).order_by("item_id", "created_at", "id")
                     .values_list("item_id", "annotator_id", "label", "is_adjudication", "client_request_id")))
    seen.append(sorted((item_id, annotator_id, seat, completed is None) for item_id, annotator_id, seat, completed
                       in Assignment.objects.filter(item__in=items).values_list("item_id", "annotator_id", "seat",
                                                                                "completed_at")))
    return seen


def _rolled_back(play):
    with transaction.atomic():
        seen = play()
        transaction.set_rollback(True)
    return seen


@pytest.mark.parametrize("seed", range(6))
def test_the_one_statement_write_answers_and_stores_what_the_orm_writes_do(seed, reviewable_run, annotators,
                                                                           adjudicator, monkeypatch):
    reviewable_run()
    items = list(WorkItem.objects.order_by("id"))          # four usability items and one identity pair
    one_statement = _rolled_back(lambda: _play(seed, items, annotators, adjudicator))
    monkeypatch.setattr(votes, "_writes_in_one_statement", lambda: False)
    one_by_one = _rolled_back(lambda: _play(seed, items, annotators, adjudicator))
    assert one_statement == one_by_one
    codes = {s[1] for s in one_statement if s[0] == "refused"}
    assert {"not_assigned", "already_voted"} <= codes, codes    # the session reaches the refusals


@pytest.mark.parametrize("in_one_statement", [True, False])
def test_a_seat_that_changed_hands_under_the_lock_refuses_the_vote_and_keeps_nothing(in_one_statement, reviewable_run,
                                                                                    annotators, monkeypatch):
    reviewable_run()
    item = WorkItem.objects.filter(stage="usability").first()
    now = timezone.now()
    mine = Assignment.objects.create(item=item, annotator=annotators[0], seat=0, claimed_at=now,
                                     lease_expires_at=now + timedelta(minutes=10))
    theirs = Assignment.objects.create(item=item, annotator=annotators[1], seat=1, claimed_at=now,
                                       lease_expires_at=now + timedelta(minutes=10))
    read = votes._seated_item

    def read_then_reassigned(*args, **kwargs):
        found = read(*args, **kwargs)
        found.seat_pk = theirs.pk      # as if a manager gave the seat away while this request waited
        return found

    monkeypatch.setattr(votes, "_seated_item", read_then_reassigned)
    monkeypatch.setattr(votes, "_writes_in_one_statement", lambda: in_one_statement)
    with pytest.raises(ApplicationError) as refused:
        vote_cast(item_id=item.pk, annotator=annotators[0], label="usable")
    assert (refused.value.code, refused.value.status_code) == ("not_assigned", 403)
    assert not Vote.objects.exists()
    assert set(Assignment.objects.values_list("pk", "completed_at")) == {(mine.pk, None), (theirs.pk, None)}
