"""Reads of the annotation app. Blinding lives here: each selector returns only what its reader
may see. Annotators never see another person's vote on an item, nor its tally or state;
adjudicators see every vote of the items in adjudication; managers see aggregates."""
from __future__ import annotations

from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from accounts.roles import Role, user_has_role
from annotation.benchmark.selectors import model_suggestions_visible
from annotation.curation.stages import STAGES, stage_get
from annotation.models import Assignment, CandidatePool, Vote, WorkItem
from common.errors import ApplicationError, NotFoundError


def assignment_for_annotator(*, annotator, item_id: int) -> Assignment:
    """The annotator's own seat on an item (404 when they have none: the item is not theirs to see)."""
    seat = (Assignment.objects.select_related("item", "item__trajectory", "item__duplicate")
            .filter(annotator=annotator, item_id=item_id).first())
    if seat is None:
        raise NotFoundError(f"you have no seat on work item {item_id}", code="not_found")
    return seat


# -- the claim rule, as reads (annotation.curation.services.claims takes seats by the same rule) -----------
def seat_taken(now, prefix: str = "") -> Q:
    """A seat is taken once its vote is in, or while its lease runs (``prefix`` reaches the
    assignment from another model, e.g. ``"assignments__"``)."""
    return Q(**{f"{prefix}completed_at__isnull": False}) | Q(**{f"{prefix}lease_expires_at__gt": now})


def claimable_items(*, annotator, stage: str | None = None) -> QuerySet[WorkItem]:
    """Open items ``annotator`` could claim now: never sat on by them, with a free seat."""
    mine = Assignment.objects.filter(item=OuterRef("pk"), annotator=annotator)
    items = (WorkItem.objects.filter(state=WorkItem.State.OPEN).exclude(Exists(mine))
             .annotate(taken=Count("assignments", filter=seat_taken(timezone.now(), "assignments__")))
             .filter(taken__lt=F("panel_size")))
    return items if stage is None else items.filter(stage=stage)


def active_assignment(*, annotator, stage: str | None = None) -> Assignment | None:
    """The annotator's claimed, unvoted, unexpired seat on an open item (of ``stage``), if any."""
    seats = Assignment.objects.select_related("item").filter(
        annotator=annotator, completed_at__isnull=True, lease_expires_at__gt=timezone.now(),
        item__state=WorkItem.State.OPEN)
    if stage is not None:
        seats = seats.filter(item__stage=stage)
    return seats.first()


def own_vote(*, annotator, item_id: int) -> Vote | None:
    return Vote.objects.filter(annotator=annotator, item_id=item_id).first()


def adjudication_queue(*, user) -> QuerySet[WorkItem]:
    """Items waiting for an adjudicator, except those the adjudicator sat on."""
    if not user_has_role(user, Role.ADJUDICATOR):
        raise ApplicationError("only adjudicators see the adjudication queue", code="permission_denied",
                               status_code=403)
    return (WorkItem.objects.filter(state=WorkItem.State.ADJUDICATE).exclude(assignments__annotator=user)
            .prefetch_related("votes", "votes__annotator").order_by("video_id", "id"))


def adjudication_item(*, user, item_id: int) -> WorkItem:
    item = adjudication_queue(user=user).filter(pk=item_id).first()
    if item is None:
        raise NotFoundError(f"work item {item_id} is not in your adjudication queue", code="not_found")
    return item


def review_summary() -> dict:
    """Aggregates for managers: items per stage and state, votes cast, adjudication rate."""
    by_state = WorkItem.objects.values("stage", "state").annotate(n=Count("id")).order_by("stage", "state")
    summary: dict[str, dict] = {}
    for row in by_state:
        summary.setdefault(row["stage"], {"items": 0, "states": {}})
        summary[row["stage"]]["states"][row["state"]] = row["n"]
        summary[row["stage"]]["items"] += row["n"]
    votes = Vote.objects.values("item__stage", "is_adjudication").annotate(n=Count("id"))
    for row in votes:
        stage = summary.setdefault(row["item__stage"], {"items": 0, "states": {}})
        key = "adjudication_votes" if row["is_adjudication"] else "panel_votes"
        stage[key] = stage.get(key, 0) + row["n"]
    adjudicated = (WorkItem.objects.filter(votes__is_adjudication=True).values("stage")
                   .annotate(n=Count("id", distinct=True)))
    for row in adjudicated:
        summary[row["stage"]]["adjudicated_items"] = row["n"]
    for stage in summary.values():
        stage.setdefault("panel_votes", 0)
        stage.setdefault("adjudication_votes", 0)
        stage["adjudication_rate"] = stage.get("adjudicated_items", 0) / stage["items"] if stage["items"] else 0.0
    return summary


def pool_list(*, video_id: int | None = None) -> QuerySet[CandidatePool]:
    qs = CandidatePool.objects.filter(frozen_at__isnull=False)
    return qs.filter(video_id=video_id) if video_id is not None else qs


def pool_get(*, pool_id: int) -> CandidatePool:
    pool = pool_list().prefetch_related("members").filter(pk=pool_id).first()
    if pool is None:
        raise NotFoundError(f"candidate pool {pool_id} does not exist", code="not_found")
    return pool


# -- what a reviewer is shown ----------------------------------------------------------------------
def review_target(*, item: WorkItem, viewer, audit: bool = False) -> dict:
    """What a reviewer needs to judge an item, as plain data: ``{"description": ..., "relation_row":
    ..., "pair": ...}`` with ``None`` except under the key of the item's stage (usability and
    identity items carry their trajectories in the item's own fields).

    The stage's ``read_target`` decides what is shown (``annotation.curation.stages``). Model
    suggestions (pre-labels, proposals) are left out on an independent second review (they would
    tell what the first reviewer said), when ``audit`` is set, and for a viewer who may not see
    them (an auditor). Nobody's vote is read into the answer.
    """
    stage = stage_get(item.stage)
    out: dict = {s.target_key: None for s in STAGES if s.target_key}
    if stage.target_key:
        out[stage.target_key] = stage.read_target(
            item=item, viewer=viewer, second=stage.second_reviewer(item, viewer),
            suggestions=not audit and model_suggestions_visible(viewer))
    return out
