"""The review stages, one module each, listed once here in pipeline order.

Each module declares one :class:`~annotation.curation.stages.base.ReviewStage`: its labels,
decisive labels, reasons, panel and required votes, the vote check, the rule, what happens after a
vote and when an item closes, what a reviewer is shown (blinding) and its agreement units. The
vote service, the claim rule, agreement, release statistics and ``GET /api/review/stages/`` read
this registry; nothing registers itself.

:func:`seated_blind` is the one rule of who may not read what while a review runs: every reader of
relations, queries and mined pairs asks it (``annotation.benchmark.selectors``), and the stages
say what each open seat hides.
"""
from __future__ import annotations

from django.db.models import Q

from annotation.curation.stages import description, identity, pair, relation, usability
from annotation.curation.stages.base import CLOSED_STATES, Blind, ReviewStage
from annotation.models import WorkItem
from common.errors import ApplicationError

STAGES: tuple[ReviewStage, ...] = (usability.STAGE, identity.STAGE, description.STAGE, relation.STAGE, pair.STAGE)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
BY_NAME: dict[str, ReviewStage] = {s.name: s for s in STAGES}
BLINDING: tuple[str, ...] = tuple(s.name for s in STAGES if s.blinds is not None)


def stage_get(name: str) -> ReviewStage:
    """The stage called ``name``; 400 ``invalid_stage`` naming the valid stages otherwise."""
    stage = BY_NAME.get(str(name))
    if stage is None:
        raise ApplicationError(f"unknown stage {name!r}; use one of {', '.join(STAGE_NAMES)}", code="invalid_stage",
                               extra={"stages": list(STAGE_NAMES)})
    return stage


def seated_blind(viewer, *, exclude_item_id: int | None = None) -> Blind:
    """What ``viewer`` may not read while they hold or held a seat on an item that is not closed
    (a seat they claimed, one that lapsed, they skipped or a manager released or reassigned, or a
    vote they cast), whatever their roles:
    the union of what each stage's ``blinds`` hides for its items. ``exclude_item_id`` leaves one
    item out (its own review screen is its stage's ``read_target``)."""
    if not getattr(viewer, "is_authenticated", False):
        return Blind()
    seated = (WorkItem.objects.exclude(state__in=CLOSED_STATES)
              .filter(Q(assignments__annotator=viewer) | Q(votes__annotator=viewer)
                      | Q(seat_events__holder=viewer)))
    if exclude_item_id is not None:
        seated = seated.exclude(pk=exclude_item_id)
    by_stage: dict[str, list[int]] = {}
    for name, pk in seated.filter(stage__in=BLINDING).values_list("stage", "pk").distinct():
        by_stage.setdefault(name, []).append(pk)
    blind = Blind()
    for name, item_ids in by_stage.items():
        blind |= BY_NAME[name].blinds(WorkItem.objects.filter(pk__in=item_ids))
    return blind
