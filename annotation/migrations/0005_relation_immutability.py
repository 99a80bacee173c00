"""Rules the database holds for relation records:

- a reviewer's relation judgments are part of their vote: never edited or deleted;
- a sealed relation snapshot and its relations never change (and no relation joins it later);
- a pseudo-label rule cannot change once calibrated (its rule, hash, bound and calibration).

On SQLite, a later migration that alters these tables must drop these triggers first and create
them again afterwards (run this module's operation backwards and forwards around the change).
"""
from django.db import migrations

from common.db_triggers import trigger_operation

POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION annotation_judgment_immutable() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'relation judgments are part of a vote and are never edited or deleted (judgment %)',
            OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_judgment_immutable BEFORE UPDATE OR DELETE ON annotation_relationjudgment
    FOR EACH ROW EXECUTE FUNCTION annotation_judgment_immutable()
    """,
    """
    CREATE OR REPLACE FUNCTION annotation_snapshot_sealed() RETURNS trigger AS $$
    BEGIN
        IF OLD.sealed_at IS NOT NULL THEN
            RAISE EXCEPTION 'relation snapshot % is sealed and cannot change; take a new snapshot', OLD.id
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_snapshot_sealed BEFORE UPDATE OR DELETE ON annotation_relationsnapshot
    FOR EACH ROW EXECUTE FUNCTION annotation_snapshot_sealed()
    """,
    """
    CREATE OR REPLACE FUNCTION annotation_snapshot_relation_sealed() RETURNS trigger AS $$
    DECLARE
        target bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.snapshot_id ELSE NEW.snapshot_id END;
    BEGIN
        IF EXISTS (SELECT 1 FROM annotation_relationsnapshot s WHERE s.id = target AND s.sealed_at IS NOT NULL)
           OR (TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM annotation_relationsnapshot s
                                            WHERE s.id = OLD.snapshot_id AND s.sealed_at IS NOT NULL)) THEN
            RAISE EXCEPTION 'relation snapshot % is sealed: its relations cannot change', target
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_snapshot_relation_sealed BEFORE INSERT OR UPDATE OR DELETE ON annotation_snapshotrelation
    FOR EACH ROW EXECUTE FUNCTION annotation_snapshot_relation_sealed()
    """,
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
]
SQLITE = [
    """
    CREATE TRIGGER annotation_judgment_no_update BEFORE UPDATE ON annotation_relationjudgment
    BEGIN SELECT RAISE(ABORT, 'relation judgments are part of a vote and are never edited'); END
    """,
    """
    CREATE TRIGGER annotation_judgment_no_delete BEFORE DELETE ON annotation_relationjudgment
    BEGIN SELECT RAISE(ABORT, 'relation judgments are part of a vote and are never deleted'); END
    """,
    """
    CREATE TRIGGER annotation_snapshot_no_update BEFORE UPDATE ON annotation_relationsnapshot
    WHEN OLD.sealed_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'relation snapshot is sealed and cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_snapshot_no_delete BEFORE DELETE ON annotation_relationsnapshot
    WHEN OLD.sealed_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'relation snapshot is sealed and cannot be deleted'); END
    """,
    """
    CREATE TRIGGER annotation_snapshot_relation_no_insert BEFORE INSERT ON annotation_snapshotrelation
    WHEN (SELECT sealed_at FROM annotation_relationsnapshot WHERE id = NEW.snapshot_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'relation snapshot is sealed: its relations cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_snapshot_relation_no_update BEFORE UPDATE ON annotation_snapshotrelation
    WHEN (SELECT sealed_at FROM annotation_relationsnapshot WHERE id = OLD.snapshot_id) IS NOT NULL
      OR (SELECT sealed_at FROM annotation_relationsnapshot WHERE id = NEW.snapshot_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'relation snapshot is sealed: its relations cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_snapshot_relation_no_delete BEFORE DELETE ON annotation_snapshotrelation
    WHEN (SELECT sealed_at FROM annotation_relationsnapshot WHERE id = OLD.snapshot_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'relation snapshot is sealed: its relations cannot change'); END
    """,
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
]
DROP = {
    "postgresql": [
        "DROP TRIGGER IF EXISTS annotation_judgment_immutable ON annotation_relationjudgment",
        "DROP FUNCTION IF EXISTS annotation_judgment_immutable()",
        "DROP TRIGGER IF EXISTS annotation_snapshot_sealed ON annotation_relationsnapshot",
        "DROP FUNCTION IF EXISTS annotation_snapshot_sealed()",
        "DROP TRIGGER IF EXISTS annotation_snapshot_relation_sealed ON annotation_snapshotrelation",
        "DROP FUNCTION IF EXISTS annotation_snapshot_relation_sealed()",
        "DROP TRIGGER IF EXISTS annotation_pseudo_rule_frozen ON annotation_pseudolabelrule",
        "DROP FUNCTION IF EXISTS annotation_pseudo_rule_frozen()",
    ],
    "sqlite": [f"DROP TRIGGER IF EXISTS {name}" for name in (
        "annotation_judgment_no_update", "annotation_judgment_no_delete", "annotation_snapshot_no_update",
        "annotation_snapshot_no_delete", "annotation_snapshot_relation_no_insert",
        "annotation_snapshot_relation_no_update", "annotation_snapshot_relation_no_delete",
        "annotation_pseudo_rule_no_update", "annotation_pseudo_rule_no_delete")],
}


class Migration(migrations.Migration):
    dependencies = [("annotation", "0004_relations")]
    operations = [trigger_operation(create={"postgresql": POSTGRES, "sqlite": SQLITE}, drop=DROP)]
