"""Rules the database holds for audits and releases:

- an auditor's judgment is never edited or deleted;
- a sealed release and its file rows never change, and no file row joins a sealed release.

On SQLite, a later migration that alters these tables must drop these triggers first and create
them again afterwards (run this module's operation backwards and forwards around the change).
"""
from django.db import migrations

from common.db_triggers import trigger_operation

POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION annotation_audit_judgment_immutable() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'audit judgments are never edited or deleted (judgment %)', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_audit_judgment_immutable BEFORE UPDATE OR DELETE ON annotation_auditjudgment
    FOR EACH ROW EXECUTE FUNCTION annotation_audit_judgment_immutable()
    """,
    """
    CREATE OR REPLACE FUNCTION annotation_release_sealed() RETURNS trigger AS $$
    BEGIN
        IF OLD.sealed_at IS NOT NULL THEN
            RAISE EXCEPTION 'release % % is published and cannot change; publish a new version', OLD.name, OLD.version
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_release_sealed BEFORE UPDATE OR DELETE ON annotation_release
    FOR EACH ROW EXECUTE FUNCTION annotation_release_sealed()
    """,
    """
    CREATE OR REPLACE FUNCTION annotation_release_file_sealed() RETURNS trigger AS $$
    DECLARE
        target bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.release_id ELSE NEW.release_id END;
    BEGIN
        IF EXISTS (SELECT 1 FROM annotation_release r WHERE r.id = target AND r.sealed_at IS NOT NULL)
           OR (TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM annotation_release r
                                            WHERE r.id = OLD.release_id AND r.sealed_at IS NOT NULL)) THEN
            RAISE EXCEPTION 'release % is published: its files cannot change', target
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_release_file_sealed BEFORE INSERT OR UPDATE OR DELETE ON annotation_releasefile
    FOR EACH ROW EXECUTE FUNCTION annotation_release_file_sealed()
    """,
]
SQLITE = [
    """
    CREATE TRIGGER annotation_audit_judgment_no_update BEFORE UPDATE ON annotation_auditjudgment
    BEGIN SELECT RAISE(ABORT, 'audit judgments are never edited'); END
    """,
    """
    CREATE TRIGGER annotation_audit_judgment_no_delete BEFORE DELETE ON annotation_auditjudgment
    BEGIN SELECT RAISE(ABORT, 'audit judgments are never deleted'); END
    """,
    """
    CREATE TRIGGER annotation_release_no_update BEFORE UPDATE ON annotation_release
    WHEN OLD.sealed_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'release is published and cannot change; publish a new version'); END
    """,
    """
    CREATE TRIGGER annotation_release_no_delete BEFORE DELETE ON annotation_release
    WHEN OLD.sealed_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'release is published and cannot be deleted'); END
    """,
    """
    CREATE TRIGGER annotation_release_file_no_insert BEFORE INSERT ON annotation_releasefile
    WHEN (SELECT sealed_at FROM annotation_release WHERE id = NEW.release_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'release is published: its files cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_release_file_no_update BEFORE UPDATE ON annotation_releasefile
    WHEN (SELECT sealed_at FROM annotation_release WHERE id = OLD.release_id) IS NOT NULL
      OR (SELECT sealed_at FROM annotation_release WHERE id = NEW.release_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'release is published: its files cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_release_file_no_delete BEFORE DELETE ON annotation_releasefile
    WHEN (SELECT sealed_at FROM annotation_release WHERE id = OLD.release_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'release is published: its files cannot change'); END
    """,
]
DROP = {
    "postgresql": [
        "DROP TRIGGER IF EXISTS annotation_audit_judgment_immutable ON annotation_auditjudgment",
        "DROP FUNCTION IF EXISTS annotation_audit_judgment_immutable()",
        "DROP TRIGGER IF EXISTS annotation_release_sealed ON annotation_release",
        "DROP FUNCTION IF EXISTS annotation_release_sealed()",
        "DROP TRIGGER IF EXISTS annotation_release_file_sealed ON annotation_releasefile",
        "DROP FUNCTION IF EXISTS annotation_release_file_sealed()",
    ],
    "sqlite": [f"DROP TRIGGER IF EXISTS {name}" for name in (
        "annotation_audit_judgment_no_update", "annotation_audit_judgment_no_delete", "annotation_release_no_update",
        "annotation_release_no_delete", "annotation_release_file_no_insert", "annotation_release_file_no_update",
        "annotation_release_file_no_delete")],
}


class Migration(migrations.Migration):
    dependencies = [("annotation", "0006_audits_and_releases")]
    operations = [trigger_operation(create={"postgresql": POSTGRES, "sqlite": SQLITE}, drop=DROP)]
