"""The claim's "video of the annotator's latest seat" as an index: (annotator, claimed_at desc, id desc).

Without it a claim sorted every seat the annotator ever held (50,000 seats: 1.7 s per claim at a
million items, ``tests/benchmarks/bench_pg_scale.py``); with it the claim reads one index entry.
On PostgreSQL the index is built concurrently (outside a transaction), so claims and votes go on
meanwhile; elsewhere it is a plain ``CREATE INDEX``."""
from django.db import migrations, models

INDEX = models.Index(fields=["annotator", "-claimed_at", "-id"], name="assignment_latest_by_annotator")


def forwards(apps, schema_editor):
    concurrently = {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}
    schema_editor.add_index(apps.get_model("annotation", "Assignment"), INDEX, **concurrently)


def backwards(apps, schema_editor):
    concurrently = {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}
    schema_editor.remove_index(apps.get_model("annotation", "Assignment"), INDEX, **concurrently)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("annotation", "0014_replace_refused"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="assignment", index=INDEX)],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
