"""The review stages, one module each, listed once here in pipeline order.

Each module declares one :class:`~annotation.curation.stages.base.ReviewStage`: its labels,
decisive labels, reasons, panel and required votes, the vote check, the rule, what happens after a
vote and when an item closes, what a reviewer is shown (blinding) and its agreement units. The
vote service, the claim rule, agreement, release statistics and ``GET /api/review/stages/`` read
this registry; nothing registers itself.
"""
from __future__ import annotations

from annotation.curation.stages import description, identity, pair, relation, usability
from annotation.curation.stages.base import ReviewStage
from common.errors import ApplicationError

STAGES: tuple[ReviewStage, ...] = (usability.STAGE, identity.STAGE, description.STAGE, relation.STAGE, pair.STAGE)
STAGE_NAMES: tuple[str, ...] = tuple(s.name for s in STAGES)
BY_NAME: dict[str, ReviewStage] = {s.name: s for s in STAGES}


def stage_get(name: str) -> ReviewStage:
    """The stage called ``name``; 400 ``invalid_stage`` naming the valid stages otherwise."""
    stage = BY_NAME.get(str(name))
    if stage is None:
        raise ApplicationError(f"unknown stage {name!r}; use one of {', '.join(STAGE_NAMES)}", code="invalid_stage",
                               extra={"stages": list(STAGE_NAMES)})
    return stage
