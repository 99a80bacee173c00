"""Work items by state in queue order: (state, video, id) replaces the index on the state alone
(and on PostgreSQL its ``varchar_pattern_ops`` twin, which no query used).

The state-only index gave its rows in no useful order: at a million items PostgreSQL planned a
claim's walk of the queue on it and sorted every open item (400 ms instead of a fraction of one;
``tests/benchmarks/bench_pg_scale.py``), and the adjudication queue sorted its items too. On
PostgreSQL the new index is built and the old ones dropped concurrently (outside a transaction),
so claims and votes go on meanwhile; elsewhere the steps are plain."""
from django.db import migrations, models

NEW = models.Index(fields=["state", "video", "id"], name="work_item_state_order")


def _concurrently(schema_editor) -> dict:
    return {"concurrently": True} if schema_editor.connection.vendor == "postgresql" else {}


def _state_indexes(schema_editor, model) -> list[str]:
    """The indexes on the state column alone (Django's for ``db_index``, and its ``_like`` twin)."""
    with schema_editor.connection.cursor() as cursor:
        found = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
    return sorted(name for name, c in found.items()
                  if c["index"] and c["columns"] == ["state"] and not c["unique"] and not c["primary_key"])


def forwards(apps, schema_editor):
    model = apps.get_model("annotation", "WorkItem")
    schema_editor.add_index(model, NEW, **_concurrently(schema_editor))
    concurrently = " CONCURRENTLY" if _concurrently(schema_editor) else ""
    for name in _state_indexes(schema_editor, model):
        schema_editor.execute(f"DROP INDEX{concurrently} IF EXISTS {schema_editor.quote_name(name)}")


def backwards(apps, schema_editor):
    model = apps.get_model("annotation", "WorkItem")
    concurrently = _concurrently(schema_editor)
    name = schema_editor._create_index_name(model._meta.db_table, ["state"])  # what db_index names it
    schema_editor.add_index(model, models.Index(fields=["state"], name=name), **concurrently)
    if schema_editor.connection.vendor == "postgresql":
        like = models.Index(fields=["state"], name=f"{name}_like", opclasses=["varchar_pattern_ops"])
        schema_editor.add_index(model, like, **concurrently)
    schema_editor.remove_index(model, NEW, **concurrently)


class Migration(migrations.Migration):
    atomic = False  # CREATE and DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("annotation", "0015_assignment_latest_by_annotator"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="workitem", name="state",
                    field=models.CharField(choices=[("open", "Open"), ("adjudicate", "Adjudicate"),
                                                    ("decided", "Decided"), ("unresolved", "Unresolved")],
                                           default="open", max_length=16)),
                migrations.AddIndex(model_name="workitem", index=NEW),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
