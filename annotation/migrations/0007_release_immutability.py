"""Rules the database holds for audits and releases:

- an auditor's judgment is never edited or deleted;
- a sealed release and its file rows never change, and no file row joins a sealed release.

On SQLite, a later migration that alters these tables must drop these triggers first and create
them again afterwards (run this module's operation backwards and forwards around the change).
"""
from django.db import migrations

from common.db_triggers import immutable_rows, sealed_children, sealed_rows

TRIGGERS = (
    immutable_rows("annotation_auditjudgment", name="annotation_audit_judgment",
                   message="audit judgments are never edited or deleted")
    + sealed_rows("annotation_release", name="annotation_release",
                  message="release is published and cannot change; publish a new version")
    + sealed_children("annotation_releasefile", name="annotation_release_file", parent="annotation_release",
                      fk="release_id", message="release is published: its files cannot change")
)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0006_audits_and_releases")]
    operations = [TRIGGERS.operation()]
