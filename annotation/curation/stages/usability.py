"""Usability (DESIGN 2.3): does a proposed trajectory follow one object well enough to be a
benchmark candidate? A panel of the review policy's size votes; ``annotation.rules.decide``
decides with the policy's required votes; a panel without a majority goes to adjudication."""
from __future__ import annotations

from annotation.curation.labels import USABILITY
from annotation.curation.stages.base import (
    ReviewStage,
    label_only_check,
    majority_outcome,
    nothing_after_vote,
    nothing_on_closed,
    outcome_state,
    trajectory_target,
)
from annotation.models import WorkItem

LABELS, DECISIVE = USABILITY.labels, USABILITY.decisive
USABLE, UNUSABLE, UNCERTAIN = USABILITY.values
REASONS = (
    "switches to another object",
    "box drifts off the object",
    "box much too large or small",
    "not the stated category",
    "too short or mostly occluded",
)


def rule(item: WorkItem) -> tuple[str, str]:
    return outcome_state(majority_outcome(item, DECISIVE))


STAGE = ReviewStage(
    name="usability", labels=LABELS, decisive=DECISIVE, reasons=REASONS, panel=3, required=2, from_policy=True,
    check=label_only_check("usability"), after_vote=nothing_after_vote, rule=rule, on_closed=nothing_on_closed,
    read_target=trajectory_target, agreement_panel=3, majority_rule=True,
    accepted=(USABLE,))
