"""Protected rows hold against the writes that row triggers miss, on every connection:

- SQLite's ``INSERT OR REPLACE`` (and ``UPDATE OR REPLACE``) deletes the row it replaces without its
  delete triggers unless the connection turns on ``recursive_triggers``, which only Django's
  connections do; a trigger before the write refuses it when a protected row has its id or one of
  its unique keys (``common.db_triggers.replace_refused``);
- PostgreSQL's ``TRUNCATE`` of seat events and reviewer pseudonyms is refused, as it is for the
  other protected tables (0009).

On SQLite, a later migration that alters these tables (SQLite remakes a table to alter it) must
drop these triggers first and create them again afterwards: run this module's operation backwards
and forwards around the change.
"""
from django.db import migrations

from common.db_triggers import parent_sealed, replace_refused, truncate_refused

REPLACE = (
    replace_refused("annotation_vote", name="annotation_vote", message="votes are never edited or deleted",
                    keys=[("item_id", "annotator_id"), ("annotator_id", "client_request_id")])
    + replace_refused("annotation_relationjudgment", name="annotation_judgment", keys=[("vote_id", "trajectory_id")],
                      message="relation judgments are part of a vote and are never edited or deleted")
    + replace_refused("annotation_auditjudgment", name="annotation_audit_judgment", keys=[("sample_id",)],
                      message="audit judgments are never edited or deleted")
    + replace_refused("annotation_candidatepool", name="annotation_pool", protected="t.frozen_at IS NOT NULL",
                      keys=[("supersedes_id",), ("video_id", "version")],
                      message="candidate pool is frozen and cannot change")
    + replace_refused("annotation_poolmember", name="annotation_pool_member", keys=[("pool_id", "trajectory_id")],
                      protected=parent_sealed("annotation_candidatepool", "pool_id", "frozen_at"),
                      message="candidate pool is frozen: its members cannot change")
    + replace_refused("annotation_relationsnapshot", name="annotation_snapshot", keys=[],
                      protected="t.sealed_at IS NOT NULL",
                      message="relation snapshot is sealed and cannot change; take a new snapshot")
    + replace_refused("annotation_snapshotrelation", name="annotation_snapshot_relation",
                      keys=[("snapshot_id", "query_id", "trajectory_id")],
                      protected=parent_sealed("annotation_relationsnapshot", "snapshot_id"),
                      message="relation snapshot is sealed: its relations cannot change")
    + replace_refused("annotation_release", name="annotation_release", keys=[("name", "version")],
                      protected="t.sealed_at IS NOT NULL",
                      message="release is published and cannot change; publish a new version")
    + replace_refused("annotation_releasefile", name="annotation_release_file", keys=[("release_id", "path")],
                      protected=parent_sealed("annotation_release", "release_id"),
                      message="release is published: its files cannot change")
    + replace_refused("annotation_pseudolabelrule", name="annotation_pseudo_rule", keys=[("name",)],
                      protected="t.calibrated_at IS NOT NULL",
                      message="pseudo-label rule was calibrated and cannot change; declare a new rule")
    + replace_refused("annotation_descriptiondissent", name="annotation_dissent", keys=[("vote_id",)],
                      message="recorded dissent is a record and never changes")
    + replace_refused("annotation_seatevent", name="annotation_seat_event", keys=[],
                      message="seat events are a record and never change")
    + replace_refused("annotation_reviewerpseudonym", name="annotation_reviewer_pseudonym",
                      keys=[("user_id",), ("number",)], message="reviewer pseudonyms never change")
)
TRUNCATE = (
    truncate_refused("annotation_seatevent", name="annotation_seat_event", message="seat events are never deleted")
    + truncate_refused("annotation_reviewerpseudonym", name="annotation_reviewer_pseudonym",
                       message="reviewer pseudonyms are never deleted")
)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0013_work_item_queue_order")]
    operations = [(REPLACE + TRUNCATE).operation()]
