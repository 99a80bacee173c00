"""Identity (DESIGN 2.4): are two proposed trajectories of a video the same object? Decided like
usability, except for a judgment reopened by a consolidation conflict (its ``same`` would join a
confirmed ``different`` pair, ``annotation.curation.services.pools``): its panel majority is part of
the contradiction, so after the adjudication that follows the reopening ``decide`` runs over all its
votes, panel and adjudication together in casting order (``annotation.rules.decide_reopened``),
and without a majority it ends unresolved (kept apart and flagged), never back in adjudication."""
from __future__ import annotations

from annotation.curation.labels import IDENTITY
from annotation.curation.stages.base import (
    ReviewStage,
    label_only_check,
    majority_outcome,
    nothing_after_vote,
    nothing_on_closed,
    outcome_state,
    trajectory_target,
)
from annotation.models import Vote, WorkItem
from annotation.rules import decide_reopened

LABELS, DECISIVE = IDENTITY.labels, IDENTITY.decisive
SAME, DIFFERENT, UNCERTAIN = IDENTITY.values
REASONS = (
    "different appearance",
    "seen at once in different places",
    "continues the other after a gap",
    "one of them switches identity",
)


def reopened_outcome(item: WorkItem) -> str:
    """``decide`` over every vote of a reopened item, once an adjudication follows its reopening."""
    votes = list(Vote.objects.filter(item=item).order_by("created_at", "id").values_list("label", flat=True))
    adjudicated = Vote.objects.filter(item=item, is_adjudication=True, created_at__gte=item.reopened_at).exists()
    return decide_reopened(votes, DECISIVE, required=item.required_votes, adjudicated=adjudicated)


def rule(item: WorkItem) -> tuple[str, str]:
    if item.reopened_at is not None:
        return outcome_state(reopened_outcome(item))
    return outcome_state(majority_outcome(item, DECISIVE))


STAGE = ReviewStage(
    name="identity", labels=LABELS, decisive=DECISIVE, reasons=REASONS, panel=3, required=2, from_policy=True,
    check=label_only_check("identity"), after_vote=nothing_after_vote, rule=rule, on_closed=nothing_on_closed,
    read_target=trajectory_target, agreement_panel=3, majority_rule=True,
    accepted=DECISIVE)
