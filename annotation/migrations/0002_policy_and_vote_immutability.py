"""The default review policy, and votes the database will not let anyone edit or delete.

On SQLite, a later migration that alters these tables (SQLite remakes a table to alter it)
must drop these triggers first and create them again afterwards: run this module's trigger
operation backwards and forwards around the change.
"""
from django.db import migrations

from common.db_triggers import trigger_operation

POSTGRES = [
    """
    CREATE OR REPLACE FUNCTION annotation_vote_immutable() RETURNS trigger AS $$
    BEGIN
        RAISE EXCEPTION 'votes are never edited or deleted (vote %); record a correction as an adjudication vote',
            OLD.id USING ERRCODE = 'integrity_constraint_violation';
    END
    $$ LANGUAGE plpgsql
    """,
    """
    CREATE TRIGGER annotation_vote_immutable BEFORE UPDATE OR DELETE ON annotation_vote
    FOR EACH ROW EXECUTE FUNCTION annotation_vote_immutable()
    """,
]
SQLITE = [
    """
    CREATE TRIGGER annotation_vote_no_update BEFORE UPDATE ON annotation_vote
    BEGIN SELECT RAISE(ABORT, 'votes are never edited; record a correction as an adjudication vote'); END
    """,
    """
    CREATE TRIGGER annotation_vote_no_delete BEFORE DELETE ON annotation_vote
    BEGIN SELECT RAISE(ABORT, 'votes are never deleted'); END
    """,
]
DROP = {
    "postgresql": ["DROP TRIGGER IF EXISTS annotation_vote_immutable ON annotation_vote",
                   "DROP FUNCTION IF EXISTS annotation_vote_immutable()"],
    "sqlite": ["DROP TRIGGER IF EXISTS annotation_vote_no_update", "DROP TRIGGER IF EXISTS annotation_vote_no_delete"],
}


def default_policy(apps, schema_editor):
    apps.get_model("annotation", "ReviewPolicy").objects.get_or_create(name="default")


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial")]
    operations = [
        migrations.RunPython(default_policy, migrations.RunPython.noop),
        trigger_operation(create={"postgresql": POSTGRES, "sqlite": SQLITE}, drop=DROP),
    ]
