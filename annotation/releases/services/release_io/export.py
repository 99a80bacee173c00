"""The streaming writer of a release folder (layout in :mod:`annotation.releases.services.release_io`).

Memory stays bounded whatever the release's size: table rows are streamed from the database in key
order (``COPY`` on PostgreSQL, :mod:`.reading`) a chunk at a time as arrow arrays, encoded a column
at a time (:mod:`.encode`) and written to JSON Lines at once and in row groups of ``ROW_GROUP`` rows
to Parquet; MOT files are written one video at a time; files are hashed in blocks. The output is a
pure function of the records and of :class:`ReleaseMeta`: the same records give the same bytes (keys
sorted, fixed row groups, timestamps from the release row), the bytes the row-at-a-time writer of
:mod:`.reference` gives.
"""
from __future__ import annotations

import copy
import datetime as dt
import hashlib
import itertools
import json
import os
import shutil
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.conf import settings

from annotation.models import CandidatePool
from annotation.releases.services.release_io.encode import ChunkEncoder, Packed, mot_texts
from annotation.releases.services.release_io.index_diff import diff_indexes
from annotation.releases.services.release_io.metadata import croissant_metadata, dataset_card
from annotation.releases.services.release_io.plots import agreement_plot, data_plots
from annotation.releases.services.release_io.splits import SplitRouter, parquet_path, parts
from annotation.releases.services.release_io.statistics import release_statistics
from annotation.releases.services.release_io.tables import (
    KINDS,
    TABLE,
    TABLES,
    ReleaseScope,
    Table,
)
from common.columns import any_of
from models.facts import canonical_json
from trajectories.models import Video

# The folder's format, in release.json. 1: Parquet holds JSON columns and times as text. 2: typed
# Parquet (times as timestamps, structured JSON columns in their shapes), a Hugging Face dataset card
# with one config per table, and the datasheet's plots. 3: a Parquet file per table and split
# (``data/<table>/<split>.parquet``, ``shared.parquet`` for tables that serve every split), so that a
# loader reads one split of a table. All are read and verified alike (JSON Lines and SHA256SUMS did
# not change).
FORMAT = "trajlab-release/3"
FORMATS = ("trajlab-release/1", "trajlab-release/2", FORMAT)
ROW_GROUP = 50_000                               # rows per Parquet row group at most
ROW_GROUP_VALUES = 4_000_000                     # list elements (4 or 8 bytes each) per row group at most
HASH_BLOCK = 1 << 20
PENDING_WRITES = 4                               # file writes queued for the background thread at most
MIN_RUN = 16                                     # mean rows per run of one split for a chunk to be sliced
CHECKSUMS = "SHA256SUMS"
INDEX = "index/records.tsv"


@dataclass
class ReleaseMeta:
    """What a release says about itself; kept on the release row so the folder can be written again."""

    name: str                                    # e.g. "text2traj-demo"
    version: str                                 # MAJOR.MINOR.PATCH
    description: str                             # one paragraph for the dataset card
    license: str                                 # an SPDX id or a URL
    splits: list[str]                            # the splits released
    created_at: dt.datetime                      # when it was published (aware)
    parent: dict = field(default_factory=dict)   # {name, version, manifest_sha256} of the parent, or {}
    media_included: bool = False                 # copy the video files into media/
    config: dict = field(default_factory=dict)   # the construction configuration
    changes: dict | None = None                  # against the parent; None: computed from parent_folder
    withheld: dict | None = None                 # stats["withheld"] as published ({}: none, published before
                                                 # it was counted); None: counted here (only the instance
                                                 # that withheld them can count them)
    unfinished_audits: list = field(default_factory=list)  # audits unfinished when it was published anyway


@dataclass
class WrittenFile:
    path: str                                    # relative, POSIX separators
    sha256: str
    size_bytes: int
    rows: int | None = None


@dataclass
class WrittenRelease:
    folder: Path
    manifest_sha256: str                         # SHA-256 of SHA256SUMS
    files: list[WrittenFile]
    counts: dict[str, int]                       # rows per table
    stats: dict
    changes: dict


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


class _Writes:
    """File writes done in order on one background thread, so that compressing Parquet and writing to
    disk (which release the GIL) overlap the encoding of the next chunk; at most ``PENDING_WRITES``
    wait, and a write's failure is raised by the next call."""

    def __init__(self):
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.pending: deque[Future] = deque()

    def submit(self, write: Callable, *args) -> None:
        self.pending.append(self.pool.submit(write, *args))
        while len(self.pending) > PENDING_WRITES or (self.pending and self.pending[0].done()):
            self.pending.popleft().result()

    def wait(self) -> None:
        while self.pending:
            self.pending.popleft().result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)


class _ParquetPart:
    """One Parquet file of a table, ``data/<name>/<part>.parquet`` (a split's rows, or the shared
    ones), opened at its first rows. A chunk's columns are kept as arrow arrays until a row group is
    full, which it is at ``ROW_GROUP`` rows or ``ROW_GROUP_VALUES`` list elements, whichever comes
    first (both depend on the data only, so the same records give the same row groups)."""

    def __init__(self, path: Path, schema: pa.Schema, writes: _Writes):
        self.path = path
        self.schema = schema
        self.writes = writes
        self.writer: pq.ParquetWriter | None = None
        self.rows = 0
        self.pending: list[list[pa.Array]] = []  # arrays of the row group being gathered, a list per piece
        self.pending_rows = 0
        self.pending_values = 0

    def add(self, arrays: list[pa.Array], sizes: np.ndarray) -> None:
        """Take rows (their arrays, and the list elements of each row in ``sizes``)."""
        n = len(sizes)
        if self.writer is None:
            self.path.parent.mkdir(exist_ok=True)
            self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        values = np.cumsum(sizes)                                                          # [R]
        start = 0
        while start < n:
            # the first row at which the group is full, as if rows were added one at a time
            by_rows = start + ROW_GROUP - self.pending_rows - 1
            by_values = int(np.searchsorted(values, ROW_GROUP_VALUES - self.pending_values
                                            + (values[start - 1] if start else 0)))
            stop = min(by_rows, by_values, n - 1) + 1
            self.pending.append([a.slice(start, stop - start) for a in arrays])
            self.pending_rows += stop - start
            self.pending_values += int(values[stop - 1] - (values[start - 1] if start else 0))
            if self.pending_rows >= ROW_GROUP or self.pending_values >= ROW_GROUP_VALUES:
                self._flush()
            start = stop
        self.rows += n

    def _flush(self) -> None:
        if not self.pending:
            return
        columns = [pa.concat_arrays(list(pieces)) for pieces in zip(*self.pending)]
        self.writes.submit(self.writer.write_table, pa.Table.from_arrays(columns, schema=self.schema))
        self.pending, self.pending_rows, self.pending_values = [], 0, 0

    def close(self) -> None:
        """Flush the last row group (the caller waits for the writes, then :meth:`finish`)."""
        if self.writer is not None:
            self._flush()

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.close()


class _TableWriter:
    """One table to ``data/<name>.jsonl``, to a Parquet file per split (and ``shared`` for a table
    whose rows serve every split, :mod:`.splits`), and its records to the index, a chunk of rows at a
    time (:class:`ChunkEncoder` gives the bytes and the values)."""

    def __init__(self, folder: Path, table: Table, index, writes: _Writes, names: list[str]):
        self.table = table
        self.index = index
        self.writes = writes
        self.rows = 0
        self.schema = table.schema()
        self.encoder = ChunkEncoder(table)
        self.parts = {part: _ParquetPart(folder / parquet_path(table.name, part), self.schema, writes)
                      for part in names}                 # the table's parts (.splits.parts), in code order
        self.names = list(self.parts)
        self.jsonl = open(folder / "data" / f"{table.name}.jsonl", "wb", buffering=HASH_BLOCK)

    def add(self, columns: list, codes: np.ndarray | None) -> None:
        """Write a chunk (one sequence per column, as ``ReleaseScope.chunks`` gives it) whose rows are
        of the splits at ``codes`` (None: a shared table)."""
        chunk = self.encoder.encode(columns)
        self.writes.submit(self.jsonl.write, chunk.jsonl)
        self.writes.submit(self.index.write, chunk.index)
        arrays = [self._array(values, f) for values, f in zip(chunk.values, self.schema)]
        sizes = np.asarray(chunk.sizes)                                                    # [R]
        self.rows += chunk.rows
        if codes is None or not chunk.rows:
            if chunk.rows:
                self.parts[self.names[0]].add(arrays, sizes)
            return
        first = int(codes[0])
        if (codes == first).all():                   # the usual chunk: one split's rows
            self.parts[self.names[first]].add(arrays, sizes)
            return
        starts = np.flatnonzero(codes[1:] != codes[:-1]) + 1                               # [runs - 1]
        if (len(starts) + 1) * MIN_RUN <= chunk.rows:
            # runs of one split's rows (a pool's members, a query's row): zero-copy slices, which the
            # row group's concatenation copies once, as it copies every chunk
            bounds = [0, *starts.tolist(), chunk.rows]
            for start, stop in itertools.pairwise(bounds):
                self.parts[self.names[int(codes[start])]].add([a.slice(start, stop - start) for a in arrays],
                                                              sizes[start:stop])
            return
        # rows of the splits interleaved: grouped by split (in their order within each) with one take
        # per column, then a slice per split
        order = np.argsort(codes, kind="stable")                                           # [R]
        arrays = [a.take(pa.array(order)) for a in arrays]
        sizes = sizes[order]
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(self.names)))]).tolist()
        for code, (start, stop) in enumerate(itertools.pairwise(bounds)):
            if stop > start:
                self.parts[self.names[code]].add([a.slice(start, stop - start) for a in arrays], sizes[start:stop])

    @staticmethod
    def _array(values, field: pa.Field) -> pa.Array:
        """A column of a chunk as its Parquet column's arrow array."""
        if isinstance(values, pa.Array):
            return values
        if isinstance(values, Packed):
            offsets = values.offsets.astype(np.int32)                                     # [R + 1]
            if field.type == KINDS["boxes"]:                                               # [N, 4] per row
                inner = pa.ListArray.from_arrays(np.arange(0, values.flat.size + 1, 4, dtype=np.int32),
                                                 pa.array(values.flat, type=pa.float32()))
                return pa.ListArray.from_arrays(offsets // 4, inner, type=field.type)
            return pa.ListArray.from_arrays(offsets, pa.array(values.flat, type=field.type.value_type),
                                            type=field.type)
        return pa.array(values, type=field.type)

    def close(self) -> int:
        for part in self.parts.values():
            part.close()
        self.writes.wait()
        for part in self.parts.values():
            part.finish()
        self.jsonl.close()
        return self.rows

    def written(self) -> dict[str, int]:
        """Rows per Parquet file written (a part without rows has no file)."""
        return {part: p.rows for part, p in self.parts.items() if p.rows}


class _MotWriter:
    """MOTChallenge ground truth of every released video's current pool: ``gt/gt.txt`` with
    ``frame, id, left, top, width, height, 1, 1, 1`` (frames and pixels 1-based, as MOT counts
    them) sorted by frame then id, and ``seqinfo.ini``.

    It is written from the ``pool_members`` chunks as the table streams by (members in pool order,
    then trajectory order), a chunk of pools at a time (:func:`.encode.mot_texts`), each pool's file
    at once; the members of a pool that a chunk leaves unfinished wait for the next chunk."""

    def __init__(self, folder: Path, scope: ReleaseScope, writes: _Writes):
        self.folder = folder
        self.writes = writes
        self.pools = {row[0]: row for row in CandidatePool.objects.filter(any_of("id", scope.current_pools))
                      .values_list("id", "video_id", "video__split_group__split", "video__fps", "video__frame_count",
                                   "video__width", "video__height")}
        self.current = pa.array(sorted(self.pools), pa.int64())
        names = TABLE["pool_members"].names
        self.columns = [names.index(n) for n in ("pool_id", "trajectory_id", "frames", "boxes")]
        self.carry: list[pa.Array] | None = None
        self.written: set[int] = set()

    def add(self, arrays: list[pa.Array]) -> None:
        """Take a chunk of ``pool_members`` (its arrays, in column order)."""
        members = [arrays[i] for i in self.columns]
        keep = pc.is_in(members[0], self.current)
        if keep.false_count:
            members = [m.filter(keep) for m in members]
        if self.carry is not None:
            members = [pa.concat_arrays([c, m]) for c, m in zip(self.carry, members)]
        if not len(members[0]):
            return
        last = pc.equal(members[0], members[0][-1]).to_numpy(zero_copy_only=False)
        done = int(np.argmax(last))                                                         # first of the last pool
        self.carry = [m.slice(done) for m in members]
        if done:
            self._write(mot_texts(*(m.slice(0, done) for m in members)))

    def close(self) -> int:
        """Write what is left (and the files of pools without members); the number of videos written."""
        if self.carry is not None:
            self._write(mot_texts(*self.carry))
        self._write([(pool, b"") for pool in self.pools if pool not in self.written])
        return len(self.pools)

    def _write(self, texts: list[tuple[int, bytes]]) -> None:
        for pool, text in texts:
            self.writes.submit(_write_mot_video, self.folder, self.pools[pool], text)
            self.written.add(pool)


def _write_mot_video(folder: Path, pool: tuple, text: bytes) -> None:
    _, video, split, fps, frame_count, width, height = pool
    base = folder / "mot" / split / str(video)
    (base / "gt").mkdir(parents=True, exist_ok=True)
    (base / "gt" / "gt.txt").write_bytes(text)
    (base / "seqinfo.ini").write_text(
        f"[Sequence]\nname={video}\nimDir=img1\nframeRate={fps:g}\nseqLength={frame_count}\n"
        f"imWidth={width}\nimHeight={height}\nimExt=.jpg\n", encoding="ascii")


def _copy_media(folder: Path, scope: ReleaseScope) -> None:

    for path in Video.objects.filter(any_of("id", scope.videos)).order_by("id").values_list("path", flat=True):
        source = Path(settings.MEDIA_ROOT) / path
        if not source.is_file():
            raise FileNotFoundError(f"video file {source} is missing; release without media or restore it")
        target = folder / "media" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _relative_files(folder: Path) -> list[str]:
    """Every file under ``folder``, as sorted relative POSIX paths."""
    out = []
    for top, _dirs, files in os.walk(folder):
        base = Path(top).relative_to(folder).as_posix()
        out += [name if base == "." else f"{base}/{name}" for name in files]
    return sorted(out)


def release_write(folder: Path, *, meta: ReleaseMeta, scope: ReleaseScope, parent_folder: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> WrittenRelease:
    """Write the release of ``scope`` described by ``meta`` into the empty folder ``folder``."""
    say = progress or (lambda _message: None)
    folder = Path(folder)
    # what the release row keeps comes back from the database with its keys in another order
    config = json.loads(canonical_json(meta.config))
    parent = json.loads(canonical_json(meta.parent or {}))
    if folder.exists() and any(folder.iterdir()):
        raise FileExistsError(f"{folder} is not empty")
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "index").mkdir(exist_ok=True)
    counts: dict[str, int] = {}
    part_rows: dict[str, dict[str, int]] = {}
    router = SplitRouter(scope.splits)
    writes = _Writes()
    try:
        mot = _MotWriter(folder, scope, writes)
        with open(folder / INDEX, "wb", buffering=HASH_BLOCK) as index:
            for table in TABLES:
                writer = _TableWriter(folder, table, index, writes, parts(table.name, scope.splits))
                try:
                    for columns in scope.chunks(table):
                        writer.add(columns, router.codes(table.name, columns))
                        if table.name == "pool_members":
                            mot.add(columns)
                finally:
                    counts[table.name] = writer.close()
                part_rows[table.name] = writer.written()
                say(f"{table.name}: {counts[table.name]} rows")
        n_mot = mot.close()
    finally:
        writes.close()
    say(f"MOT ground truth of {n_mot} videos")
    if meta.media_included:
        _copy_media(folder, scope)
        say("media copied")
    # the files written so far are hashed, and the plots of the records drawn, in threads while the
    # database counts the statistics; the agreement plot is drawn while the metadata files are written
    with ThreadPoolExecutor(max_workers=2) as pool:
        hashing = pool.submit(lambda paths: {path: file_sha256(folder / path) for path in paths},
                              _relative_files(folder))
        drawings = [pool.submit(data_plots, folder)]
        stats = release_statistics(scope)
        drawings.append(pool.submit(agreement_plot, folder, copy.deepcopy(stats)))
        hashes = hashing.result()
        if meta.withheld == {}:
            del stats["withheld"]
        elif meta.withheld is not None:
            stats["withheld"] = {stage: {k: meta.withheld[stage][k] for k in counts_of}
                                 for stage, counts_of in stats["withheld"].items()}
        changes = meta.changes
        if changes is None:
            changes = diff_indexes(parent_folder / INDEX, folder / INDEX, limit=0)["tables"] if parent_folder else {}
        changes = {t.name: changes[t.name] for t in TABLES if t.name in changes}
        tables_meta = {t.name: tables_entry(t, counts[t.name], part_rows[t.name]) for t in TABLES}
        body = {"format": FORMAT, "name": meta.name, "version": meta.version, "description": meta.description,
                "license": meta.license, "splits": list(meta.splits), "created_at": meta.created_at.astimezone(dt.UTC)
                .isoformat(), "parent": parent or None, "media_included": meta.media_included,
                "counts": counts, "changes": changes, "tables": tables_meta, "mot_videos": n_mot}
        if meta.unfinished_audits:                   # only then: a release without it keeps its bytes
            body["unfinished_audits"] = json.loads(canonical_json(meta.unfinished_audits))
        _write_json(folder / "release.json", body)
        _write_json(folder / "construction.json", config)
        _write_json(folder / "statistics.json", stats)
        data_hashes = {path: sha for path, sha in hashes.items() if path.startswith("data/")}
        _write_json(folder / "croissant.json", croissant_metadata(body, data_hashes,
                                                                  {p: (folder / p).stat().st_size for p in data_hashes}))
        (folder / "README.md").write_text(dataset_card(body, stats, config), encoding="utf-8")
        shutil.copyfile(Path(__file__).with_name("evaluate_kit.py"), folder / "evaluate.py")  # the scorer (evaluate_kit)
        for drawing in drawings:
            drawing.result()
    file_rows = {path: rows for meta in tables_meta.values() for path, rows in data_files(meta)}
    files = []
    lines = []
    for path in _relative_files(folder):
        if path == CHECKSUMS:
            continue
        sha = hashes.get(path) or file_sha256(folder / path)
        files.append(WrittenFile(path, sha, (folder / path).stat().st_size, file_rows.get(path)))
        lines.append(f"{sha}  {path}\n")
    (folder / CHECKSUMS).write_text("".join(lines), encoding="utf-8", newline="\n")
    manifest = file_sha256(folder / CHECKSUMS)
    files.append(WrittenFile(CHECKSUMS, manifest, (folder / CHECKSUMS).stat().st_size))
    say(f"{len(files)} files, manifest {manifest[:12]}")
    return WrittenRelease(folder=folder, manifest_sha256=manifest, files=files, counts=counts, stats=stats,
                          changes=changes)


def tables_entry(table: Table, rows: int, part_rows: dict[str, int]) -> dict:
    """A table's entry in ``release.json``: rows, key, files (JSON Lines, and a Parquet file per split
    that has rows, or ``shared``), rows per Parquet file, and its columns."""
    return {"rows": rows, "key": list(table.key), "doc": table.doc,
            "files": {"jsonl": f"data/{table.name}.jsonl",
                      "parquet": {part: parquet_path(table.name, part) for part in part_rows}},
            "split_rows": dict(part_rows),
            "columns": [{"name": c.name, "type": c.kind, "ref": c.ref, "doc": c.doc} for c in table.columns]}


def parquet_files(meta: dict) -> dict[str, str]:
    """A table's Parquet files by part (``release.json``'s table entry): a split or ``shared`` in format
    3; ``all`` for the one file of formats 1 and 2."""
    files = meta["files"]["parquet"]
    return {"all": files} if isinstance(files, str) else files


def data_files(meta: dict) -> list[tuple[str, int]]:
    """A table's data files (JSON Lines, then Parquet) with their rows."""
    parquet = parquet_files(meta)
    rows = meta.get("split_rows") or {"all": meta["rows"]}
    return [(meta["files"]["jsonl"], meta["rows"]), *((path, rows[part]) for part, path in parquet.items())]


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8",
                    newline="\n")


def make_read_only(folder: Path) -> None:
    """Files become read-only (0444); the SHA-256 manifest is what proves they did not change."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            os.chmod(path, 0o444)
