"""The claim's queue index in queue order: (stage, state, video, id) replaces (stage, state, video).

On PostgreSQL both steps run concurrently (``CREATE``/``DROP INDEX CONCURRENTLY``, outside a
transaction), so claims and votes go on while the index is built; elsewhere they are plain."""
from django.db import migrations, models

OLD = models.Index(fields=["stage", "state", "video"], name="work_item_queue")
NEW = models.Index(fields=["stage", "state", "video", "id"], name="work_item_queue_order")


def _swap(schema_editor, model, add: models.Index, drop: models.Index) -> None:
    concurrently = {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}
    schema_editor.add_index(model, add, **concurrently)
    schema_editor.remove_index(model, drop, **concurrently)


def forwards(apps, schema_editor):
    _swap(schema_editor, apps.get_model("annotation", "WorkItem"), NEW, OLD)


def backwards(apps, schema_editor):
    _swap(schema_editor, apps.get_model("annotation", "WorkItem"), OLD, NEW)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("annotation", "0012_description_dissent"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="workitem", name="work_item_queue"),
                migrations.AddIndex(model_name="workitem", index=NEW),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
