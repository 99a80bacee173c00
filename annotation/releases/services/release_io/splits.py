"""Which split each row of a release table belongs to (format 3: a Parquet file per table and split).

A row's split is read from one of its columns: a ``split`` column of its own (videos, queries, the
benchmark, mining runs, audits, split groups), or the id of a row of an earlier table whose split it
takes (a trajectory its video's, a vote its review item's, an audit judgment its sample's). Tables
whose rows serve every split (the reviewers, sources, tracker configurations, describer and writer
runs, pseudo-label rules) are *shared*: one file, listed under every split of the dataset card.

Tables are written in :data:`.schema.TABLES` order, so the rows a table's split is read from were
written before it: :class:`SplitRouter` remembers the split of every row that a later table names
(ids in key order, so one ``searchsorted`` finds them) and gives each chunk its split codes (the
split's position in the release's splits).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from annotation.releases.services.release_io.schema import TABLE, TABLES

SHARED = "shared"                                # the part of a table whose rows serve every split


@dataclass(frozen=True)
class SplitBy:
    column: str                                  # the column the split is read from
    table: str = ""                              # the table whose ids it holds ("": it holds the split)


SPLIT_BY: dict[str, SplitBy] = {
    "split_groups": SplitBy("split"),
    "videos": SplitBy("split"),
    "proposal_runs": SplitBy("video_id", "videos"),
    "trajectories": SplitBy("video_id", "videos"),
    "duplicates": SplitBy("video_id", "videos"),
    "pools": SplitBy("video_id", "videos"),
    "pool_members": SplitBy("pool_id", "pools"),
    "descriptions": SplitBy("pool_id", "pools"),
    "description_versions": SplitBy("description_id", "descriptions"),
    "facts": SplitBy("pool_id", "pools"),
    "queries": SplitBy("split"),
    "benchmark": SplitBy("split"),
    "mining_runs": SplitBy("split"),
    "cross_pairs": SplitBy("query_id", "queries"),     # mining pairs queries with a split's own videos
    "work_items": SplitBy("video_id", "videos"),
    "votes": SplitBy("item_id", "work_items"),
    "relation_judgments": SplitBy("vote_id", "votes"),
    "relations": SplitBy("query_id", "queries"),
    "audits": SplitBy("split"),
    "audit_samples": SplitBy("audit_id", "audits"),
    "audit_judgments": SplitBy("sample_id", "audit_samples"),
}
# the tables whose rows' splits a later table reads
REMEMBERED = frozenset(s.table for s in SPLIT_BY.values() if s.table)


def parts(table: str, splits: list[str]) -> list[str]:
    """The parts a table of a release of ``splits`` can have, in file order."""
    return list(splits) if table in SPLIT_BY else [SHARED]


def parquet_path(table: str, part: str) -> str:
    """The relative path of a table's Parquet file of one part (a split, or ``shared``)."""
    return f"data/{table}/{part}.parquet"


def read_parquet(folder: Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """Every row of a table from its Parquet files (format 3) in a release folder, split by split."""
    files = sorted((Path(folder) / "data" / table).glob("*.parquet"))
    if not files:
        empty = TABLE[table].schema().empty_table()
        return empty.select(columns) if columns else empty
    return pa.concat_tables([pq.read_table(f, columns=columns) for f in files])


def _check_order() -> None:
    order = {t.name: i for i, t in enumerate(TABLES)}
    for name, by in SPLIT_BY.items():
        assert by.column in TABLE[name].names, (name, by.column)
        assert not by.table or (order[by.table] < order[name] and TABLE[by.table].key == ("id",)), (name, by)


_check_order()


class SplitRouter:
    """The split codes of a release's rows, a chunk at a time (``None`` for a shared table)."""

    def __init__(self, splits: list[str]):
        self.splits = list(splits)
        self.names = pa.array(self.splits, pa.string())
        self._ids: dict[str, list[np.ndarray]] = {name: [] for name in REMEMBERED}
        self._codes: dict[str, list[np.ndarray]] = {name: [] for name in REMEMBERED}
        self._done: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def codes(self, table: str, columns: list) -> np.ndarray | None:
        """The position in ``splits`` of each row's split ([R] int8), given the chunk's columns in
        the table's column order; ValueError for a row no released split holds."""
        by = SPLIT_BY.get(table)
        if by is None:
            return None
        values = columns[TABLE[table].names.index(by.column)]
        if not isinstance(values, (pa.Array, pa.ChunkedArray)):
            values = pa.array(values)
        if not by.table:
            codes = pc.index_in(values, value_set=self.names)
            if codes.null_count:
                bad = values.filter(pc.is_null(codes))[0].as_py()
                raise ValueError(f"{table}: a row's split {bad!r} is not one of the release's {self.splits}")
            out = codes.to_numpy(zero_copy_only=False).astype(np.int8)
        else:
            out = self._lookup(table, by, values)
        if table in REMEMBERED:
            ids = columns[TABLE[table].names.index("id")]
            ids = ids.to_numpy(zero_copy_only=False) if isinstance(ids, (pa.Array, pa.ChunkedArray)) else \
                np.asarray(ids, np.int64)
            self._ids[table].append(ids.astype(np.int64, copy=False))
            self._codes[table].append(out)
        return out

    def _lookup(self, table: str, by: SplitBy, values) -> np.ndarray:
        if by.table not in self._done:
            ids = np.concatenate(self._ids.pop(by.table) or [np.zeros(0, np.int64)])         # [N], increasing
            codes = np.concatenate(self._codes.pop(by.table) or [np.zeros(0, np.int8)])       # [N]
            self._done[by.table] = (ids, codes)
        ids, codes = self._done[by.table]
        if values.null_count:
            raise ValueError(f"{table}: a row has no {by.column}, so no split")
        wanted = values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)        # [R]
        at = np.minimum(np.searchsorted(ids, wanted), max(len(ids) - 1, 0))                # [R]
        missing = (ids[at] != wanted) if len(ids) else np.ones(len(wanted), bool)
        if missing.any():
            bad = int(wanted[np.flatnonzero(missing)[0]])
            raise ValueError(f"{table}: {by.column} {bad} names no released row of {by.table}, so no split")
        return codes[at]
