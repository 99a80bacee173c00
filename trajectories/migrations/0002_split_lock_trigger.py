"""The database refuses to change a locked split group's split (or to unlock it)."""
from django.db import migrations

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


def create(apps, schema_editor):
    statements = {"postgresql": POSTGRES, "sqlite": SQLITE}.get(schema_editor.connection.vendor)
    if statements is None:
        raise RuntimeError(f"no split-lock trigger for {schema_editor.connection.vendor}; use PostgreSQL or SQLite")
    for sql in statements:
        schema_editor.execute(sql, params=None)


def drop(apps, schema_editor):
    for sql in DROP.get(schema_editor.connection.vendor, []):
        schema_editor.execute(sql, params=None)


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0001_initial")]
    operations = [migrations.RunPython(create, drop)]
