"""Claiming work: the next item for an annotator, under a lease, on a panel of distinct people."""
from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.roles import Role, user_has_role
from annotation.curation.selectors import (
    active_assignment,
    not_claimable_by,
    seat_taken,
)
from annotation.curation.services.items import review_policy_get
from annotation.models import Assignment, SeatEvent, WorkItem
from common.errors import ApplicationError

CANDIDATES_PER_TRY = 20  # candidate items tried per pass
SCAN_PAGE = 200          # open items read per query while looking for free seats
SCAN_LIMIT = 20_000      # open items looked at per claim before reporting no work
MAX_REASON = 200         # characters of a skip's reason


def _last_video_id(annotator) -> int | None:
    return (Assignment.objects.filter(annotator=annotator).order_by("-claimed_at")
            .values_list("item__video_id", flat=True).first())


def work_item_claim_next(*, annotator, stage: str | None = None) -> Assignment | None:
    """Claim a seat on the next open item for ``annotator``; ``None`` when there is no work.

    Items of the video the annotator worked on last come first (they keep their context), then
    items in video order. An annotator never gets an item they voted on, nor one they skipped in
    the last ``SKIP_COOLDOWN`` (it does not come straight back); a seat whose lease lapsed
    without a vote is free again for anyone, the person who let it lapse included, and its
    taking back is recorded (``SeatEvent``). Seats are numbered: the unique
    (item, seat) constraint holds the panel size even when claims race, and a losing claim tries
    the next candidate. On PostgreSQL the candidate rows are read with ``FOR UPDATE SKIP LOCKED``
    so concurrent annotators do not queue behind each other; on SQLite, which serialises writes,
    the constraint alone decides. The claimed seat carries ``upcoming``: the id of the item the
    annotator would likely get next (for the client to fetch ahead; it is not reserved).
    """
    if not user_has_role(annotator, Role.ANNOTATOR):
        raise ApplicationError("only annotators claim review work", code="not_an_annotator", status_code=403)
    if stage is not None and stage not in WorkItem.Stage.values:
        raise ApplicationError(f"unknown stage {stage!r}; use {WorkItem.Stage.values}", code="invalid_stage")
    with transaction.atomic():
        # One claim per annotator at a time: the annotator's user row is locked, so a second,
        # simultaneous claim waits here and then finds the seat the first one took.
        get_user_model().objects.select_for_update().filter(pk=annotator.pk).exists()
        current = active_assignment(annotator=annotator, stage=stage)
        if current is not None:
            return current
        policy = review_policy_get()
        # First pass: skip items another claim is holding (annotators spread over the queue).
        # Second pass: wait for those rows, so the last free seats are not reported as "no work".
        for skip_locked in (True, False):
            candidates = _free_candidates(annotator, stage)
            for item_id in candidates:
                claimed = _try_claim(item_id, annotator, policy.lease_seconds, skip_locked=skip_locked)
                if claimed is not None:
                    claimed.upcoming = next(candidates, None)
                    return claimed
        return None


def _free_candidates(annotator, stage: str | None) -> Iterator[int]:
    """Open items with a free seat that the annotator may claim (``not_claimable_by``), best
    first, up to ``CANDIDATES_PER_TRY`` of them, yielded as they are found.

    Reads the queue in pages (the annotator's last video first, then video order), each page
    with its items' taken seats in the same query, so a claim costs the same with ten open items
    or a million; and lazily, so a claim that takes the first candidate reads no further.
    """
    now = timezone.now()
    taken = Subquery(Assignment.objects.filter(seat_taken(now), item=OuterRef("pk")).order_by()
                     .values("item").annotate(n=Count("id")).values("n"))
    queue = (WorkItem.objects.filter(state=WorkItem.State.OPEN).exclude(not_claimable_by(annotator, now))
             .annotate(taken=Coalesce(taken, 0)))
    if stage:
        queue = queue.filter(stage=stage)
    last_video = _last_video_id(annotator)
    parts = [queue.filter(video_id=last_video).order_by("id")] if last_video is not None else []
    parts.append(queue.order_by("video_id", "id"))
    found = 0
    seen: set[int] = set()
    for part in parts:
        for start in range(0, SCAN_LIMIT, SCAN_PAGE):
            rows = list(part.values_list("pk", "panel_size", "taken")[start:start + SCAN_PAGE])
            for pk, panel_size, n_taken in rows:
                if pk in seen:  # the last video's items come twice
                    continue
                seen.add(pk)
                if n_taken < panel_size:
                    yield pk
                    found += 1
                    if found >= CANDIDATES_PER_TRY:
                        return
            if len(rows) < SCAN_PAGE:
                break


def _try_claim(item_id: int, annotator, lease_seconds: int, *, skip_locked: bool) -> Assignment | None:
    now = timezone.now()
    try:
        with transaction.atomic():
            rows = WorkItem.objects.filter(pk=item_id, state=WorkItem.State.OPEN)
            if connection.features.has_select_for_update_skip_locked:
                rows = rows.select_for_update(skip_locked=skip_locked)
            item = rows.first()
            if item is None:
                return None  # decided meanwhile, or another claim holds its row
            seats = list(Assignment.objects.filter(item=item))
            # An expired seat without a vote goes back to the pool (its holder may take it again).
            stale = [a for a in seats if a.completed_at is None and a.lease_expires_at <= now]
            if any(a.annotator_id == annotator.pk for a in seats if a not in stale):
                return None
            if stale:
                SeatEvent.objects.bulk_create([SeatEvent(item=item, seat=a.seat, kind=SeatEvent.Kind.EXPIRED,
                                                         holder_id=a.annotator_id, held_since=a.claimed_at)
                                               for a in stale])
                Assignment.objects.filter(pk__in=[a.pk for a in stale]).delete()
            taken = {a.seat for a in seats if a not in stale}
            free = [s for s in range(item.panel_size) if s not in taken]
            if not free:
                return None
            return Assignment.objects.create(item=item, annotator=annotator, seat=free[0], claimed_at=now,
                                             lease_expires_at=now + timedelta(seconds=lease_seconds))
    except IntegrityError:
        return None  # a concurrent claim took this seat (or this annotator claimed it twice)


def assignment_release(*, assignment: Assignment, reason: str = "") -> None:
    """Give an unvoted seat on an open item back (the annotator skips the item, ``reason`` says
    why; recorded as a ``SeatEvent``, and the item is not offered to them again for
    ``SKIP_COOLDOWN``). A voted seat, and any seat of a closed item, stays: it is part of the
    item's record (409).

    Locks the item row, so a decision cannot close the item between the check and the delete."""
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON:
        raise ApplicationError(f"a reason has at most {MAX_REASON} characters", code="invalid_reason")
    with transaction.atomic():
        item = WorkItem.objects.select_for_update().get(pk=assignment.item_id)
        seat = Assignment.objects.filter(pk=assignment.pk).first()
        if seat is None:
            return  # given back already (a retried request)
        if seat.completed_at is not None:
            raise ApplicationError("this item has your vote already; a vote cannot be withdrawn",
                                   code="already_voted", status_code=409)
        if item.state != WorkItem.State.OPEN:
            raise ApplicationError(f"this item is {item.state}; its seats are kept with its record",
                                   code="item_closed", status_code=409)
        SeatEvent.objects.create(item=item, seat=seat.seat, kind=SeatEvent.Kind.SKIPPED, holder_id=seat.annotator_id,
                                 held_since=seat.claimed_at, reason=reason)
        seat.delete()
