"""Verified descriptions (DESIGN 2.6): a describer proposes, a panel of three reviews.

A describer run proposes one description per member of the given frozen pools and opens a
``description`` review item on it. Panel votes are ``usable``, ``usable_after_minor_correction``
(with the corrected content), ``unusable`` or ``uncertain``. Approvals count on exact versions
(content hashes, ``annotation.rules.description_outcome``); corrections without a majority are
consolidated into one final version (``consolidate_corrections``: disagreements become unknown)
that a new round reviews; a round without any majority goes to adjudication. The approved
version's known facts are the trajectory's ``D_r^H``.
"""
from __future__ import annotations

import logging

import numpy as np
from django.db import transaction
from django.db.models import Max

from annotation.benchmark import backends
from annotation.benchmark.services.runs import frozen_pools_check, model_run_record
from annotation.curation.services.items import review_policy_get
from annotation.models import (
    CandidatePool,
    Description,
    DescriptionDissent,
    DescriptionRun,
    DescriptionVersion,
    PoolMember,
    Vote,
    WorkItem,
)
from common.errors import ApplicationError
from common.jobs.services import JobReporter
from models.facts import Fact, InvalidOutput, parse_description

logger = logging.getLogger(__name__)


# -- proposing -------------------------------------------------------------------------------------
def description_run_create(*, pools: list[CandidatePool], backend: dict | None = None, budget: dict | None = None,
                           created_by=None, queue: bool = True) -> DescriptionRun:
    """Record a describer run over frozen pools and queue it (``description_run`` job, cpu queue).

    Refused: an empty pool list, a pool that is not frozen, or a backend configuration the backend
    factory rejects (400 ``invalid_backend``).
    """
    frozen_pools_check(pools, purpose="describe")
    return model_run_record(model=DescriptionRun, kind="description_run", pools=pools,
                            settings=backends.describer_settings(backend, budget), created_by=created_by,
                            queue=queue)


def _member_record(member: PoolMember) -> tuple[np.ndarray, np.ndarray]:
    frames = np.frombuffer(bytes(member.frames), dtype="<i4")
    boxes = np.frombuffer(bytes(member.boxes), dtype="<f4").reshape(-1, 4)
    return frames, boxes


def description_run_execute(*, run: DescriptionRun, reporter: JobReporter | None = None) -> dict:
    """Describe every pool member that has no description yet; idempotent (a re-delivered run
    continues where it stopped). Returns counts."""
    describer = backends.build_describer(run.backend, run.budget)
    members = list(PoolMember.objects.filter(pool__in=run.pools.all()).select_related("pool__video")
                   .order_by("pool_id", "trajectory_id"))
    done = set(Description.objects.filter(pool__in=run.pools.all()).values_list("pool_id", "trajectory_id"))
    policy = review_policy_get()
    counts = {"described": 0, "failed": 0, "skipped": len(done)}
    for i, member in enumerate(members):
        if (member.pool_id, member.trajectory_id) in done:
            continue
        video = member.pool.video
        frames, boxes = _member_record(member)
        result = describer.describe(video_path=str(video.abspath), frames=frames, boxes=boxes,
                                    n_frames=video.frame_count, fps=video.fps, trajectory_id=member.trajectory_id)
        if result.prompt_sha256 and (run.prompt_sha256, run.prompt_version) != (result.prompt_sha256,
                                                                               result.prompt_version):
            run.prompt_version, run.prompt_sha256 = result.prompt_version, result.prompt_sha256
            run.save(update_fields=["prompt_version", "prompt_sha256"])
        with transaction.atomic():
            if result.description is None:
                Description.objects.create(run=run, pool=member.pool, trajectory_id=member.trajectory_id,
                                           status=Description.Status.FAILED, failure=result.failure or "no valid output",
                                           raw_outputs=result.raw_outputs, attempts=result.attempts, inputs=result.inputs)
                counts["failed"] += 1
            else:
                description = Description.objects.create(
                    run=run, pool=member.pool, trajectory_id=member.trajectory_id, status=Description.Status.IN_REVIEW,
                    raw_outputs=result.raw_outputs, attempts=result.attempts, inputs=result.inputs)
                content = result.description.to_dict()
                version = DescriptionVersion.objects.create(
                    description=description, number=1, origin=DescriptionVersion.Origin.MODEL, content=content,
                    content_sha256=result.description.content_hash())
                WorkItem.objects.create(stage=WorkItem.Stage.DESCRIPTION, video=video, trajectory_id=member.trajectory_id,
                                        description=version, panel_size=policy.panel_size,
                                        required_votes=policy.required_votes)
                counts["described"] += 1
        if reporter is not None:
            reporter((i + 1) / max(len(members), 1), f"described {i + 1}/{len(members)}")
    run.stats = counts
    run.save(update_fields=["stats"])
    return counts


# -- reviewing -------------------------------------------------------------------------------------
# -- reviewing -------------------------------------------------------------------------------------
def description_correction_create(*, version: DescriptionVersion, content: dict, created_by) -> DescriptionVersion:
    """The version a reviewer's correction makes (or the existing version with the same content).

    The correction must be valid against the schema and the video; it may change values, mark
    facts unknown, remove or add facts, and edit the texts. Refused with 400 ``invalid_correction``.
    """
    description = version.description
    n_frames = description.pool.video.frame_count
    try:
        record = parse_description(content, n_frames=n_frames)
    except InvalidOutput as exc:
        raise ApplicationError(f"the correction is not a valid description: {exc}", code="invalid_correction") from None
    sha = record.content_hash()
    if sha == version.content_sha256:
        raise ApplicationError("the correction changes nothing; vote usable instead", code="invalid_correction")
    existing = DescriptionVersion.objects.filter(description=description, content_sha256=sha).first()
    if existing is not None:
        return existing
    number = (DescriptionVersion.objects.filter(description=description).aggregate(n=Max("number"))["n"] or 0) + 1
    return DescriptionVersion.objects.create(description=description, number=number,
                                             origin=DescriptionVersion.Origin.CORRECTION, parent=version,
                                             content=record.to_dict(), content_sha256=sha, created_by=created_by)



# -- reading ----------------------------------------------------------------------------------------
def description_dissent_record(*, item: WorkItem, approved: DescriptionVersion) -> list[DescriptionDissent]:
    """Keep as recorded dissent every minor correction on ``item`` (a description review item that
    approved ``approved``) whose corrected version is not the one approved: it lost to the plain
    approvals (E.2). Runs inside the vote's transaction with the item row locked (the stage's
    on-closed step), so each correction vote is recorded once; idempotent all the same (a vote
    already recorded is skipped)."""
    if item.stage != WorkItem.Stage.DESCRIPTION:
        raise ValueError(f"dissent is recorded on description items, not {item.stage}")
    losing = (Vote.objects.filter(item=item, label="usable_after_minor_correction", dissent__isnull=True)
              .exclude(correction=approved).order_by("created_at", "id"))
    return [DescriptionDissent.objects.create(description_id=approved.description_id, item=item, vote=vote,
                                              correction_id=vote.correction_id, approved_version=approved)
            for vote in losing]


def approved_facts(description: Description) -> list[Fact]:
    """``D_r^H``: the known facts of the approved version (empty unless approved)."""
    if description.status != Description.Status.APPROVED or description.approved_version is None:
        return []
    return [Fact(**f) for f in description.approved_version.content["facts"] if f.get("known", True)]
