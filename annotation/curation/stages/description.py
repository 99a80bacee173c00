"""Description (DESIGN 2.6): is a describer's description of a trajectory right?

Panel votes are ``usable``, ``usable_after_minor_correction`` (with the corrected content, stored
as a new version), ``unusable`` or ``uncertain``. Approvals count on exact versions (content
hashes, ``annotation.rules.description_outcome``); corrections without a majority are
consolidated into one final version (``consolidate_corrections``: disagreements become unknown)
that a new round reviews; a round without any majority goes to adjudication. An adjudicator
decides usable, unusable or uncertain: corrections come from the panel. A correction that loses
to the approvals of another version is kept as recorded dissent
(``annotation.benchmark.services.descriptions.description_dissent_record``), which adjudicators
and auditors read.

Every reviewer sees the version under review with the describer's inputs, never another
reviewer's vote; which other versions a reader sees is
``annotation.benchmark.selectors.description_versions_visible``.
"""
from __future__ import annotations

from django.db.models import Max
from rest_framework import serializers

from annotation.benchmark.services.descriptions import (
    description_correction_create,
    description_dissent_record,
)
from annotation.curation.labels import DESCRIPTION
from annotation.curation.stages.base import ReviewStage, nothing_after_vote
from annotation.models import Description, DescriptionVersion, Vote, WorkItem
from annotation.rules import (
    APPROVED,
    CONSOLIDATE,
    MINOR,
    REJECTED,
    consolidate_corrections,
    description_outcome,
)
from common.errors import ApplicationError
from models.facts import Description as DescriptionRecord
from models.facts import Fact

LABELS, DECISIVE = DESCRIPTION.labels, DESCRIPTION.decisive
USABLE, _, UNUSABLE, UNCERTAIN = DESCRIPTION.values
CORRECTED = "corrected"          # the decision of a round whose corrections go to a new round
REASONS = (
    "a fact is wrong",
    "a fact is missing",
    "the evidence frames do not show it",
    "describes another object",
    "the sentences contradict the facts",
)


def _record(content: dict) -> DescriptionRecord:
    return DescriptionRecord(appearance=content["appearance"], motion=content["motion"],
                             facts=[Fact(**f) for f in content["facts"]])


def _check(*, item: WorkItem, annotator, label: str, correction, payload, judgments) -> dict:
    if judgments:
        raise ApplicationError("a description vote carries no relation judgments", code="unexpected_fields")
    if label == MINOR:
        if not isinstance(correction, dict):
            raise ApplicationError("usable_after_minor_correction needs the corrected description", code="correction_required")
        version = description_correction_create(version=item.description, content=correction, created_by=annotator)
        return {"correction": version, "payload": payload or {}}
    if correction is not None:
        raise ApplicationError(f"a {label!r} vote carries no correction; use usable_after_minor_correction",
                               code="unexpected_fields")
    return {"payload": payload or {}}


def _votes(item: WorkItem) -> list[tuple[str, str | None]]:
    rows = Vote.objects.filter(item=item).order_by("created_at", "id").values_list("label", "correction__content_sha256")
    return [(label, sha) for label, sha in rows]


def _round(item: WorkItem) -> int:
    """1 for the model's version, 2 for the consolidated one (which is not consolidated again)."""
    earlier = WorkItem.objects.filter(stage=WorkItem.Stage.DESCRIPTION, pk__lt=item.pk,
                                      description__description_id=item.description.description_id)
    return 2 if earlier.exists() else 1


def _rule(item: WorkItem) -> tuple[str, str]:
    outcome, _ = description_outcome(_votes(item), item.description.content_sha256, required=item.required_votes,
                                     panel=item.panel_size, may_consolidate=_round(item) == 1)
    return {
        "pending": (WorkItem.State.OPEN, ""),
        "adjudicate": (WorkItem.State.ADJUDICATE, ""),
        "unresolved": (WorkItem.State.UNRESOLVED, ""),
        APPROVED: (WorkItem.State.DECIDED, USABLE),
        REJECTED: (WorkItem.State.DECIDED, UNUSABLE),
        CONSOLIDATE: (WorkItem.State.DECIDED, CORRECTED),
    }[outcome]


def _on_closed(item: WorkItem) -> None:
    """Approve, reject, or consolidate the corrections into a new round."""
    version = item.description
    description = Description.objects.select_for_update().get(pk=version.description_id)
    outcome, approved_sha = description_outcome(_votes(item), version.content_sha256, required=item.required_votes,
                                                panel=item.panel_size, may_consolidate=_round(item) == 1)
    if outcome == APPROVED:
        description.approved_version = DescriptionVersion.objects.get(description=description, content_sha256=approved_sha)
        description.status = Description.Status.APPROVED
        description_dissent_record(item=item, approved=description.approved_version)
    elif outcome == REJECTED:
        description.status = Description.Status.REJECTED
    elif outcome == CONSOLIDATE:
        corrections = [v.correction.content for v in Vote.objects.filter(item=item, label=MINOR).select_related("correction")]
        record = _record(consolidate_corrections(version.content, corrections))
        sha = record.content_hash()
        final = DescriptionVersion.objects.filter(description=description, content_sha256=sha).first()
        if final is None:
            number = (DescriptionVersion.objects.filter(description=description).aggregate(n=Max("number"))["n"] or 0) + 1
            final = DescriptionVersion.objects.create(description=description, number=number,
                                                      origin=DescriptionVersion.Origin.CONSOLIDATED, parent=version,
                                                      content=record.to_dict(), content_sha256=sha)
        if WorkItem.objects.filter(stage=WorkItem.Stage.DESCRIPTION, description=final).exists():
            description.status = Description.Status.UNRESOLVED  # nothing new to review
        else:
            WorkItem.objects.create(stage=WorkItem.Stage.DESCRIPTION, video_id=item.video_id,
                                    trajectory_id=item.trajectory_id, description=final, panel_size=item.panel_size,
                                    required_votes=item.required_votes)
    else:
        description.status = Description.Status.UNRESOLVED
    description.save(update_fields=["status", "approved_version"])


class DescriptionTargetSerializer(serializers.Serializer):
    description = serializers.IntegerField()
    version = serializers.IntegerField(help_text="vote on exactly this version")
    number = serializers.IntegerField()
    origin = serializers.CharField(help_text="model, or consolidated for a second round")
    content = serializers.JSONField(help_text="appearance, motion and facts (models.facts.Description)")
    content_sha256 = serializers.CharField()
    inputs = serializers.JSONField(help_text="the crop and marked-frame indices the describer was shown")


def read_target(*, item: WorkItem, viewer, second: bool, suggestions: bool) -> dict:
    """The version under review with the describer's inputs (the crop and marked frames); the same
    for every reader (a description item has no second review and shows no model suggestion)."""
    version = DescriptionVersion.objects.select_related("description").get(pk=item.description_id)
    return {"description": version.description_id, "version": version.pk, "number": version.number,
            "origin": version.origin, "content": version.content, "content_sha256": version.content_sha256,
            "inputs": version.description.inputs}


STAGE = ReviewStage(
    name="description", labels=LABELS, decisive=DECISIVE, reasons=REASONS, panel=3, required=2, from_policy=True,
    check=_check, after_vote=nothing_after_vote, rule=_rule, on_closed=_on_closed, read_target=read_target,
    target_key="description", target_serializer=DescriptionTargetSerializer, agreement_panel=3,
    not_adjudicated=(MINOR,), accepted=(USABLE,))
