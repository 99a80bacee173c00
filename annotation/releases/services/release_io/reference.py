"""The obvious release writer, a row at a time: the oracle that :mod:`.export` must match byte for byte.

Each row's export values (:meth:`ReleaseScope.rows <.tables.ReleaseScope.rows>`) become one
``canonical_json`` line and one line of the record index; Parquet columns are buffered as Python
values and written a row group at a time; a MOT file is written a pool and a line at a time. Tests
and the release benchmark run it beside the streaming writer; releases are not written with it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from annotation.models import CandidatePool, PoolMember
from annotation.releases.services.release_io.encode import INDEX_HASH_CHARS, iso_times
from annotation.releases.services.release_io.export import (
    HASH_BLOCK,
    INDEX,
    ROW_GROUP,
    ROW_GROUP_VALUES,
)
from annotation.releases.services.release_io.shapes import shaped
from annotation.releases.services.release_io.splits import (
    REMEMBERED,
    SHARED,
    SPLIT_BY,
    parquet_path,
)
from annotation.releases.services.release_io.tables import TABLES, Column, ReleaseScope, Table
from models.facts import canonical_json

LIST_DTYPES = {"int32s": "<i4", "float32s": "<f4", "boxes": "<f4", "ids": "<i8"}


class RowTableWriter:
    """One table to ``data/<name>.jsonl`` and a Parquet file per part (a split, or ``shared``), and
    its records to the index, a row at a time; a part's row group every ``ROW_GROUP`` rows or
    ``ROW_GROUP_VALUES`` list elements."""

    def __init__(self, folder: Path, table: Table, index):
        self.folder = folder
        self.table = table
        self.index = index
        self.rows = 0
        self.schema = table.schema()
        self.json_columns = [c.kind == "json" and c.shape is None for c in table.columns]
        self.list_kinds = [c.kind if c.kind in LIST_DTYPES else None for c in table.columns]
        self.key_at = [table.names.index(k) for k in table.key]
        self.parts: dict[str, dict] = {}         # part -> {"buffers", "values", "writer"}
        self.jsonl = open(folder / "data" / f"{table.name}.jsonl", "wb", buffering=HASH_BLOCK)

    def add(self, values: tuple, part: str) -> None:
        line = canonical_json(dict(zip(self.table.names, values))).encode()
        self.jsonl.write(line + b"\n")
        key = "/".join(str(values[i]) for i in self.key_at)
        self.index.write(f"{self.table.name}\t{key}\t{hashlib.sha256(line).hexdigest()[:INDEX_HASH_CHARS]}\n")
        if part not in self.parts:
            path = self.folder / parquet_path(self.table.name, part)
            path.parent.mkdir(exist_ok=True)
            self.parts[part] = {"buffers": [[] for _ in self.table.columns], "values": 0,
                                "writer": pq.ParquetWriter(path, self.schema, compression="zstd")}
        held = self.parts[part]
        for buffer, is_json, list_kind, value in zip(held["buffers"], self.json_columns, self.list_kinds, values):
            if list_kind is not None:
                array = np.asarray(value if value is not None else [], dtype=LIST_DTYPES[list_kind])
                if list_kind == "boxes":                 # an empty row is [] too: [0, 4], like the others
                    array = array.reshape(-1, 4)
                buffer.append(array)
                held["values"] += array.size
            else:
                buffer.append(canonical_json(value) if is_json and value is not None else value)
        self.rows += 1
        if len(held["buffers"][0]) >= ROW_GROUP or held["values"] >= ROW_GROUP_VALUES:
            self._flush(held)

    @staticmethod
    def _list_array(arrays: list[np.ndarray], kind: str, field: pa.Field) -> pa.Array:
        lengths = np.fromiter((len(a) for a in arrays), np.int64, len(arrays))             # [R]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)            # [R + 1]
        flat = np.concatenate(arrays) if arrays else np.zeros(0, LIST_DTYPES[kind])
        if kind == "boxes":                                                               # [N, 4] per row
            inner = pa.ListArray.from_arrays(np.arange(0, flat.size + 1, 4, dtype=np.int32),
                                             pa.array(flat.reshape(-1), type=pa.float32()))
            return pa.ListArray.from_arrays(offsets, inner, type=field.type)
        return pa.ListArray.from_arrays(offsets, pa.array(flat, type=field.type.value_type), type=field.type)

    @staticmethod
    def _array(values: list, column: Column, field: pa.Field) -> pa.Array:
        """A buffered column of export values as Parquet holds it."""
        if column.kind == "time":
            return iso_times(pa.array(values, pa.string()))
        if column.shape is not None:
            return shaped(values, column.shape)
        return pa.array(values, type=field.type)

    def _flush(self, held: dict) -> None:
        if not held["buffers"][0]:
            return
        arrays = [self._list_array(buffer, kind, f) if kind is not None else self._array(buffer, column, f)
                  for buffer, kind, column, f in zip(held["buffers"], self.list_kinds, self.table.columns,
                                                     self.schema)]
        held["writer"].write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        held["buffers"] = [[] for _ in self.table.columns]
        held["values"] = 0

    def close(self) -> int:
        for held in self.parts.values():
            self._flush(held)
            held["writer"].close()
        self.jsonl.close()
        return self.rows


def reference_tables_write(folder: Path, scope: ReleaseScope) -> dict[str, int]:
    """Every table's files and the record index into ``folder``, a row at a time; rows per table.
    A row's split is looked up in a dictionary per table, by the rule of :data:`.splits.SPLIT_BY`."""
    folder = Path(folder)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "index").mkdir(exist_ok=True)
    counts = {}
    split_of: dict[str, dict[int, str]] = {name: {} for name in REMEMBERED}
    with open(folder / INDEX, "w", encoding="utf-8", newline="\n", buffering=HASH_BLOCK) as index:
        for table in TABLES:
            writer = RowTableWriter(folder, table, index)
            by = SPLIT_BY.get(table.name)
            at = table.names.index(by.column) if by else None
            id_at = table.names.index("id") if table.name in split_of else None
            try:
                for values in scope.rows(table):
                    part = SHARED if by is None else values[at] if not by.table else split_of[by.table][values[at]]
                    if table.name in split_of:
                        split_of[table.name][values[id_at]] = part
                    writer.add(values, part)
            finally:
                counts[table.name] = writer.close()
    return counts


def reference_mot_write(folder: Path, scope: ReleaseScope) -> int:
    """MOT ground truth of every released video's current pool (layout in ``export._write_mot``), a
    query per pool and a write per line. Returns the number of videos written."""
    pools = (CandidatePool.objects.filter(id__in=scope.current_pools).select_related("video__split_group")
             .order_by("video_id", "id"))
    n = 0
    for pool in pools.iterator(chunk_size=200):
        video = pool.video
        base = Path(folder) / "mot" / video.split_group.split / str(video.pk)
        (base / "gt").mkdir(parents=True, exist_ok=True)
        ids, frames, boxes = [], [], []
        for trajectory, packed_frames, packed_boxes in PoolMember.objects.filter(pool=pool).order_by(
                "trajectory_id").values_list("trajectory_id", "frames", "boxes"):
            f = np.frombuffer(bytes(packed_frames), dtype="<i4")
            ids.append(np.full(len(f), trajectory, np.int64))
            frames.append(f)
            boxes.append(np.frombuffer(bytes(packed_boxes), dtype="<f4").reshape(-1, 4).astype(np.float64))
        with open(base / "gt" / "gt.txt", "w", encoding="ascii", newline="\n") as fh:
            if ids:
                track = np.concatenate(ids)                                       # [N]
                frame = np.concatenate(frames).astype(np.int64)                   # [N]
                box = np.concatenate(boxes)                                       # [N, 4]
                order = np.lexsort((track, frame))
                xywh = np.stack([box[:, 0] + 1, box[:, 1] + 1, box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]], 1)
                for i in order:
                    x, y, w, h = xywh[i]
                    fh.write(f"{frame[i] + 1},{track[i]},{x:.3f},{y:.3f},{w:.3f},{h:.3f},1,1,1\n")
        (base / "seqinfo.ini").write_text(
            f"[Sequence]\nname={video.pk}\nimDir=img1\nframeRate={video.fps:g}\nseqLength={video.frame_count}\n"
            f"imWidth={video.width}\nimHeight={video.height}\nimExt=.jpg\n", encoding="ascii")
        n += 1
    return n
