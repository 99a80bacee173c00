"""A manager's hand on panel seats: release a seat (its holder is away) or give it to another
annotator. Every change is recorded as a ``SeatEvent`` with who did it and why."""
from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from annotation.curation.services.claims import MAX_REASON
from annotation.curation.services.items import review_policy_get
from annotation.models import Assignment, SeatEvent, WorkItem
from common.errors import ApplicationError, ConflictError, NotFoundError
from common.roles import Role, user_has_role, user_holds_role


def _open_seat(item_id: int, seat: int, manager, reason: str) -> tuple[WorkItem, Assignment, str]:
    """The locked item and its unvoted seat ``seat``, after the checks both actions share."""
    if not user_has_role(manager, Role.MANAGER):
        raise ApplicationError("only managers release or reassign seats", code="permission_denied", status_code=403)
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON:
        raise ApplicationError(f"a reason has at most {MAX_REASON} characters", code="invalid_reason")
    item = WorkItem.objects.select_for_update().filter(pk=item_id).first()
    if item is None:
        raise NotFoundError(f"work item {item_id} does not exist", code="not_found")
    held = Assignment.objects.select_for_update().filter(item=item, seat=seat).first() if 0 <= seat < 2**15 else None
    if held is None:
        raise NotFoundError(f"seat {seat} of item {item_id} is free", code="seat_free")
    if held.completed_at is not None:
        raise ConflictError("this seat has its vote; a voted seat is part of the item's record", code="already_voted")
    if item.state != WorkItem.State.OPEN:
        raise ConflictError(f"this item is {item.state}; its seats are kept with its record", code="item_closed")
    return item, held, reason


def seat_release(*, item_id: int, seat: int, manager, reason: str = "") -> SeatEvent:
    """Free an unvoted seat of an open item, whoever holds it and however long its lease still
    runs; the next claim may take it. Refused: not a manager (403), no such item or an empty
    seat (404), a voted seat or a closed item (409). Locks the item row and the seat, so a vote
    cannot land on the seat while it is freed (it is refused as "not assigned" after)."""
    with transaction.atomic():
        item, held, reason = _open_seat(item_id, seat, manager, reason)
        event = SeatEvent.objects.create(item=item, seat=held.seat, kind=SeatEvent.Kind.RELEASED,
                                         holder_id=held.annotator_id, held_since=held.claimed_at, by=manager,
                                         reason=reason)
        held.delete()
        return event


def seat_reassign(*, item_id: int, seat: int, manager, to, reason: str = "") -> SeatEvent:
    """Give an unvoted seat of an open item to annotator ``to`` under a fresh lease; it is their
    current item when they next ask for work. Refused as ``seat_release`` is, and when ``to`` is
    an inactive account or not one given the annotator role (400: a superuser's implied roles do
    not seat them on a panel) or already holds a seat on the item, voted or under lease (409). A
    lapsed, unvoted seat of ``to`` on the item is taken back first (recorded as expired). Locks
    the item row and the seat."""
    user_model = get_user_model()
    if not isinstance(to, user_model):
        to = user_model.objects.filter(username=to).first() if isinstance(to, str) else None
    if to is None or not user_holds_role(to, Role.ANNOTATOR):
        raise ApplicationError("a seat goes to an active account given the annotator role", code="not_an_annotator")
    with transaction.atomic():
        item, held, reason = _open_seat(item_id, seat, manager, reason)
        if held.annotator_id == to.pk:
            raise ConflictError(f"{to.username} holds this seat already", code="same_holder")
        now = timezone.now()
        theirs = Assignment.objects.select_for_update().filter(item=item, annotator=to).first()
        if theirs is not None:
            if theirs.completed_at is not None or theirs.lease_expires_at > now:
                raise ConflictError(f"{to.username} sits on this item already", code="already_seated")
            SeatEvent.objects.create(item=item, seat=theirs.seat, kind=SeatEvent.Kind.EXPIRED, holder=to,
                                     held_since=theirs.claimed_at)
            theirs.delete()
        event = SeatEvent.objects.create(item=item, seat=held.seat, kind=SeatEvent.Kind.REASSIGNED,
                                         holder_id=held.annotator_id, held_since=held.claimed_at, by=manager, to=to,
                                         reason=reason)
        held.annotator = to
        held.claimed_at = now
        held.lease_expires_at = now + timedelta(seconds=review_policy_get().lease_seconds)
        held.save(update_fields=["annotator", "claimed_at", "lease_expires_at"])
        return event
