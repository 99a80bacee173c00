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
def index_path(folder: Path) -> Path:
    return Path(folder) / INDEX
