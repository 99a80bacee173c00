"""Casting votes and adjudicating: one vote per person per item, never edited, decided by rule."""
from __future__ import annotations

import functools
import json
import uuid

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.curation.stages import stage_get
from annotation.curation.stages.base import CLOSED_STATES, payload_checked
from annotation.models import Assignment, Vote, WorkItem
from common.errors import ApplicationError, ConflictError, NotFoundError
from common.roles import Role, user_has_role
from common.sql import columns, model_rows, prepared_cursor

MAX_REASONS = 10
MAX_TIME_SPENT_MS = 6 * 3600 * 1000
MAX_PAYLOAD_BYTES = 4096


def _check_label(item: WorkItem, label: str) -> None:
    if label not in item.labels:
        raise ApplicationError(f"{label!r} is not a {item.stage} label; use one of {list(item.labels)}",
                               code="invalid_label", extra={"labels": list(item.labels)})


def _check_reasons(reasons) -> list[str]:
    reasons = list(reasons or [])
    if len(reasons) > MAX_REASONS or any(not isinstance(r, str) or not r.strip() or len(r) > 200 for r in reasons):
        raise ApplicationError(f"reasons must be at most {MAX_REASONS} non-empty texts of up to 200 characters",
                               code="invalid_reasons")
    return [r.strip() for r in reasons]


def _replayed(annotator, client_request_id, item_id: int, label: str) -> Vote | None:
    """The vote an earlier submission of the same request created, if any."""
    if client_request_id is None:
        return None
    earlier = Vote.objects.filter(annotator=annotator, client_request_id=client_request_id).first()
    if earlier is not None and (earlier.item_id != item_id or earlier.label != label):
        raise ConflictError("this request id was already used for a different vote", code="request_id_reused",
                            extra={"vote": earlier.pk})
    return earlier


def _locked_item(item_id: int, label: str) -> WorkItem:
    """The item row, locked for this transaction, after checking the label fits its stage."""
    item = WorkItem.objects.select_for_update().filter(pk=item_id).first()
    if item is None:
        raise NotFoundError(f"work item {item_id} does not exist", code="not_found")
    _check_label(item, label)
    return item


@functools.cache
def _seated_item_sql(lock: bool) -> str:
    """The item row (locked), the voter's seat on it and the vote an earlier submission of the
    same request created, in one query: the panel vote's first read."""
    item, seat, vote = WorkItem._meta.db_table, Assignment._meta.db_table, Vote._meta.db_table
    return (f"SELECT {columns(WorkItem, 'w')}, a.id AS seat_pk, a.completed_at AS seat_completed_at, "
            f"(SELECT v.id FROM {vote} v WHERE v.annotator_id = %s AND v.client_request_id = %s) AS replay_pk "
            f"FROM {item} w LEFT JOIN {seat} a ON a.item_id = w.id AND a.annotator_id = %s "
            f"WHERE w.id = %s{' FOR UPDATE OF w' if lock else ''}")


def _seated_item(item_id: int, annotator, label: str, client_request_id) -> WorkItem:
    """:func:`_locked_item` with the annotator's seat (``seat_pk``, ``seat_completed_at``) and
    the id of a vote this request already created (``replay_pk``), read in the same query.

    The seat and the replay are read in the statement that takes the item lock, so they can be
    older than the lock; neither decides alone: the seat is completed only if it is still this
    annotator's and still open (:func:`vote_cast` checks the update), and a vote cast twice
    fails the (item, annotator) constraint."""
    if not 0 < item_id < 2**63:
        raise NotFoundError(f"work item {item_id} does not exist", code="not_found")
    request_id = Vote._meta.get_field("client_request_id").get_db_prep_value(client_request_id, connection)
    found = model_rows(WorkItem, _seated_item_sql(connection.features.has_select_for_update),
                       [annotator.pk, request_id, annotator.pk, item_id])
    if not found:
        raise NotFoundError(f"work item {item_id} does not exist", code="not_found")
    _check_label(found[0], label)
    return found[0]


@functools.cache
def _cast_sql() -> str:
    """The panel vote's write as one statement: the vote inserted, the voter's seat completed (if it
    is still theirs and open), and the labels of the item's votes in casting order, this one
    included."""
    quote = connection.ops.quote_name
    vote, seat = Vote._meta.db_table, Assignment._meta.db_table
    fields = [f for f in Vote._meta.concrete_fields if not f.primary_key]
    return (f"WITH seat AS (UPDATE {seat} SET completed_at = %s WHERE id = %s AND annotator_id = %s "
            f"AND completed_at IS NULL RETURNING id), "
            f"new_vote AS (INSERT INTO {vote} ({', '.join(quote(f.column) for f in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))}) RETURNING id, created_at) "
            f"SELECT c.id, EXISTS (SELECT 1 FROM seat), ARRAY(SELECT x.label FROM ("
            f"SELECT v.label, v.created_at, v.id FROM {vote} v WHERE v.item_id = %s "
            f"UNION ALL SELECT %s, c.created_at, c.id) x ORDER BY x.created_at, x.id) FROM new_vote c")


def _writes_in_one_statement() -> bool:
    """Whether the database takes :func:`_cast_sql` (PostgreSQL's data-modifying WITH)."""
    return connection.vendor == "postgresql"


def _cast(item: WorkItem, annotator, *, stage, judgments, **fields) -> Vote:
    """Write the panel vote on the locked ``item`` and complete the annotator's seat; the stage's
    ``after_vote`` runs next, then a seat that is no longer the annotator's and open is refused
    (403 ``not_assigned``, the transaction rolled back). On PostgreSQL one statement
    (:func:`_cast_sql`) does both writes and reads the item's labels for its rule
    (``item.labels_cast``); elsewhere the ORM does each, the seat after ``after_vote``."""
    vote = Vote(item=item, annotator=annotator, **fields)
    if _writes_in_one_statement():
        written = [f for f in Vote._meta.concrete_fields if not f.primary_key]
        values = [f.get_db_prep_save(f.pre_save(vote, True), connection) for f in written]
        with prepared_cursor() as cursor:
            cursor.execute(_cast_sql(), [timezone.now(), item.seat_pk, annotator.pk, *values, item.pk, vote.label])
            vote.pk, completed, item.labels_cast = cursor.fetchone()
        vote._state.adding, vote._state.db = False, connection.alias
    else:
        vote.save(force_insert=True)
        completed = None
    stage.after_vote(item=item, vote=vote, judgments=judgments)
    if completed is None:
        completed = Assignment.objects.filter(pk=item.seat_pk, annotator=annotator, completed_at__isnull=True) \
            .update(completed_at=timezone.now())
    if not completed:
        # the seat changed hands while this request waited for the item (a manager
        # reassigned it, or its lapsed lease was taken): the vote is not recorded
        raise ApplicationError("you no longer hold a seat on this item: claim it with next first",
                               code="not_assigned", status_code=403)
    return vote


def _apply_rule(item: WorkItem) -> WorkItem:
    """Move a locked item to the state its stage's rule gives; run the stage's on-closed step once
    the item is decided or unresolved."""
    stage = stage_get(item.stage)
    state, decision = stage.rule(item)
    if (state, decision) != (item.state, item.decision):
        item.state, item.decision = state, decision
        item.decided_at = timezone.now() if state in CLOSED_STATES else None
        item.save(update_fields=["state", "decision", "decided_at"])
        if state in CLOSED_STATES:
            stage.on_closed(item)
    return item


def vote_cast(*, item_id: int, annotator, label: str, reasons=None, time_spent_ms: int | None = None,
              client_request_id: uuid.UUID | None = None, correction=None, payload: dict | None = None,
              judgments: dict[int, int] | None = None) -> tuple[Vote, bool]:
    """Cast the annotator's panel vote on an item they hold a seat on; returns ``(vote, created)``.

    ``correction`` (a description's corrected content), ``payload`` (ratings) and ``judgments``
    (a relation row's ``{trajectory id: 1 | 0 | -1}``) are checked by the item's stage
    (``annotation.curation.stages``).
    Idempotent under ``client_request_id``: a retried submission returns the vote it created.
    Refused: a non-annotator (403), no seat on the item (403), a second vote (409), an item no
    longer collecting votes (409), an unknown label (400). Locks the item row, so the rule sees
    every vote exactly once however many arrive at the same time.
    """
    if not user_has_role(annotator, Role.ANNOTATOR):
        raise ApplicationError("only annotators cast panel votes", code="not_an_annotator", status_code=403)
    if time_spent_ms is not None and not (0 <= time_spent_ms <= MAX_TIME_SPENT_MS):
        raise ApplicationError("time_spent_ms must be between 0 and 6 hours", code="invalid_time_spent")
    reasons = _check_reasons(reasons)
    if payload is not None and (not isinstance(payload, dict) or len(json.dumps(payload)) > MAX_PAYLOAD_BYTES):
        raise ApplicationError(f"payload must be an object of at most {MAX_PAYLOAD_BYTES} bytes as JSON",
                               code="invalid_payload")
    try:
        with transaction.atomic():
            item = _seated_item(item_id, annotator, label, client_request_id)
            if item.replay_pk is not None:
                return _replayed(annotator, client_request_id, item.pk, label), False
            if item.seat_pk is None:
                raise ApplicationError("you hold no seat on this item: claim it with next first", code="not_assigned",
                                       status_code=403)
            # a second vote also fails the (item, annotator) constraint, reported below
            if item.seat_completed_at is not None:
                raise ConflictError("you have voted on this item already; votes are never changed",
                                    code="already_voted")
            if item.state != WorkItem.State.OPEN:
                raise ConflictError(f"this item is {item.state}; it takes no more panel votes", code="item_closed")
            stage = stage_get(item.stage)
            payload = payload_checked(stage, item, payload)
            extra = stage.check(item=item, annotator=annotator, label=label, correction=correction,
                                payload=payload, judgments=judgments)
            vote = _cast(item, annotator, stage=stage, judgments=judgments, label=label, reasons=reasons,
                         time_spent_ms=time_spent_ms, client_request_id=client_request_id, **extra)
            _apply_rule(item)
            return vote, True
    except IntegrityError:
        # A concurrent submission of the same request (or vote) won: report what stands.
        earlier = _replayed(annotator, client_request_id, item_id, label)
        if earlier is not None:
            return earlier, False
        raise ConflictError("you have voted on this item already; votes are never changed", code="already_voted") from None


def adjudication_cast(*, item_id: int, adjudicator, label: str, reason: str,
                      client_request_id: uuid.UUID | None = None, judgments: dict[int, int] | None = None) -> Vote:
    """Record an adjudicator's decision on an item without a panel majority, as a further vote.

    The adjudicator must hold the adjudicator role and must not sit on the item's panel; a reason
    is required. ``judgments`` (a relation row's ``{trajectory id: 1 | 0 | -1}`` for exactly the
    candidates its reviews left ⊥) are checked by the stage's ``adjudication_check`` and stored
    with the vote; a stage without one refuses them (400). A retry with the same
    ``client_request_id`` returns the recorded decision. Locks the item row.
    """
    if not user_has_role(adjudicator, Role.ADJUDICATOR):
        raise ApplicationError("only adjudicators adjudicate", code="not_an_adjudicator", status_code=403)
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError("an adjudication needs a reason", code="reason_required")
    with transaction.atomic():
        item = _locked_item(item_id, label)
        stage = stage_get(item.stage)
        if label in stage.not_adjudicated:
            allowed = [v for v in stage.label_values if v not in stage.not_adjudicated]
            raise ApplicationError(f"an adjudicator decides {', '.join(allowed[:-1])} or {allowed[-1]}; corrections "
                                   "come from the panel",
                                   code="invalid_label")
        earlier = _replayed(adjudicator, client_request_id, item.pk, label)
        if earlier is not None:
            return earlier
        if item.state != WorkItem.State.ADJUDICATE:
            raise ConflictError(f"this item is {item.state}; only items without a panel majority are adjudicated",
                                code="not_in_adjudication")
        if Assignment.objects.filter(item=item, annotator=adjudicator).exists():
            raise ApplicationError("you sat on this item's panel; another adjudicator must decide it",
                                   code="panel_member", status_code=403)
        if stage.adjudication_check is not None:
            stage.adjudication_check(item=item, judgments=judgments)
        elif judgments:
            raise ApplicationError(f"a {item.stage} adjudication carries a label and a reason only",
                                   code="unexpected_fields")
        try:
            with transaction.atomic():
                vote = Vote.objects.create(item=item, annotator=adjudicator, label=label, comment=reason,
                                           is_adjudication=True, client_request_id=client_request_id)
        except IntegrityError:
            raise ConflictError("you have adjudicated this item already", code="already_voted") from None
        if judgments:
            stage.after_vote(item=item, vote=vote, judgments=judgments)
        _apply_rule(item)
        return vote
