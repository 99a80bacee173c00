"""Claiming work: the next item for an annotator, under a lease, on a panel of distinct people."""
from __future__ import annotations

import functools
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.curation import selectors
from annotation.curation.selectors import upcoming_of
from annotation.curation.services.items import review_policy_get
from annotation.models import Assignment, ReviewPolicy, SeatEvent, WorkItem
from common.errors import ApplicationError
from common.roles import Role, user_has_role
from common.sql import columns, model_rows, prepared_cursor

CANDIDATES_PER_TRY = 20  # candidate items tried per pass before reporting no work
UPCOMING_TOKEN_MAX_AGE_S = 2 * 3600  # an older upcoming hint is no preference any more
MAX_REASON = 200         # characters of a skip's reason


def upcoming_token(*, annotator, item_id: int) -> str:
    """The token a client sends back as ``prefer`` to get the item it was told comes next (and
    fetched ahead): signed and timed for this annotator, so it names only an item this server
    proposed to them lately, never one of their choosing."""
    return _upcoming_signer(annotator).sign(str(item_id))


def upcoming_token_item(*, annotator, token: str) -> int | None:
    """The item an ``upcoming_token`` names; ``None`` once it is older than
    ``UPCOMING_TOKEN_MAX_AGE_S`` (no preference: queue order); 400 for a token this server did not
    give ``annotator``."""
    try:
        return int(_upcoming_signer(annotator).unsign(token, max_age=UPCOMING_TOKEN_MAX_AGE_S))
    except signing.SignatureExpired:
        return None
    except (signing.BadSignature, ValueError):
        raise ApplicationError("prefer is not an upcoming token this server gave you; leave it out to claim in "
                               "queue order", code="invalid_prefer") from None


def _upcoming_signer(annotator) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"annotation.curation.upcoming.{annotator.pk}")


def work_item_claim_next(*, annotator, stage: str | None = None, last_video_id: int | None = None,
                         prefer: int | None = None) -> Assignment | None:
    """Claim a seat on the next open item for ``annotator``; ``None`` when there is no work.

    Items of the video the annotator worked on last come first (they keep their context; a
    caller that knows that video, such as a vote answering with the next item, passes
    ``last_video_id``), then items in video order. An annotator never gets an item they voted
    on, nor one they skipped in the last ``SKIP_COOLDOWN`` (it does not come straight back); a
    seat whose lease lapsed without a vote is free again for anyone, the person who let it lapse
    included, and its taking back is recorded (``SeatEvent``). Seats are numbered: the unique
    (item, seat) constraint holds the panel size.

    On PostgreSQL one query finds and locks the best claimable item (``FOR UPDATE SKIP LOCKED``,
    the job-queue pattern), so concurrent annotators spread over the queue instead of trying the
    rows another claim holds; a second pass waits for locked rows, so the last free seats are not
    reported as "no work". Every path that adds a seat locks its item first, so the seat check
    under the lock is final. On SQLite, which serialises writing transactions, the claim runs
    alone. The claimed seat carries ``upcoming``: what a client needs to fetch ahead the item
    the annotator would likely get next (not reserved).

    ``prefer`` (an item named by an ``upcoming`` the annotator was given, :func:`upcoming_token`)
    is claimed first when it is still claimable by the same rule: its lock is waited for, not
    skipped, so a client gets the item it fetched ahead even while another request holds it for a
    moment (a claim, or a vote deciding it); on PostgreSQL the item after it, the new ``upcoming``,
    is read in the same statement, elsewhere apart.
    Otherwise the claim goes on in queue order.
    """
    if not user_has_role(annotator, Role.ANNOTATOR):
        raise ApplicationError("only annotators claim review work", code="not_an_annotator", status_code=403)
    if stage is not None and stage not in WorkItem.Stage.values:
        raise ApplicationError(f"unknown stage {stage!r}; use {WorkItem.Stage.values}", code="invalid_stage")
    for attempt in range(2):
        try:
            return _claim(annotator, stage, last_video_id, prefer)
        except IntegrityError:
            # A seat written outside the locking rule (a script) raced this claim: start again.
            if attempt:
                raise
    return None  # unreachable: the loop returns or raises


def _claim(annotator, stage: str | None, last_video_id: int | None, prefer: int | None) -> Assignment | None:
    own_transaction = not connection.in_atomic_block
    with transaction.atomic():
        # One claim per annotator at a time: the annotator's user row is locked, so a second,
        # simultaneous claim waits here and then finds the seat the first one took.
        lease_seconds, last_video = _lock_annotator(annotator, with_last_video=last_video_id is None,
                                                    quick_commit=own_transaction)
        current = _active_seat(annotator, stage)
        if current is not None:
            return current
        if lease_seconds is None:
            lease_seconds = review_policy_get().lease_seconds  # no policy row yet: made with its defaults
        if last_video_id is None:
            last_video_id = last_video
        tried: list[int] = []
        if prefer is not None:
            # The item fetched ahead, before any other item is locked: waiting for its lock while
            # holding another item's could deadlock with a claim that holds it and wants that one.
            preferred = _preferred_candidate(annotator, stage, prefer)
            if preferred is not None:
                tried.append(preferred.pk)
                claimed = _take_free_seat(preferred, annotator, lease_seconds) or _take_seat(preferred, annotator,
                                                                                              lease_seconds)
                if claimed is not None:
                    claimed.upcoming = _upcoming_after(annotator, stage, preferred)
                    return claimed
        for skip_locked in (True, False):
            for _ in range(CANDIDATES_PER_TRY):
                found = _next_candidates(annotator, stage, last_video_id, tried, skip_locked=skip_locked)
                if not found:
                    break
                tried.append(found[0].pk)
                claimed = _take_free_seat(found[0], annotator, lease_seconds) or _take_seat(found[0], annotator,
                                                                                              lease_seconds)
                if claimed is not None:
                    claimed.upcoming = upcoming_of(found[1]) if len(found) > 1 else None
                    return claimed
        return None


@functools.cache
def _lock_annotator_sql(with_last_video: bool, quick_commit: bool) -> str:
    user, policy = get_user_model()._meta.db_table, ReviewPolicy._meta.db_table
    item, seat = WorkItem._meta.db_table, Assignment._meta.db_table
    last_video = (f", (SELECT w.video_id FROM {seat} a JOIN {item} w ON w.id = a.item_id WHERE a.annotator_id = u.id "
                  f"ORDER BY a.claimed_at DESC, a.id DESC LIMIT 1)" if with_last_video else ", NULL")
    # NO KEY UPDATE: it serialises one annotator's claims but not the foreign-key checks of rows
    # that name the annotator (a seat event written by a manager's reassignment under an item lock
    # this claim may be waiting for), which FOR UPDATE would turn into a lock cycle.
    lock = (" FOR NO KEY UPDATE OF u" if connection.features.has_select_for_no_key_update
            else " FOR UPDATE OF u" if connection.features.has_select_for_update else "")
    # A claim's commit need not wait for its WAL record to reach the disk (PostgreSQL's
    # synchronous_commit, for this transaction only): a crash can lose at most the last moment's
    # claims, whole, and a lost claim is a lease the client takes again. Votes keep durable commits.
    quick = (", set_config('synchronous_commit', 'off', true)" if quick_commit and connection.vendor == "postgresql"
             else "")
    return (f"SELECT (SELECT p.lease_seconds FROM {policy} p WHERE p.name = %s){last_video}{quick} "
            f"FROM {user} u WHERE u.id = %s{lock}")


def _lock_annotator(annotator, *, with_last_video: bool, quick_commit: bool) -> tuple[int | None, int | None]:
    """Lock the annotator's user row; read, in the same query, the review policy's lease (``None``
    before the policy row exists) and the video of the annotator's latest seat (``None`` when
    not asked for or when they have none). Both are hints older than the lock, which is all they
    need to be; the seat checks come after it. With ``quick_commit`` (the claim is a transaction
    of its own) its commit does not wait for the disk."""
    with prepared_cursor() as cursor:
        cursor.execute(_lock_annotator_sql(with_last_video, quick_commit), ["default", annotator.pk])
        row = cursor.fetchone()
    return (None, None) if row is None else (row[0], row[1])


@functools.cache
def _active_seat_sql(stage: bool) -> str:
    item, seat = WorkItem._meta.db_table, Assignment._meta.db_table
    return (f"SELECT {columns(Assignment, 'a')} FROM {seat} a JOIN {item} w ON w.id = a.item_id WHERE a.annotator_id = %s "
            f"AND a.completed_at IS NULL AND a.lease_expires_at > %s AND w.state = %s"
            f"{' AND w.stage = %s' if stage else ''} ORDER BY a.id LIMIT 1")


def _active_seat(annotator, stage: str | None) -> Assignment | None:
    """``selectors.active_assignment`` (the reference it is tested against) as one plain query,
    read after the annotator's lock."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    params = [annotator.pk, now, WorkItem.State.OPEN.value, *([stage] if stage is not None else [])]
    return next(iter(model_rows(Assignment, _active_seat_sql(stage is not None), params)), None)


def _next_candidates(annotator, stage: str | None, last_video_id: int | None, tried: list[int], *,
                     skip_locked: bool, lock: bool = True, want: int = 2) -> list[WorkItem]:
    """The best ``want`` (two: the claim's and the upcoming one) open items, except ``tried``, on
    which the annotator may take a free seat (``selectors.claimable_items``, the reference this
    query is tested against); with ``lock`` the first one is locked (with ``skip_locked``, rows
    other claims hold are passed over). Items of
    ``last_video_id`` first, then video order; each part is one limited query in index order,
    so a claim costs the same with ten open items or a million.

    Written as SQL because it runs on every claim and the ORM spends longer building this
    query (three correlated subqueries) than the database spends answering it."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    cooldown = connection.ops.adapt_datetimefield_value(timezone.now() - selectors.SKIP_COOLDOWN)
    found: list[WorkItem] = []
    parts = [last_video_id, None] if last_video_id is not None else [None]
    for video in parts:
        skip = [*tried, *(item.pk for item in found)]
        locking = lock and not found and connection.features.has_select_for_update_skip_locked
        sql = _candidates_sql(stage=stage is not None, video=video is not None, skip=len(skip),
                              lock="SKIP LOCKED" if locking and skip_locked else "WAIT" if locking else "",
                              limit=want - len(found))
        params = [annotator.pk, now, annotator.pk, SeatEvent.Kind.SKIPPED.value, cooldown, now,
                  WorkItem.State.OPEN.value, *([stage] if stage is not None else []),
                  *([video] if video is not None else []), *_skip_params(skip)]
        found += model_rows(WorkItem, sql, params)
        if len(found) == want:
            break
    return found


def _preferred_candidate(annotator, stage: str | None, item_id: int) -> WorkItem | None:
    """``item_id``, locked (waiting for a claim that holds it), when the annotator may take a seat
    on it by the claim rule and it is of ``stage``; else ``None``. On PostgreSQL the same statement
    reads the item that would come after it (its ``after``: :func:`_upcoming_after`)."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    cooldown = connection.ops.adapt_datetimefield_value(timezone.now() - selectors.SKIP_COOLDOWN)
    lock = "WAIT" if connection.features.has_select_for_update else ""
    with_after = connection.vendor == "postgresql"
    sql = _candidates_sql(stage=stage is not None, video=False, skip=0, lock=lock, limit=1, only=True, after=with_after)
    rule = [annotator.pk, now, annotator.pk, SeatEvent.Kind.SKIPPED.value, cooldown, now, WorkItem.State.OPEN.value,
            *([stage] if stage is not None else [])]
    return next(iter(model_rows(WorkItem, sql, [*(rule * 2 if with_after else []), *rule, item_id])), None)


def _upcoming_after(annotator, stage: str | None, preferred: WorkItem) -> dict | None:
    """The upcoming hint after a claimed preferred item: the item :func:`_next_candidates` gives
    next (of the preferred item's video first, then in queue order, the preferred item left out),
    as the preferred item's own read found it (a hint, read as its lock was taken), or read now
    where that read did not carry it."""
    if hasattr(preferred, "after"):
        if preferred.after is None:
            return None
        pk, item_stage, video, trajectory, duplicate, end_a, end_b = (
            v if i == 1 or v is None else int(v) for i, v in enumerate(preferred.after))
        item = WorkItem(pk=pk, stage=item_stage, video_id=video, trajectory_id=trajectory, duplicate_id=duplicate)
        item.duplicate_a, item.duplicate_b = end_a, end_b
        return upcoming_of(item)
    after = _next_candidates(annotator, stage, preferred.video_id, [preferred.pk], skip_locked=True, lock=False, want=1)
    return upcoming_of(after[0]) if after else None


def _skip_params(skip: list[int]) -> list:
    """The parameters of :func:`_candidates_sql`'s excluded items: one array on PostgreSQL (one
    statement text, prepared once, however many there are), one each elsewhere."""
    if not skip:
        return []
    return [list(skip)] if connection.vendor == "postgresql" else list(skip)


@functools.cache
def _candidates_sql(*, stage: bool, video: bool, skip: int, lock: str, limit: int, only: bool = False,
                    after: bool = False) -> str:
    """The claim rule (``selectors.not_claimable_by``, ``seat_taken``) as one query; ``lock``:
    "" (none), "WAIT" or "SKIP LOCKED"; ``skip`` excluded items (:func:`_skip_params`); ``only``:
    one given item (its id the last parameter). The limit is written in, not a parameter: a
    prepared statement's generic plan would take a parameter for a tenth of the rows.

    ``after`` (PostgreSQL, with ``only``): a column ``after`` with the item that would come after
    the given one by the same rule, unlocked (of its video first, then in queue order; ``None``:
    none), as text ``[id, stage, video, trajectory, duplicate, duplicate's a, duplicate's b]``;
    its two reads take the rule's parameters, before the query's own."""
    item = WorkItem._meta.db_table
    duplicate = WorkItem._meta.get_field("duplicate").related_model._meta.db_table
    where = ["w.state = %s"] + (["w.stage = %s"] if stage else []) + (["w.video_id = %s"] if video else [])
    if skip:
        where.append("w.id <> ALL(%s)" if connection.vendor == "postgresql"
                     else f"w.id NOT IN ({', '.join(['%s'] * skip)})")
    if only:
        where.append("w.id = %s")
    locking = {"": "", "WAIT": " FOR UPDATE OF w", "SKIP LOCKED": " FOR UPDATE OF w SKIP LOCKED"}[lock]
    following = ""
    if after:
        shown = ", ".join(f"{c}::text" if c != "n.stage" else c for c in (
            "n.id", "n.stage", "n.video_id", "n.trajectory_id", "n.duplicate_id", "dn.trajectory_a_id",
            "dn.trajectory_b_id"))
        reads = [f"(SELECT ARRAY[{shown}] FROM {item} n LEFT JOIN {duplicate} dn ON dn.id = n.duplicate_id "
                 f"WHERE {_claimable_sql('n')} AND n.state = %s{' AND n.stage = %s' if stage else ''}{same} "
                 f"AND n.id <> w.id ORDER BY n.video_id, n.id LIMIT 1)"
                 for same in (" AND n.video_id = w.video_id", "")]
        following = f", COALESCE({', '.join(reads)}) AS after"
    return (
        f"SELECT {columns(WorkItem, 'w')}, d.trajectory_a_id AS duplicate_a, d.trajectory_b_id AS duplicate_b"
        f"{following} FROM {item} w "
        f"LEFT JOIN {duplicate} d ON d.id = w.duplicate_id "
        f"WHERE {_claimable_sql('w')} AND {' AND '.join(where)} ORDER BY w.video_id, w.id LIMIT {int(limit)}{locking}")


def _claimable_sql(w: str) -> str:
    """Whether the annotator may take a free seat on the item aliased ``w``; its parameters: the
    annotator, now, the annotator, the skip kind, the skip cooldown's start, now."""
    seat, event = Assignment._meta.db_table, SeatEvent._meta.db_table
    # The items are walked in queue order (the ``work_item_queue_order`` index) and each one is checked
    # by index probes: the seat and skip checks are counts, not NOT EXISTS, which PostgreSQL would
    # turn into anti-joins whose order it picks from statistics; on a table that grew since its last
    # ANALYZE that was a scan of all the annotator's seats per item (milliseconds, not microseconds).
    return (f"(SELECT COUNT(*) FROM {seat} a WHERE a.item_id = {w}.id AND a.annotator_id = %s "
            f"AND (a.completed_at IS NOT NULL OR a.lease_expires_at > %s)) = 0 "
            f"AND (SELECT COUNT(*) FROM {event} e WHERE e.item_id = {w}.id AND e.holder_id = %s AND e.kind = %s "
            f"AND e.at > %s) = 0 "
            f"AND (SELECT COUNT(*) FROM {seat} t WHERE t.item_id = {w}.id "
            f"AND (t.completed_at IS NOT NULL OR t.lease_expires_at > %s)) < {w}.panel_size")


@functools.cache
def _free_seat_sql() -> str:
    """Insert the annotator's seat on an item (locked by the caller) under the lowest free seat
    number, only when the item has no seat of theirs, no lapsed seat and fewer seats than its
    panel; answers the new row's id and seat number, or nothing. A new statement reads what every
    claim before the lock committed, so the check is final."""
    seat = Assignment._meta.db_table
    lowest_free = (f"CASE WHEN NOT EXISTS (SELECT 1 FROM {seat} z WHERE z.item_id = %(item)s AND z.seat = 0) THEN 0 "
                   f"ELSE (SELECT MIN(x.seat) + 1 FROM {seat} x WHERE x.item_id = %(item)s AND NOT EXISTS "
                   f"(SELECT 1 FROM {seat} y WHERE y.item_id = %(item)s AND y.seat = x.seat + 1)) END")
    return (f"INSERT INTO {seat} (item_id, annotator_id, seat, claimed_at, lease_expires_at, completed_at) "
            f"SELECT %(item)s, %(annotator)s, {lowest_free}, %(now)s, %(expires)s, NULL "
            f"WHERE NOT EXISTS (SELECT 1 FROM {seat} s WHERE s.item_id = %(item)s AND (s.annotator_id = %(annotator)s "
            f"OR (s.completed_at IS NULL AND s.lease_expires_at <= %(now)s))) "
            f"AND (SELECT COUNT(*) FROM {seat} c WHERE c.item_id = %(item)s) < %(panel)s RETURNING id, seat")


def _take_free_seat(item: WorkItem, annotator, lease_seconds: int) -> Assignment | None:
    """The common claim in one statement (:func:`_free_seat_sql`); ``None`` leaves the item to
    :func:`_take_seat` (a lapsed seat to give back, a seat of the annotator's, a full panel)."""
    if not connection.features.can_return_columns_from_insert:
        return None
    now = timezone.now()
    expires = now + timedelta(seconds=lease_seconds)
    adapt = connection.ops.adapt_datetimefield_value
    with prepared_cursor() as cursor:
        cursor.execute(_free_seat_sql(), {"item": item.pk, "annotator": annotator.pk, "now": adapt(now),
                                          "expires": adapt(expires), "panel": item.panel_size})
        row = cursor.fetchone()
    if row is None:
        return None
    return Assignment(pk=row[0], item=item, annotator=annotator, seat=row[1], claimed_at=now, lease_expires_at=expires,
                      completed_at=None)


def _take_seat(item: WorkItem, annotator, lease_seconds: int) -> Assignment | None:
    """A seat on ``item`` (locked by the caller), or ``None`` when it has none free for
    ``annotator``. An expired seat without a vote goes back to the pool (its holder may take it
    again); that is recorded."""
    now = timezone.now()
    seats = list(Assignment.objects.filter(item=item))
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
