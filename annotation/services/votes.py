"""Casting votes and adjudicating: one vote per person per item, never edited, decided by rule."""
from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.roles import Role, user_has_role
from annotation.models import Assignment, Vote, WorkItem
from annotation.rules import ADJUDICATE, PENDING, UNRESOLVED, decide
from common.errors import ApplicationError, ConflictError, NotFoundError

MAX_REASONS = 10
MAX_TIME_SPENT_MS = 6 * 3600 * 1000
MAX_PAYLOAD_BYTES = 4096


@dataclass(frozen=True)
class StageHandler:
    """How a later review stage (descriptions, relation rows, cross-video pairs) plugs into voting.

    ``check(item, annotator, label, correction, payload, judgments)`` validates what a vote carries
    besides its label and returns the extra ``Vote`` fields (raises ``ApplicationError``);
    ``after_vote(item, vote, judgments)`` stores rows that belong to the vote; ``rule(item)`` gives
    the item's ``(state, decision)`` from its votes (it may widen the panel for a second review);
    ``on_closed(item)`` runs once the item is decided or unresolved. All run inside the vote's
    transaction with the item row locked.
    """

    check: Callable
    after_vote: Callable
    rule: Callable
    on_closed: Callable


# Registered by the stage services at import (annotation.apps.ready imports them).
STAGE_HANDLERS: dict[str, StageHandler] = {}


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


def _conflict_outcome(item: WorkItem) -> str:
    """A judgment reopened by a consolidation conflict is decided by the adjudication that follows
    (a panel majority cannot settle it: it is part of the contradiction)."""
    later = (Vote.objects.filter(item=item, is_adjudication=True, created_at__gte=item.reopened_at)
             .order_by("-created_at", "-id").values_list("label", flat=True).first())
    if later is None:
        return ADJUDICATE
    return later if later in item.decisive else UNRESOLVED


def _locked_item(item_id: int, label: str) -> WorkItem:
    """The item row, locked for this transaction, after checking the label fits its stage."""
    item = WorkItem.objects.select_for_update().filter(pk=item_id).first()
    if item is None:
        raise NotFoundError(f"work item {item_id} does not exist", code="not_found")
    _check_label(item, label)
    return item


def _apply_rule(item: WorkItem) -> WorkItem:
    """Move a locked item to the state its votes give (DESIGN 5 ``decide``, or its stage's rule)."""
    handler = STAGE_HANDLERS.get(item.stage)
    closed = (WorkItem.State.DECIDED, WorkItem.State.UNRESOLVED)
    if handler is not None:
        state, decision = handler.rule(item)
        if (state, decision) != (item.state, item.decision):
            item.state, item.decision = state, decision
            item.decided_at = timezone.now() if state in closed else None
            item.save(update_fields=["state", "decision", "decided_at"])
            if state in closed:
                handler.on_closed(item)
        return item
    if item.reopened_at is not None:
        outcome = _conflict_outcome(item)
    else:
        labels = list(Vote.objects.filter(item=item).order_by("created_at", "id").values_list("label", flat=True))
        outcome = decide(labels, item.decisive, required=item.required_votes, panel=item.panel_size)
    state, decision = {
        PENDING: (WorkItem.State.OPEN, ""),
        ADJUDICATE: (WorkItem.State.ADJUDICATE, ""),
        UNRESOLVED: (WorkItem.State.UNRESOLVED, ""),
    }.get(outcome, (WorkItem.State.DECIDED, outcome))
    if (state, decision) != (item.state, item.decision):
        item.state, item.decision = state, decision
        item.decided_at = timezone.now() if state in (WorkItem.State.DECIDED, WorkItem.State.UNRESOLVED) else None
        item.save(update_fields=["state", "decision", "decided_at"])
    return item


def vote_cast(*, item_id: int, annotator, label: str, reasons=None, time_spent_ms: int | None = None,
              client_request_id: uuid.UUID | None = None, correction=None, payload: dict | None = None,
              judgments: dict[int, int] | None = None) -> tuple[Vote, bool]:
    """Cast the annotator's panel vote on an item they hold a seat on; returns ``(vote, created)``.

    ``correction`` (a description's corrected content), ``payload`` (ratings) and ``judgments``
    (a relation row's ``{trajectory id: 1 | 0 | -1}``) are checked by the item's stage handler.
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
            item = _locked_item(item_id, label)
            earlier = _replayed(annotator, client_request_id, item.pk, label)
            if earlier is not None:
                return earlier, False
            seat = Assignment.objects.select_for_update().filter(item=item, annotator=annotator).first()
            if seat is None:
                raise ApplicationError("you hold no seat on this item: claim it with next first", code="not_assigned",
                                       status_code=403)
            if seat.completed_at is not None or Vote.objects.filter(item=item, annotator=annotator).exists():
                raise ConflictError("you have voted on this item already; votes are never changed",
                                    code="already_voted")
            if item.state != WorkItem.State.OPEN:
                raise ConflictError(f"this item is {item.state}; it takes no more panel votes", code="item_closed")
            handler = STAGE_HANDLERS.get(item.stage)
            if handler is not None:
                extra = handler.check(item=item, annotator=annotator, label=label, correction=correction,
                                      payload=payload, judgments=judgments)
            elif correction is not None or payload or judgments:
                raise ApplicationError(f"a {item.stage} vote carries only a label and reasons", code="unexpected_fields")
            else:
                extra = {}
            vote = Vote.objects.create(item=item, annotator=annotator, label=label, reasons=reasons,
                                       time_spent_ms=time_spent_ms, client_request_id=client_request_id, **extra)
            if handler is not None:
                handler.after_vote(item=item, vote=vote, judgments=judgments)
            seat.completed_at = timezone.now()
            seat.save(update_fields=["completed_at"])
            _apply_rule(item)
            return vote, True
    except IntegrityError:
        # A concurrent submission of the same request (or vote) won: report what stands.
        earlier = _replayed(annotator, client_request_id, item_id, label)
        if earlier is not None:
            return earlier, False
        raise ConflictError("you have voted on this item already; votes are never changed", code="already_voted") from None


def adjudication_cast(*, item_id: int, adjudicator, label: str, reason: str,
                      client_request_id: uuid.UUID | None = None) -> Vote:
    """Record an adjudicator's decision on an item without a panel majority, as a further vote.

    The adjudicator must hold the adjudicator role and must not sit on the item's panel; a reason
    is required. A retry with the same ``client_request_id`` returns the recorded decision. Locks
    the item row.
    """
    if not user_has_role(adjudicator, Role.ADJUDICATOR):
        raise ApplicationError("only adjudicators adjudicate", code="not_an_adjudicator", status_code=403)
    reason = (reason or "").strip()
    if not reason:
        raise ApplicationError("an adjudication needs a reason", code="reason_required")
    if label == "usable_after_minor_correction":
        raise ApplicationError("an adjudicator decides usable, unusable or uncertain; corrections come from the panel",
                               code="invalid_label")
    with transaction.atomic():
        item = _locked_item(item_id, label)
        earlier = _replayed(adjudicator, client_request_id, item.pk, label)
        if earlier is not None:
            return earlier
        if item.state != WorkItem.State.ADJUDICATE:
            raise ConflictError(f"this item is {item.state}; only items without a panel majority are adjudicated",
                                code="not_in_adjudication")
        if Assignment.objects.filter(item=item, annotator=adjudicator).exists():
            raise ApplicationError("you sat on this item's panel; another adjudicator must decide it",
                                   code="panel_member", status_code=403)
        try:
            vote = Vote.objects.create(item=item, annotator=adjudicator, label=label, comment=reason,
                                       is_adjudication=True, client_request_id=client_request_id)
        except IntegrityError:
            raise ConflictError("you have adjudicated this item already", code="already_voted") from None
        _apply_rule(item)
        return vote
