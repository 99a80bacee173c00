"""The database refuses to change a locked split group's split (or to unlock it)."""
from django.db import migrations

from common.db_triggers import trigger_operation

POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION trajectories_split_group_locked() RETURNS trigger AS $$
    BEGIN
        IF OLD.locked_at IS NOT NULL AND (NEW.split IS DISTINCT FROM OLD.split OR NEW.locked_at IS NULL) THEN
            RAISE EXCEPTION 'split group "%" is locked to split "%": one of its videos has a proposal run',
                OLD.name, OLD.split USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NEW;
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER trajectories_split_group_lock BEFORE UPDATE ON trajectories_splitgroup
    FOR EACH ROW EXECUTE FUNCTION trajectories_split_group_locked()
    """,
]
SQLITE = [
    """
    CREATE TRIGGER trajectories_split_group_lock BEFORE UPDATE ON trajectories_splitgroup
    FOR EACH ROW WHEN OLD.locked_at IS NOT NULL AND (NEW.split != OLD.split OR NEW.locked_at IS NULL)
    BEGIN
        SELECT RAISE(ABORT, 'split group is locked: one of its videos has a proposal run');
    END
    """,
]
DROP = {
    "postgresql": ["DROP TRIGGER IF EXISTS trajectories_split_group_lock ON trajectories_splitgroup",
                   "DROP FUNCTION IF EXISTS trajectories_split_group_locked()"],
    "sqlite": ["DROP TRIGGER IF EXISTS trajectories_split_group_lock"],
}


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0001_initial")]
    operations = [trigger_operation(create={"postgresql": POSTGRES, "sqlite": SQLITE}, drop=DROP)]
