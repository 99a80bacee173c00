"""Identity (DESIGN 2.4): are two proposed trajectories of a video the same object? Decided like
usability, except that a judgment reopened by a consolidation conflict (its ``same`` would join a
confirmed ``different`` pair, ``annotation.curation.services.pools``) is decided by the
adjudication that follows: a panel majority cannot settle it, it is part of the contradiction."""
from __future__ import annotations

from annotation.curation.stages.base import (
    Label,
    ReviewStage,
    label_only_check,
    majority_outcome,
    nothing_after_vote,
    nothing_on_closed,
    outcome_state,
    trajectory_target,
)
from annotation.models import Vote, WorkItem
from annotation.rules import ADJUDICATE, UNRESOLVED

SAME, DIFFERENT, UNCERTAIN = "same", "different", "uncertain"
LABELS = (Label(SAME, "Same object"), Label(DIFFERENT, "Different objects"), Label(UNCERTAIN, "Uncertain"))
DECISIVE = (SAME, DIFFERENT)
REASONS = (
    "different appearance",
    "seen at once in different places",
    "continues the other after a gap",
    "one of them switches identity",
)


def _conflict_outcome(item: WorkItem) -> str:
    later = (Vote.objects.filter(item=item, is_adjudication=True, created_at__gte=item.reopened_at)
             .order_by("-created_at", "-id").values_list("label", flat=True).first())
    if later is None:
        return ADJUDICATE
    return later if later in DECISIVE else UNRESOLVED


def rule(item: WorkItem) -> tuple[str, str]:
    if item.reopened_at is not None:
        return outcome_state(_conflict_outcome(item))
    return outcome_state(majority_outcome(item, DECISIVE))


STAGE = ReviewStage(
    name="identity", labels=LABELS, decisive=DECISIVE, reasons=REASONS, panel=3, required=2, from_policy=True,
    check=label_only_check("identity"), after_vote=nothing_after_vote, rule=rule, on_closed=nothing_on_closed,
    read_target=trajectory_target, agreement_panel=3, majority_rule=True,
    accepted=DECISIVE)
