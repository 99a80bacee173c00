"""A locked split group keeps its split against the two writes row triggers miss: PostgreSQL's
``TRUNCATE`` (refused while a group is locked) and SQLite's ``INSERT OR REPLACE`` of a locked group
(its id or name) with another split or unlocked (refused before the insert; the split lock has no
delete trigger for ``recursive_triggers`` to fire)."""
from django.db import migrations

from common.db_triggers import Triggers, truncate_refused

REPLACE = Triggers(
    create={"postgresql": [], "sqlite": [
        """
        CREATE TRIGGER trajectories_split_group_no_replace BEFORE INSERT ON trajectories_splitgroup
        WHEN EXISTS (SELECT 1 FROM trajectories_splitgroup g WHERE (g.id = NEW.id OR g.name = NEW.name)
                     AND g.locked_at IS NOT NULL AND (NEW.split IS NOT g.split OR NEW.locked_at IS NULL))
        BEGIN SELECT RAISE(ABORT, 'split group is locked: one of its videos has a proposal run'); END
        """,
    ]},
    drop={"postgresql": [], "sqlite": ["DROP TRIGGER IF EXISTS trajectories_split_group_no_replace"]},
)
TRIGGERS = REPLACE + truncate_refused(
    "trajectories_splitgroup", name="trajectories_split_group", protected="t.locked_at IS NOT NULL",
    message="a locked split group keeps its split")


class Migration(migrations.Migration):
    dependencies = [("trajectories", "0003_proposal_run_queued_run")]
    operations = [TRIGGERS.operation()]
