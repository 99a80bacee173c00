"""Checking release folders: checksums, references, and the record-level diff of two releases.

All three read files as streams: a checksum is computed in blocks, references are checked against
the key sets of the tables they name (only those), and a diff merges two sorted record indexes.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from annotation.releases.services.release_io.export import (
    CHECKSUMS,
    INDEX,
    _relative_files,
    file_sha256,
)
from annotation.releases.services.release_io.tables import TABLE, TABLES

TABLE_ORDER = {t.name: i for i, t in enumerate(TABLES)}
MAX_EXAMPLES = 20


# -- checksums -------------------------------------------------------------------------------------
def read_checksums(folder: Path) -> dict[str, str]:
    """``SHA256SUMS`` as {path: sha256}; ValueError when it is missing or malformed."""
    sums = Path(folder) / CHECKSUMS
    if not sums.is_file():
        raise ValueError(f"{CHECKSUMS} is missing from {folder}: this is not a release folder")
    listed: dict[str, str] = {}
    for n, line in enumerate(sums.read_text(encoding="utf-8").splitlines(), start=1):
        sha, sep, path = line.partition("  ")
        if not sep or len(sha) != 64 or any(ch not in "0123456789abcdef" for ch in sha):
            raise ValueError(f"{CHECKSUMS} line {n} is not '<sha256>  <path>'")
        if path.startswith("/") or ".." in Path(path).parts:
            raise ValueError(f"{CHECKSUMS} line {n} names a path outside the release: {path}")
        listed[path] = sha
    return listed


def verify_checksums(folder: Path, *, expect_manifest_sha256: str | None = None) -> list[str]:
    """Every problem with the folder's files, in words: a file that does not match its SHA-256, a
    listed file that is missing, a file that is not listed, or a ``SHA256SUMS`` whose own hash is not
    the published one. An empty list means the files are exactly the ones published."""
    folder = Path(folder)
    try:
        listed = read_checksums(folder)
    except ValueError as exc:
        return [str(exc)]
    problems = []
    if expect_manifest_sha256 is not None:
        actual = file_sha256(folder / CHECKSUMS)
        if actual != expect_manifest_sha256:
            problems.append(f"{CHECKSUMS} has SHA-256 {actual}, not the published {expect_manifest_sha256}")
    for path, sha in listed.items():
        target = folder / path
        if not target.is_file():
            problems.append(f"{path} is listed in {CHECKSUMS} but missing")
            continue
        actual = file_sha256(target)
        if actual != sha:
            problems.append(f"{path} does not match its SHA-256 in {CHECKSUMS} (published {sha[:16]}…, "
                            f"found {actual[:16]}…)")
    for path in _relative_files(folder):
        if path != CHECKSUMS and path not in listed:
            problems.append(f"{path} is not listed in {CHECKSUMS}")
    return problems


# -- references ------------------------------------------------------------------------------------
def iter_records(folder: Path, table: str) -> Iterator[dict]:
    with open(Path(folder) / "data" / f"{table}.jsonl", encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _target(ref: str) -> tuple[str, str]:
    table, _, column = ref.partition(".")
    return table, column or TABLE[table].key[0]


def check_references(folder: Path) -> tuple[list[str], dict[str, int]]:
    """Every id in every table that names a record the release does not hold, and the number of
    references checked per table. Reads only the referenced columns of the referenced tables."""
    wanted: dict[str, set[str]] = {}
    for table in TABLES:
        for c in table.columns:
            if c.ref:
                target, column = _target(c.ref)
                wanted.setdefault(target, set()).add(column)
    keys: dict[tuple[str, str], set] = {(t, c): set() for t, columns in wanted.items() for c in columns}
    for target, columns in wanted.items():
        for record in iter_records(folder, target):
            for column in columns:
                keys[(target, column)].add(record[column])
    problems, checked = [], {}
    for table in TABLES:
        refs = [(c, keys[_target(c.ref)]) for c in table.columns if c.ref]
        if not refs:
            continue
        n, bad = 0, 0
        for record in iter_records(folder, table.name):
            for column, known in refs:
                value = record[column.name]
                values = value if isinstance(value, list) else [value]
                for v in values:
                    if v is None:
                        continue
                    n += 1
                    if v not in known:
                        bad += 1
                        if bad <= MAX_EXAMPLES:
                            problems.append(f"{table.name}.{column.name} = {v!r} names no record of {column.ref}")
        if bad > MAX_EXAMPLES:
            problems.append(f"{table.name}: {bad - MAX_EXAMPLES} more unresolved references")
        checked[table.name] = n
    return problems, checked


# -- diffs -----------------------------------------------------------------------------------------
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


def index_path(folder: Path) -> Path:
    return Path(folder) / INDEX
