"""Reads of the annotation app. Blinding lives here: each selector returns only what its reader
may see. Annotators never see another person's vote on an item, nor its tally or state;
adjudicators see every vote of the items in adjudication; managers see aggregates."""
from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.benchmark.selectors import model_suggestions_visible
from annotation.curation.stages import STAGES, seated_blind, stage_get
from annotation.models import Assignment, CandidatePool, SeatEvent, Vote, WorkItem
from common.errors import ApplicationError, NotFoundError
from common.roles import Role, user_has_role


def assignment_for_annotator(*, annotator, item_id: int) -> Assignment:
    """The annotator's own seat on an item (404 when they have none: the item is not theirs to see)."""
    seat = (Assignment.objects.select_related("item", "item__trajectory", "item__duplicate")
            .filter(annotator=annotator, item_id=item_id).first())
    if seat is None:
        raise NotFoundError(f"you have no seat on work item {item_id}", code="not_found")
    return seat


# -- the claim rule, as reads (annotation.curation.services.claims takes seats by the same rule) -----------
SKIP_COOLDOWN = timedelta(minutes=30)  # a skipped item is not offered to its skipper again before this


def seat_taken(now, prefix: str = "") -> Q:
    """A seat is taken once its vote is in, or while its lease runs (``prefix`` reaches the
    assignment from another model, e.g. ``"assignments__"``)."""
    return Q(**{f"{prefix}completed_at__isnull": False}) | Q(**{f"{prefix}lease_expires_at__gt": now})


def not_claimable_by(annotator, now) -> Q:
    """Items ``annotator`` may not claim at ``now``: one they hold a taken seat on (voted, or
    under a running lease), or one they skipped less than ``SKIP_COOLDOWN`` ago. A seat of
    theirs whose lease lapsed without a vote does not count: they may take the item again."""
    mine = Assignment.objects.filter(seat_taken(now), item=OuterRef("pk"), annotator=annotator)
    skipped = SeatEvent.objects.filter(item=OuterRef("pk"), holder=annotator, kind=SeatEvent.Kind.SKIPPED,
                                       at__gt=now - SKIP_COOLDOWN)
    return Q(Exists(mine)) | Q(Exists(skipped))


def claimable_items(*, annotator, stage: str | None = None) -> QuerySet[WorkItem]:
    """Open items ``annotator`` could claim now (``not_claimable_by``), with a free seat."""
    now = timezone.now()
    items = (WorkItem.objects.filter(state=WorkItem.State.OPEN).exclude(not_claimable_by(annotator, now))
             .annotate(taken=Count("assignments", filter=seat_taken(now, "assignments__")))
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
            .prefetch_related("votes", "votes__annotator", "votes__judgments").order_by("video_id", "id"))


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
        suggestions = not audit and model_suggestions_visible(viewer)
        if suggestions and stage.blinds is not None:
            # a seat on another open item of the same family hides this one's suggestions too
            record = (item.query_id, None) if item.query_id else (item.pair.query_id, item.pair.trajectory_id)
            suggestions = not seated_blind(viewer, exclude_item_id=item.pk).hides(*record)
        out[stage.target_key] = stage.read_target(
            item=item, viewer=viewer, second=stage.second_reviewer(item, viewer), suggestions=suggestions)
    return out


# -- a proposal run's review and one item, for managers -----------------------------------------------
def work_item_for_manager(*, item_id: int, viewer) -> WorkItem:
    """One review item as the managers' search lists it (``n_votes``, no one's label), with what
    it shows its reviewers attached as ``review_target`` (as ``viewer`` may see it). 404 for an
    item that does not exist."""
    item = (WorkItem.objects.select_related("video__split_group", "query", "pair__query", "trajectory", "duplicate")
            .annotate(n_votes=Count("votes")).filter(pk=item_id).first())
    if item is None:
        raise NotFoundError(f"there is no work item {item_id}", code="not_found")
    item.review_target = review_target(item=item, viewer=viewer)
    return item


# -- a proposal run's review, for managers ------------------------------------------------------------
def of_runs(run_ids) -> Q:
    """The review items of proposal runs: their usability and duplicate items (what a pool freeze
    of a run reads)."""
    return (Q(stage=WorkItem.Stage.USABILITY, trajectory__run_id__in=run_ids)
            | Q(stage=WorkItem.Stage.IDENTITY, duplicate__trajectory_a__run_id__in=run_ids))


def run_review_readiness(*, run_ids: list[int]) -> dict[int, dict]:
    """Per run of ``run_ids``: how many of its review items (``of_runs``) there are and how many
    are open, in adjudication, decided and unresolved, and whether review is done (``ready``:
    items exist and none is open or in adjudication, so ``pool_freeze`` takes the run). One
    grouped query; a run without items has zeros."""
    counts = (WorkItem.objects.filter(of_runs(run_ids))
              .annotate(run=Coalesce("trajectory__run_id", "duplicate__trajectory_a__run_id"))
              .values("run", "state").annotate(n=Count("id")).order_by())
    states = [s.value for s in WorkItem.State]
    out = {run: {"run": run, "items": 0, **dict.fromkeys(states, 0)} for run in run_ids}
    for row in counts:
        out[row["run"]][row["state"]] = row["n"]
        out[row["run"]]["items"] += row["n"]
    for row in out.values():
        row["ready"] = row["items"] > 0 and row[WorkItem.State.OPEN] == 0 and row[WorkItem.State.ADJUDICATE] == 0
    return out


# -- seats, for managers -----------------------------------------------------------------------------
def seat_board(*, stage: str | None = None, item_id: int | None = None, run_id: int | None = None,
               holder: str | None = None, states: tuple[str, ...] = (WorkItem.State.OPEN,)) -> QuerySet[WorkItem]:
    """Items (open ones unless ``states`` says otherwise; any state when ``item_id`` is given)
    with their seats, holders and leases and the seat events on record, oldest item first.
    ``run_id`` keeps a proposal run's usability and duplicate items, ``holder`` the items on
    which that username holds a seat. Managers only (the API checks): it names who sits where,
    never a label."""
    items = WorkItem.objects.all() if item_id is not None else WorkItem.objects.filter(state__in=states)
    if item_id is not None:
        items = items.filter(pk=item_id)
    if stage:
        items = items.filter(stage=stage)
    if run_id is not None:
        items = items.filter(of_runs([run_id]))
    if holder:
        items = items.filter(Exists(Assignment.objects.filter(item=OuterRef("pk"), annotator__username=holder)))
    return (items.order_by("id")
            .prefetch_related(Prefetch("assignments", Assignment.objects.select_related("annotator").order_by("seat")),
                              Prefetch("seat_events", SeatEvent.objects.select_related("holder", "by", "to")
                                       .order_by("-at", "-id"))))


def duplicate_ends(item: WorkItem) -> tuple[int | None, int | None]:
    """An identity item's two trajectories (``(None, None)`` for other stages): from the
    ``duplicate_a``/``duplicate_b`` columns a claim reads with the item, else its duplicate."""
    if not item.duplicate_id:
        return None, None
    if hasattr(item, "duplicate_a"):
        return item.duplicate_a, item.duplicate_b
    return item.duplicate.trajectory_a_id, item.duplicate.trajectory_b_id


def upcoming_of(item: WorkItem) -> dict:
    """What a client needs to fetch an item's first frames ahead (video, shown trajectories), for
    the item a claim would likely give next. Nobody's vote is read."""
    shown = [item.trajectory_id, *duplicate_ends(item)]
    return {"item": item.pk, "stage": item.stage, "video": item.video_id,
            "trajectories": [t for t in shown if t is not None]}
