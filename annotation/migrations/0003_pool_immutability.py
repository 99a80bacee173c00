"""A frozen candidate pool and its members cannot change, in the database itself.

On SQLite, a later migration that alters these tables (SQLite remakes a table to alter it)
must drop these triggers first and create them again afterwards: run this module's operation
backwards and forwards around the change.
"""
from django.db import migrations

from common.db_triggers import trigger_operation

POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION annotation_pool_frozen() RETURNS trigger AS $$
    BEGIN
        IF OLD.frozen_at IS NOT NULL THEN
            RAISE EXCEPTION 'candidate pool % (video %, version %) is frozen and cannot change; fix a tracking defect with a new pool version',
                OLD.id, OLD.video_id, OLD.version USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_pool_frozen BEFORE UPDATE OR DELETE ON annotation_candidatepool
    FOR EACH ROW EXECUTE FUNCTION annotation_pool_frozen()
    """,
    """
    CREATE OR REPLACE FUNCTION annotation_pool_member_frozen() RETURNS trigger AS $$
    DECLARE
        target bigint := CASE WHEN TG_OP = 'DELETE' THEN OLD.pool_id ELSE NEW.pool_id END;
    BEGIN
        IF EXISTS (SELECT 1 FROM annotation_candidatepool p WHERE p.id = target AND p.frozen_at IS NOT NULL)
           OR (TG_OP = 'UPDATE' AND EXISTS (SELECT 1 FROM annotation_candidatepool p
                                            WHERE p.id = OLD.pool_id AND p.frozen_at IS NOT NULL)) THEN
            RAISE EXCEPTION 'candidate pool % is frozen: its members cannot change', target
                USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_pool_member_frozen BEFORE INSERT OR UPDATE OR DELETE ON annotation_poolmember
    FOR EACH ROW EXECUTE FUNCTION annotation_pool_member_frozen()
    """,
]
SQLITE = [
    """
    CREATE TRIGGER annotation_pool_no_update BEFORE UPDATE ON annotation_candidatepool
    WHEN OLD.frozen_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'candidate pool is frozen and cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_pool_no_delete BEFORE DELETE ON annotation_candidatepool
    WHEN OLD.frozen_at IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'candidate pool is frozen and cannot be deleted'); END
    """,
    """
    CREATE TRIGGER annotation_pool_member_no_insert BEFORE INSERT ON annotation_poolmember
    WHEN (SELECT frozen_at FROM annotation_candidatepool WHERE id = NEW.pool_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'candidate pool is frozen: its members cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_pool_member_no_update BEFORE UPDATE ON annotation_poolmember
    WHEN (SELECT frozen_at FROM annotation_candidatepool WHERE id = OLD.pool_id) IS NOT NULL
      OR (SELECT frozen_at FROM annotation_candidatepool WHERE id = NEW.pool_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'candidate pool is frozen: its members cannot change'); END
    """,
    """
    CREATE TRIGGER annotation_pool_member_no_delete BEFORE DELETE ON annotation_poolmember
    WHEN (SELECT frozen_at FROM annotation_candidatepool WHERE id = OLD.pool_id) IS NOT NULL
    BEGIN SELECT RAISE(ABORT, 'candidate pool is frozen: its members cannot change'); END
    """,
]
DROP = {
    "postgresql": [
        "DROP TRIGGER IF EXISTS annotation_pool_frozen ON annotation_candidatepool",
        "DROP FUNCTION IF EXISTS annotation_pool_frozen()",
        "DROP TRIGGER IF EXISTS annotation_pool_member_frozen ON annotation_poolmember",
        "DROP FUNCTION IF EXISTS annotation_pool_member_frozen()",
    ],
    "sqlite": [f"DROP TRIGGER IF EXISTS {name}" for name in (
        "annotation_pool_no_update", "annotation_pool_no_delete", "annotation_pool_member_no_insert",
        "annotation_pool_member_no_update", "annotation_pool_member_no_delete")],
}


class Migration(migrations.Migration):
    dependencies = [("annotation", "0002_policy_and_vote_immutability")]
    operations = [trigger_operation(create={"postgresql": POSTGRES, "sqlite": SQLITE}, drop=DROP)]
