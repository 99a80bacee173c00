"""One protected row in every table whose rows the database keeps unchanged, made through the ORM
the way the services leave them (written, then frozen, sealed, published, calibrated or locked).

Used in-process on PostgreSQL and in a ``manage.py shell`` on SQLite (tests/common/test_db_triggers.py).
"""
from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from annotation.models import (
    Audit,
    AuditJudgment,
    AuditSample,
    CandidatePool,
    Description,
    DescriptionDissent,
    DescriptionRun,
    DescriptionVersion,
    PoolMember,
    PseudoLabelRule,
    Query,
    RelationJudgment,
    RelationSnapshot,
    Release,
    ReleaseFile,
    ReviewerPseudonym,
    SeatEvent,
    SnapshotRelation,
    Vote,
    WorkItem,
)
from tests.trajectories.factories import proposal, run_factory
from trajectories.models import SplitGroup
from trajectories.services.proposals import trajectories_store

#: table -> a change to one column (SQL over the old row), valid for every constraint but the
#: database's immutability rule; a ``REPLACE`` that makes it must be refused.
CHANGES = {
    "annotation_vote": {"comment": "'replaced'"},
    "annotation_relationjudgment": {"label": "0"},
    "annotation_auditjudgment": {"note": "'replaced'"},
    "annotation_candidatepool": {"reason": "'replaced'"},
    "annotation_poolmember": {"n_removed": "n_removed + 1"},
    "annotation_relationsnapshot": {"name": "'replaced'"},
    "annotation_snapshotrelation": {"stratum": "'replaced'"},
    "annotation_release": {"description": "'replaced'"},
    "annotation_releasefile": {"size_bytes": "size_bytes + 1"},
    "annotation_pseudolabelrule": {"declared_bound": "0.5"},
    "trajectories_splitgroup": {"split": "'test'"},
    "annotation_descriptiondissent": {"created_at": "'2000-01-01 00:00:00'"},
    "annotation_seatevent": {"reason": "'replaced'"},
    "annotation_reviewerpseudonym": {"created_at": "'2000-01-01 00:00:00'"},
}
TABLES = list(CHANGES)


def build() -> dict[str, int]:
    """Make one protected row per table; return ``{table: id}``."""
    now = timezone.now()
    run = run_factory()
    trajectories_store(run=run, proposals=[proposal(1, 0, 10)])
    item = WorkItem.objects.get(stage="usability", trajectory__run=run)
    user = User.objects.create(username="protected-rows")
    vote = Vote.objects.create(item=item, annotator=user, label="usable", client_request_id=uuid.uuid4())
    pool = CandidatePool.objects.create(video=run.video, run=run, version=1)
    member = PoolMember.objects.create(pool=pool, trajectory=item.trajectory, role="single", n_obs=1,
                                       frames=b"\0" * 4, boxes=b"\0" * 16)
    successor = CandidatePool.objects.create(video=run.video, run=run, version=2, supersedes=pool)
    CandidatePool.objects.filter(pk__in=[pool.pk, successor.pk]).update(frozen_at=now)
    SplitGroup.objects.filter(pk=run.video.split_group_id).update(locked_at=now)

    describer = DescriptionRun.objects.create(backend={"name": "fixture"}, prompt_version="fixture",
                                              prompt_sha256="0" * 64, budget={})
    description = Description.objects.create(run=describer, pool=pool, trajectory=item.trajectory,
                                             status=Description.Status.IN_REVIEW, attempts=1)
    version = DescriptionVersion.objects.create(description=description, number=1, origin="model",
                                                content={}, content_sha256="0" * 64)
    query = Query.objects.create(pool=pool, video=run.video, target=item.trajectory, source_version=version,
                                 text="the person", predicates=[], status=Query.Status.IN_REVIEW)
    judgment = RelationJudgment.objects.create(vote=vote, trajectory=item.trajectory, label=1)
    correction = DescriptionVersion.objects.create(description=description, number=2, origin="correction",
                                                   parent=version, content={}, content_sha256="1" * 64)
    description_item = WorkItem.objects.create(stage="description", video=run.video, trajectory=item.trajectory,
                                               description=version, panel_size=3, required_votes=2)
    minor = Vote.objects.create(item=description_item, annotator=user, label="usable_after_minor_correction",
                                correction=correction)
    dissent = DescriptionDissent.objects.create(description=description, item=description_item, vote=minor,
                                                correction=correction, approved_version=version)
    snapshot = RelationSnapshot.objects.create(split="train", content_sha256="0" * 64, path="snapshots/x",
                                               pool_versions={}, counts={}, complete=True)
    relation = SnapshotRelation.objects.create(snapshot=snapshot, query=query, trajectory=item.trajectory, label=1,
                                               source="human", stratum="within")
    RelationSnapshot.objects.filter(pk=snapshot.pk).update(sealed_at=now)
    release = Release.objects.create(name="r", version="1.0.0", license="CC-BY-4.0", splits=["train"],
                                     path="releases/r", manifest_sha256="0" * 64,
                                     created_at=now)
    release_file = ReleaseFile.objects.create(release=release, path="SHA256SUMS", sha256="0" * 64, size_bytes=1)
    Release.objects.filter(pk=release.pk).update(sealed_at=now)
    rule = PseudoLabelRule.objects.create(name="rule", rule={}, rule_sha256="0" * 64, declared_bound=0.05)
    PseudoLabelRule.objects.filter(pk=rule.pk).update(calibrated_at=now)
    audit = Audit.objects.create(split="train", kinds=["query"], n_random=1, n_difficult=0, seed=0)
    sample = AuditSample.objects.create(audit=audit, position=0, stratum="random", kind="query", query=query,
                                        recorded={})
    audit_judgment = AuditJudgment.objects.create(sample=sample, auditor=user, verdict="correct")
    seat_event = SeatEvent.objects.create(item=item, seat=0, kind=SeatEvent.Kind.SKIPPED, holder=user,
                                          held_since=now, reason="unclear")
    pseudonym = ReviewerPseudonym.objects.create(user=user, number=1)
    return {"annotation_vote": vote.pk, "annotation_relationjudgment": judgment.pk,
            "annotation_auditjudgment": audit_judgment.pk, "annotation_candidatepool": successor.pk,
            "annotation_poolmember": member.pk, "annotation_relationsnapshot": snapshot.pk,
            "annotation_snapshotrelation": relation.pk, "annotation_release": release.pk,
            "annotation_releasefile": release_file.pk, "annotation_pseudolabelrule": rule.pk,
            "trajectories_splitgroup": run.video.split_group_id, "annotation_descriptiondissent": dissent.pk,
            "annotation_seatevent": seat_event.pk, "annotation_reviewerpseudonym": pseudonym.pk}


def contents() -> dict[str, list]:
    """Every row of every protected table, as the database holds it."""
    with connection.cursor() as cursor:
        out = {}
        for table in TABLES:
            cursor.execute(f"SELECT * FROM {table} ORDER BY id")
            out[table] = [[bytes(v) if isinstance(v, memoryview) else v for v in row] for row in cursor.fetchall()]
        return out


def replace_sql(table: str, pk: int, change: dict[str, str]) -> str:
    """``INSERT OR REPLACE`` of row ``pk`` with ``change`` applied (SQLite)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {table} LIMIT 0")
        columns = [c[0] for c in cursor.description]
    values = ", ".join(change.get(c, f'"{c}"') for c in columns)
    names = ", ".join(f'"{c}"' for c in columns)
    return f'INSERT OR REPLACE INTO {table} ({names}) SELECT {values} FROM {table} WHERE id = {int(pk)}'
