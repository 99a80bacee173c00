"""Rules the database holds for relation records:

- a reviewer's relation judgments are part of their vote: never edited or deleted;
- a sealed relation snapshot and its relations never change (and no relation joins it later);
- a pseudo-label rule cannot change once calibrated (its rule, hash, bound and calibration).

On SQLite, a later migration that alters these tables must drop these triggers first and create
them again afterwards (run this module's operation backwards and forwards around the change).
"""
from django.db import migrations

from common.db_triggers import Triggers, immutable_rows, sealed_children, sealed_rows

# A calibrated pseudo-label rule keeps its rule, hash, bound and calibration.
PSEUDO_RULE = Triggers(
    create={"postgresql": [
    """
    CREATE OR REPLACE FUNCTION annotation_pseudo_rule_frozen() RETURNS trigger AS $$
    BEGIN
        IF OLD.calibrated_at IS NOT NULL AND (TG_OP = 'DELETE'
               OR NEW.rule IS DISTINCT FROM OLD.rule OR NEW.rule_sha256 IS DISTINCT FROM OLD.rule_sha256
               OR NEW.declared_bound IS DISTINCT FROM OLD.declared_bound
               OR NEW.calibration IS DISTINCT FROM OLD.calibration OR NEW.accepted IS DISTINCT FROM OLD.accepted
               OR NEW.calibrated_at IS DISTINCT FROM OLD.calibrated_at) THEN
            RAISE EXCEPTION 'pseudo-label rule % was calibrated and cannot change; declare a new rule', OLD.name
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_pseudo_rule_frozen BEFORE UPDATE OR DELETE ON annotation_pseudolabelrule
    FOR EACH ROW EXECUTE FUNCTION annotation_pseudo_rule_frozen()
    """,
    ], "sqlite": [
    """
    CREATE TRIGGER annotation_pseudo_rule_no_update BEFORE UPDATE ON annotation_pseudolabelrule
    WHEN OLD.calibrated_at IS NOT NULL AND (NEW.rule IS NOT OLD.rule OR NEW.rule_sha256 IS NOT OLD.rule_sha256
        OR NEW.declared_bound IS NOT OLD.declared_bound OR NEW.calibration IS NOT OLD.calibration
        OR NEW.accepted IS NOT OLD.accepted OR NEW.calibrated_at IS NOT OLD.calibrated_at)
    BEGIN SELECT RAISE(ABORT, 'pseudo-label rule was calibrated and cannot change; declare a new rule'); END
    """,
    """
    CREATE TRIGGER annotation_pseudo_rule_no_delete BEFORE DELETE ON annotation_pseudolabelrule
    WHEN OLD.calibrated_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'pseudo-label rule was calibrated and cannot be deleted'); END
    """,
    ]},
    drop={"postgresql": ["DROP TRIGGER IF EXISTS annotation_pseudo_rule_frozen ON annotation_pseudolabelrule",
                         "DROP FUNCTION IF EXISTS annotation_pseudo_rule_frozen()"],
          "sqlite": ["DROP TRIGGER IF EXISTS annotation_pseudo_rule_no_update",
                     "DROP TRIGGER IF EXISTS annotation_pseudo_rule_no_delete"]},
)
TRIGGERS = (
    immutable_rows("annotation_relationjudgment", name="annotation_judgment",
                   message="relation judgments are part of a vote and are never edited or deleted")
    + sealed_rows("annotation_relationsnapshot", name="annotation_snapshot",
                  message="relation snapshot is sealed and cannot change; take a new snapshot")
    + sealed_children("annotation_snapshotrelation", name="annotation_snapshot_relation",
                      parent="annotation_relationsnapshot", fk="snapshot_id",
                      message="relation snapshot is sealed: its relations cannot change")
    + PSEUDO_RULE
)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_relations")]
    operations = [TRIGGERS.operation()]
