"""Loading a verified release folder into a fresh instance.

Every imported table is read from its JSON Lines file as a stream and written with its ids,
timestamps and content unchanged, in batches, inside one transaction (a failure leaves nothing).
What the database guards is respected, not bypassed: a pool is written unfrozen, gets its members,
and is frozen afterwards (the frozen-pool triggers refuse members joining a frozen pool); votes and
judgments are inserted, never updated. Derived tables (``facts``, ``benchmark``) are not imported:
exporting again derives them. People become accounts named by their pseudonyms, without a usable
password and without roles. Sequences are moved past the imported ids on PostgreSQL.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.color import no_style
from django.db import connection

from annotation.models import CandidatePool, DescriptionRun, GenerationRun, ReviewerPseudonym
from annotation.releases.services.release_io.check import iter_records
from annotation.releases.services.release_io.tables import TABLES, Table, import_value

BATCH = 1000


@contextlib.contextmanager
def explicit_timestamps(models: list) -> Iterator[None]:
    """Let rows keep the timestamps they carry: ``auto_now``/``auto_now_add`` are switched off on
    ``models`` for the duration (the importer is the only writer it is used by)."""
    saved = []
    for model in models:
        for f in model._meta.concrete_fields:
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False):
                saved.append((f, f.auto_now, f.auto_now_add))
                f.auto_now = f.auto_now_add = False
    try:
        yield
    finally:
        for f, auto_now, auto_now_add in saved:
            f.auto_now, f.auto_now_add = auto_now, auto_now_add


def _reviewers(folder: Path) -> dict[str, int]:
    """Accounts for the release's pseudonyms, each keeping its pseudonym (so a new export names them
    the same)."""
    users = get_user_model()
    out = {}
    for record in iter_records(folder, "reviewers"):
        user = users(username=record["pseudonym"], is_active=False)
        user.set_unusable_password()
        user.save()
        ReviewerPseudonym.objects.create(user=user, number=record["id"])
        out[record["pseudonym"]] = user.pk
    return out


def _table(folder: Path, table: Table, users: dict[str, int]) -> tuple[int, dict[int, object]]:
    """Insert one table; returns its rows and, for pools, {pool id: frozen_at} still to set."""
    model = table.model
    columns = [c for c in table.columns if not c.derived and c.kind != "ids"]
    link = next((c for c in table.columns if c.kind == "ids"), None)
    run_field = f"{model._meta.model_name}_id"
    frozen: dict[int, object] = {}
    rows, links, n = [], [], 0
    with explicit_timestamps([model]):
        for record in iter_records(folder, table.name):
            values = {c.path: import_value(c.kind, record[c.name], users) for c in columns}
            if model is CandidatePool and values.get("frozen_at") is not None:
                frozen[values["id"]] = values.pop("frozen_at")     # frozen once its members are in
            rows.append(model(**values))
            if link is not None:
                links += [model.pools.through(**{run_field: record["id"], "candidatepool_id": pool})
                          for pool in record[link.name]]
            n += 1
            if len(rows) >= BATCH:
                model.objects.bulk_create(rows)
                rows.clear()
        model.objects.bulk_create(rows)
    if links:
        model.pools.through.objects.bulk_create(links, batch_size=BATCH)
    return n, frozen


def import_tables(folder: Path, *, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Write every imported table of ``folder`` (verified by the caller) into the database; run it
    inside a transaction. Returns rows per table."""
    say = progress or (lambda _message: None)
    users = _reviewers(folder)
    counts = {"reviewers": len(users)}
    frozen: dict[int, object] = {}
    for table in TABLES:
        if table.model is None:
            continue
        counts[table.name], pools = _table(folder, table, users)
        frozen |= pools
        if table.name == "pool_members":
            for pk, frozen_at in frozen.items():
                CandidatePool.objects.filter(pk=pk).update(frozen_at=frozen_at)
        say(f"{table.name}: {counts[table.name]} rows")
    models = [t.model for t in TABLES if t.model is not None]
    models += [DescriptionRun.pools.through, GenerationRun.pools.through, get_user_model(), ReviewerPseudonym]
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), models):
            cursor.execute(sql)
    return counts
