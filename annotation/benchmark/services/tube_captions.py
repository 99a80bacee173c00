"""Captions of annotated tubes as description proposals (issue 14, item 2).

A caption that came with an annotated tube is the source's text, not a verified fact about the
matched proposal: it is proposed like a describer's output (a model-origin version, its
description review item open) and people approve, correct or reject it as they would any
proposal. It never becomes an approved description by itself, and its structured facts start
empty (unknown) until reviewers add them.
"""
from __future__ import annotations

import hashlib
import json

from django.db import transaction

from annotation.benchmark.backends import RunSettings
from annotation.benchmark.services.runs import (
    frozen_pools_check,
    model_run_execute,
    model_run_record,
)
from annotation.curation.services.items import review_policy_get
from annotation.models import (
    CandidatePool,
    Description,
    DescriptionRun,
    DescriptionVersion,
    PoolMember,
    WorkItem,
)
from common.errors import ConflictError
from common.models import RunStatus
from models.facts import parse_description
from trajectories.models import TubeMatchReport
from trajectories.services.tube_matching import raw_positives

BACKEND_NAME = "annotated-tube-captions"


def tube_captions_propose(*, report: TubeMatchReport, pool: CandidatePool, created_by=None) -> dict:
    """Propose the caption of every matched tube as the description of its identity-checked raw
    positive(s) in ``pool`` (members that already have a description keep it). Records a
    description run (backend ``annotated-tube-captions``, the report and captions hashed) and opens
    one description review item per proposal. Returns counts.

    Refused: a pool that is not frozen or was replaced (``frozen_pools_check``), or one of another
    video than the report (409 ``different_videos``).
    """
    frozen_pools_check([pool], purpose="propose captions for")
    if pool.video_id != report.video_id:
        raise ConflictError(f"pool {pool.pk} and report {report.pk} belong to different videos", code="different_videos")
    members = set(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    wanted = [p for p in raw_positives(report) if p["caption"] and p["trajectory"] in members]
    captions = {str(p["trajectory"]): p["caption"] for p in wanted}
    digest = hashlib.sha256(json.dumps(captions, sort_keys=True).encode()).hexdigest()
    settings = RunSettings(backend={"name": BACKEND_NAME, "report": report.pk, "tubes_run": report.tubes_run_id},
                           budget={}, prompt_version="source-captions", prompt_sha256=digest)
    not_in_pool = len([p for p in raw_positives(report) if p["trajectory"] not in members])

    def propose(*, run, reporter) -> dict:
        counts = {"proposed": 0, "kept_existing": 0, "not_in_pool": not_in_pool}
        policy = review_policy_get()
        with transaction.atomic():
            for p in wanted:
                if Description.objects.filter(pool=pool, trajectory_id=p["trajectory"]).exists():
                    counts["kept_existing"] += 1
                    continue
                content = parse_description({"appearance": p["caption"][:1000], "motion": "", "facts": []})
                description = Description.objects.create(
                    run=run, pool=pool, trajectory_id=p["trajectory"], status=Description.Status.IN_REVIEW,
                    raw_outputs=[p["caption"]], attempts=1,
                    inputs={"source": "annotated tube caption", "tube_track_id": p["tube_track_id"],
                            "report": report.pk})
                version = DescriptionVersion.objects.create(
                    description=description, number=1, origin=DescriptionVersion.Origin.MODEL,
                    content=content.to_dict(), content_sha256=content.content_hash())
                WorkItem.objects.create(stage=WorkItem.Stage.DESCRIPTION, video_id=pool.video_id,
                                        trajectory_id=p["trajectory"], description=version,
                                        panel_size=policy.panel_size, required_votes=policy.required_votes)
                counts["proposed"] += 1
            run.stats = counts
            run.save(update_fields=["stats"])
        return counts

    run = model_run_record(model=DescriptionRun, kind="description_run", pools=[pool], settings=settings,
                           created_by=created_by, queue=False)
    run, counts = model_run_execute(run=run, execute=propose)
    if run.status != RunStatus.SUCCEEDED:
        raise ConflictError(f"proposing captions failed: {run.error}", code="captions_failed", extra={"run": run.pk})
    return {**counts, "run": run.pk}
