"""What changed between two releases, read from their record indexes (``index/records.tsv``:
one line per record, its table, key and hash, in table and key order)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from annotation.releases.services.release_io.tables import TABLES

TABLE_ORDER = {t.name: i for i, t in enumerate(TABLES)}


def _key(text: str) -> tuple:
    return tuple(int(part) if part.lstrip("-").isdigit() else part for part in text.split("/"))


def _index_entries(path: Path) -> Iterator[tuple]:
    """(sort key, table, key, hash) of every record, checking that the index is in order."""
    previous = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            table, key, digest = line.rstrip("\n").split("\t")
            order = (TABLE_ORDER.get(table, len(TABLE_ORDER)), table, _key(key))
            if previous is not None and order <= previous:
                raise ValueError(f"{path} is not in table and key order at {table} {key}")
            previous = order
            yield order, table, key, digest


def diff_indexes(old: Path, new: Path, *, limit: int = 100) -> dict:
    """Records added, removed and changed from the release indexed by ``old`` to the one indexed
    by ``new``: counts per table and up to ``limit`` records, in table and key order."""
    tables = {t.name: {"added": 0, "removed": 0, "changed": 0} for t in TABLES}
    records: list[dict] = []
    total = 0

    def note(table: str, key: str, change: str) -> None:
        nonlocal total
        tables.setdefault(table, {"added": 0, "removed": 0, "changed": 0})[change] += 1
        total += 1
        if len(records) < limit:
            records.append({"table": table, "key": key, "change": change})

    a_iter, b_iter = _index_entries(Path(old)), _index_entries(Path(new))
    a, b = next(a_iter, None), next(b_iter, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a[0] < b[0]):
            note(a[1], a[2], "removed")
            a = next(a_iter, None)
        elif a is None or b[0] < a[0]:
            note(b[1], b[2], "added")
            b = next(b_iter, None)
        else:
            if a[3] != b[3]:
                note(a[1], a[2], "changed")
            a, b = next(a_iter, None), next(b_iter, None)
    return {"tables": tables, "records": records, "total": total, "truncated": total > len(records)}
