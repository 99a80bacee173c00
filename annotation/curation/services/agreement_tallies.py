"""The agreement tallies of the panel stages: counted in as votes arrive, read by the agreement page.

A database trigger writes an ``AgreementPending`` row (the vote and its item) for every vote
inserted. :func:`agreement_tallies_refresh` takes the pending rows, reads every vote of their
items, and adds to the tallies of each item's stage and split its sums with the new votes less its
sums without them (``models.curation.agreement_sums``): votes are never edited or deleted, so
an item's counted votes are its votes less the pending ones. A vote whose pending row is still
there when its item's votes are read (its transaction committed in between) is left out of both
sides and counted by the next refresh. Refreshes run one at a time (a transaction-scoped advisory
lock on PostgreSQL; SQLite has one writer).

:func:`tallied_agreement_report` rebuilds ``agreement_report``'s figures of a stage (one split or
all) from the tallies. The single-review stages (relation rows, pairs) are not tallied: their
dispute rate and audit agreement are read from their votes
(``annotation.curation.services.agreement_review``).
"""
from __future__ import annotations

import numpy as np
from django.db import connection, transaction
from django.db.models import Case, Exists, IntegerField, OuterRef, Value, When
from django.db.models.functions import Cast, Coalesce

from annotation.curation.services.agreement_review import single_review
from annotation.curation.stages import STAGES
from annotation.curation.stages.base import ReviewStage
from annotation.models import AgreementPending, AgreementRaterTally, AgreementTally, Vote, WorkItem
from common.columns import index_of, integer_columns, integer_columns_among
from models.curation.agreement_sums import (
    KINDS,
    RATER_COLUMNS,
    AgreementSums,
    agreement_sums,
    grouped,
    report_from_sums,
)

TALLIED: tuple[ReviewStage, ...] = tuple(s for s in STAGES if not single_review(s))
TALLIED_NAMES: tuple[str, ...] = tuple(s.name for s in TALLIED)
_LABELS: tuple[str, ...] = tuple(dict.fromkeys(label for s in TALLIED for label in s.categories))
_SPLITS: tuple[str, ...] = ("train", "dev", "test", "")
# Pending votes taken per transaction: bounds the memory of a refresh after a bulk load.
BATCH = 2_000_000
_LOCK = 0x61677265  # pg_advisory_xact_lock key of the refresh


def agreement_tallies_refresh(*, batch: int = BATCH) -> int:
    """Count the pending votes into the tallies, ``batch`` at a time (one transaction each);
    returns how many were counted. Locks: the refresh's advisory lock, then the tally rows it
    adds to (``INSERT ... ON CONFLICT DO UPDATE``)."""
    total = 0
    while True:
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK])
            taken, items = _take_pending(batch)
            if taken.size:
                _count_in(taken, np.unique(items))
        total += int(taken.size)
        if taken.size < batch:
            return total


def _take_pending(batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Delete up to ``batch`` pending rows (the oldest); their vote ids and item ids."""
    table = AgreementPending._meta.db_table
    chosen = f"SELECT id FROM {table} ORDER BY id LIMIT %s"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"WITH taken AS (DELETE FROM {table} WHERE id IN ({chosen}) RETURNING vote_id, item_id) "
                           f"SELECT string_agg(int8send(vote_id), ''), string_agg(int8send(item_id), '') FROM taken",
                           [batch])
            return tuple(np.frombuffer(bytes(data or b""), ">i8").astype(np.int64) for data in cursor.fetchone())
        cursor.execute(f"DELETE FROM {table} WHERE id IN ({chosen}) RETURNING vote_id, item_id", [batch])
        rows = np.array(cursor.fetchall(), np.int64).reshape(-1, 2)
        return rows[:, 0].copy(), rows[:, 1].copy()


def _count_in(taken: np.ndarray, items: np.ndarray) -> None:
    """Add the sums of the taken votes' ``items`` (sorted, distinct) with them less without them
    to the tallies of each item's stage and split."""
    pending = Exists(AgreementPending.objects.filter(vote_id=OuterRef("pk")))
    position, vote_id, rater, label, adjudication, ms, stage, split, later = integer_columns_among(
        Vote.objects.filter(item__stage__in=TALLIED_NAMES), "id", "annotator_id", index_of("label", _LABELS),
        Cast("is_adjudication", IntegerField()), Coalesce("time_spent_ms", Value(-1), output_field=IntegerField()),
        index_of("item__stage", TALLIED_NAMES), index_of("item__video__split_group__split", _SPLITS),
        Case(When(pending, then=Value(1)), default=Value(0), output_field=IntegerField()),
        field="item_id", keys=items, parents=WorkItem.objects.filter(pk__in=items.tolist()))
    item = items[position]                                                                 # [V]
    counted = later == 0                                                                   # [V]
    new = np.isin(vote_id, taken)                                                          # [V]
    tallies, rater_rows = [], []
    for s, declared in enumerate(TALLIED):
        lookup = np.array([declared.categories.index(x) if x in declared.categories else -1 for x in _LABELS] + [-1])
        for p, split_name in enumerate(_SPLITS):
            here = counted & (stage == s) & (split == p)                                   # [V]
            if not (here & new).any():
                continue
            votes = (item, rater, lookup[label], adjudication == 1, ms)                     # category -1: another stage's
            n_categories = len(declared.categories)
            delta = agreement_sums(*(c[here] for c in votes), n_categories).minus(
                agreement_sums(*(c[here & ~new] for c in votes), n_categories))
            for kind in KINDS:
                keys, n = delta.histograms[kind]
                tallies += [(declared.name, split_name, kind, key, dn) for key, dn in zip(keys.tolist(), n.tolist())
                            if dn]
            rater_rows += [(declared.name, split_name, r, *row) for r, row in
                           zip(delta.raters.tolist(), delta.rater_table.tolist()) if any(row)]
    _add(AgreementTally._meta.db_table, ("stage", "split", "kind", "key"), ("n",), tallies)
    _add(AgreementRaterTally._meta.db_table, ("stage", "split", "annotator_id"), RATER_COLUMNS, rater_rows)


def _add(table: str, keys: tuple[str, ...], counters: tuple[str, ...], rows: list[tuple]) -> None:
    """Add ``rows`` (keys, then counters) to ``table``'s counters, inserting missing rows; in key
    order, so two writers lock rows in one order. On PostgreSQL one statement over arrays."""
    if not rows:
        return
    rows = sorted(rows)
    columns = (*keys, *counters)
    added = ", ".join(f"{c} = {table}.{c} + EXCLUDED.{c}" for c in counters)
    conflict = f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {added}"
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            types = ["text" if isinstance(v, str) else "bigint" for v in rows[0]]
            arrays = ", ".join(f"%s::{t}[]" for t in types)
            cursor.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM unnest({arrays}) {conflict}",
                           [list(column) for column in zip(*rows)])
        else:
            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) "
                               f"VALUES ({', '.join(['%s'] * len(columns))}) {conflict}", rows)


def tallied_agreement_report(*, stage: ReviewStage, split: str | None, panel: int) -> dict | None:
    """``agreement_report``'s figures of the stage's items (in ``split``, or all) from the
    tallies, as of the last refresh; ``None`` without votes."""
    if stage.name not in TALLIED_NAMES:
        raise ValueError(f"the {stage.name} stage is not tallied; its figures are read from its votes")
    rows = AgreementTally.objects.filter(stage=stage.name)
    raters = AgreementRaterTally.objects.filter(stage=stage.name)
    if split:
        rows, raters = rows.filter(split=split), raters.filter(split=split)
    kind, key, n = integer_columns(rows, index_of("kind", KINDS), "key", "n")              # [T] each
    histograms = {}
    for k, name in enumerate(KINDS):   # the splits' bars of one key summed
        histograms[name] = grouped(key[kind == k], n[kind == k])
    if not histograms["counts"][1].sum():
        return None
    rater, *columns = integer_columns(raters, "annotator_id", *RATER_COLUMNS)              # [R'] each
    ids, where = np.unique(rater, return_inverse=True)                                     # [R], [R']
    table = np.zeros((ids.size, len(RATER_COLUMNS)), np.int64)                             # [R, C]
    np.add.at(table, where.reshape(-1), np.stack(columns, axis=1).reshape(-1, len(RATER_COLUMNS)))
    sums = AgreementSums(histograms, ids, table)
    report = report_from_sums(sums, len(stage.categories), stage.categories, panel=panel)
    report["vote_distributions"].pop("combinations", None)  # tuple keys; "detail" says the same in text
    return report
