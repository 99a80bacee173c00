"""PostgreSQL refuses a ``TRUNCATE`` (alone or through ``CASCADE``) of a table that holds rows the
database protects: votes, relation and audit judgments, frozen pools and their members, sealed
snapshots and their relations, published releases and their files, calibrated pseudo-label rules.
Row triggers never see a truncate. (SQLite has no ``TRUNCATE``; its ``INSERT OR REPLACE`` is refused
by the delete triggers, which ``PRAGMA recursive_triggers`` in the settings makes it fire.)
"""
from django.db import migrations

from common.db_triggers import parent_sealed, truncate_refused

TRIGGERS = (
    truncate_refused("annotation_vote", name="annotation_vote", message="votes are never deleted")
    + truncate_refused("annotation_relationjudgment", name="annotation_judgment",
                       message="relation judgments are never deleted")
    + truncate_refused("annotation_auditjudgment", name="annotation_audit_judgment",
                       message="audit judgments are never deleted")
    + truncate_refused("annotation_candidatepool", name="annotation_pool", protected="t.frozen_at IS NOT NULL",
                       message="a frozen candidate pool cannot change")
    + truncate_refused("annotation_poolmember", name="annotation_pool_member",
                       protected=parent_sealed("annotation_candidatepool", "pool_id", "frozen_at"),
                       message="a frozen candidate pool cannot change")
    + truncate_refused("annotation_relationsnapshot", name="annotation_snapshot", protected="t.sealed_at IS NOT NULL",
                       message="a sealed relation snapshot cannot change")
    + truncate_refused("annotation_snapshotrelation", name="annotation_snapshot_relation",
                       protected=parent_sealed("annotation_relationsnapshot", "snapshot_id", "sealed_at"),
                       message="a sealed relation snapshot cannot change")
    + truncate_refused("annotation_release", name="annotation_release", protected="t.sealed_at IS NOT NULL",
                       message="a published release cannot change")
    + truncate_refused("annotation_releasefile", name="annotation_release_file",
                       protected=parent_sealed("annotation_release", "release_id", "sealed_at"),
                       message="a published release cannot change")
    + truncate_refused("annotation_pseudolabelrule", name="annotation_pseudo_rule",
                       protected="t.calibrated_at IS NOT NULL", message="a calibrated pseudo-label rule cannot change")
)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0008_runs_queued_run")]
    operations = [TRIGGERS.operation()]
