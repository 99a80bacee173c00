"""The streaming writer of a release folder (layout in :mod:`annotation.releases.services.release_io`).

Memory stays bounded whatever the release's size: table rows are streamed from the database in key
order (server-side cursors on PostgreSQL) and written a row at a time to JSON Lines and in row
groups of ``ROW_GROUP`` rows to Parquet; MOT files are written one video at a time; files are
hashed in blocks. The output is a pure function of the records and of :class:`ReleaseMeta`: the
same records give the same bytes (keys sorted, fixed row groups, timestamps from the release row).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings

from annotation.models import CandidatePool, PoolMember
from annotation.releases.services.release_io.metadata import croissant_metadata, dataset_card
from annotation.releases.services.release_io.statistics import release_statistics
from annotation.releases.services.release_io.tables import (
    TABLES,
    ReleaseScope,
    Table,
    canonical_json,
)
from trajectories.models import Video

FORMAT = "trajlab-release/1"
ROW_GROUP = 50_000                               # rows per Parquet row group at most
ROW_GROUP_VALUES = 4_000_000                     # list elements (4 or 8 bytes each) per row group at most
HASH_BLOCK = 1 << 20
CHECKSUMS = "SHA256SUMS"
INDEX = "index/records.tsv"
INDEX_HASH_CHARS = 32                            # 128 bits of a record's SHA-256 name it in diffs


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


LIST_DTYPES = {"int32s": "<i4", "float32s": "<f4", "boxes": "<f4", "ids": "<i8"}


class _TableWriter:
    """One table to ``data/<name>.jsonl`` and ``data/<name>.parquet``, and its records to the index.

    A row goes to JSON Lines at once; for Parquet its scalars are buffered as Python values and its
    lists as compact numpy arrays, written as one row group every ``ROW_GROUP`` rows or
    ``ROW_GROUP_VALUES`` list elements, whichever comes first (both depend on the data only, so the
    same records give the same row groups).
    """

    def __init__(self, folder: Path, table: Table, index):
        self.table = table
        self.index = index
        self.rows = 0
        self.schema = table.schema()
        self.json_columns = [c.kind == "json" for c in table.columns]
        self.list_kinds = [c.kind if c.kind in LIST_DTYPES else None for c in table.columns]
        self.values = 0
        self.key_at = [table.names.index(k) for k in table.key]
        self.buffers: list[list] = [[] for _ in table.columns]
        self.jsonl = open(folder / "data" / f"{table.name}.jsonl", "wb", buffering=HASH_BLOCK)
        self.parquet = pq.ParquetWriter(folder / "data" / f"{table.name}.parquet", self.schema, compression="zstd")

    def add(self, values: tuple) -> None:
        line = canonical_json(dict(zip(self.table.names, values))).encode()
        self.jsonl.write(line + b"\n")
        key = "/".join(str(values[i]) for i in self.key_at)
        self.index.write(f"{self.table.name}\t{key}\t{hashlib.sha256(line).hexdigest()[:INDEX_HASH_CHARS]}\n")
        for buffer, is_json, list_kind, value in zip(self.buffers, self.json_columns, self.list_kinds, values):
            if list_kind is not None:
                array = np.asarray(value if value is not None else [], dtype=LIST_DTYPES[list_kind])
                buffer.append(array)
                self.values += array.size
            else:
                buffer.append(canonical_json(value) if is_json and value is not None else value)
        self.rows += 1
        if len(self.buffers[0]) >= ROW_GROUP or self.values >= ROW_GROUP_VALUES:
            self._flush()

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

    def _flush(self) -> None:
        if not self.buffers[0]:
            return
        arrays = [self._list_array(buffer, kind, f) if kind is not None else pa.array(buffer, type=f.type)
                  for buffer, kind, f in zip(self.buffers, self.list_kinds, self.schema)]
        self.parquet.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.buffers = [[] for _ in self.table.columns]
        self.values = 0

    def close(self) -> int:
        self._flush()
        self.parquet.close()
        self.jsonl.close()
        return self.rows


def _write_mot(folder: Path, scope: ReleaseScope) -> int:
    """MOTChallenge ground truth of every released video's current pool: ``gt/gt.txt`` with
    ``frame, id, left, top, width, height, 1, 1, 1`` (frames and pixels 1-based, as MOT counts
    them) sorted by frame then id, and ``seqinfo.ini``. Returns the number of videos written."""
    pools = (CandidatePool.objects.filter(id__in=scope.current_pools).select_related("video__split_group")
             .order_by("video_id"))
    n = 0
    for pool in pools.iterator(chunk_size=200):
        video = pool.video
        base = folder / "mot" / video.split_group.split / str(video.pk)
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


def _copy_media(folder: Path, scope: ReleaseScope) -> None:

    for path in Video.objects.filter(id__in=scope.videos).order_by("id").values_list("path", flat=True):
        source = Path(settings.MEDIA_ROOT) / path
        if not source.is_file():
            raise FileNotFoundError(f"video file {source} is missing; release without media or restore it")
        target = folder / "media" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def _relative_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def release_write(folder: Path, *, meta: ReleaseMeta, scope: ReleaseScope, parent_folder: Path | None = None,
                  progress: Callable[[str], None] | None = None) -> WrittenRelease:
    """Write the release of ``scope`` described by ``meta`` into the empty folder ``folder``."""
    from annotation.releases.services.release_io.check import diff_indexes

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
    with open(folder / INDEX, "w", encoding="utf-8", newline="\n", buffering=HASH_BLOCK) as index:
        for table in TABLES:
            writer = _TableWriter(folder, table, index)
            try:
                for values in scope.rows(table):
                    writer.add(values)
            finally:
                counts[table.name] = writer.close()
            say(f"{table.name}: {counts[table.name]} rows")
    n_mot = _write_mot(folder, scope)
    say(f"MOT ground truth of {n_mot} videos")
    if meta.media_included:
        _copy_media(folder, scope)
        say("media copied")
    stats = release_statistics(scope)
    if meta.withheld == {}:
        del stats["withheld"]
    elif meta.withheld is not None:
        stats["withheld"] = {stage: {k: meta.withheld[stage][k] for k in counts_of}
                             for stage, counts_of in stats["withheld"].items()}
    changes = meta.changes
    if changes is None:
        changes = diff_indexes(parent_folder / INDEX, folder / INDEX, limit=0)["tables"] if parent_folder else {}
    changes = {t.name: changes[t.name] for t in TABLES if t.name in changes}
    tables_meta = {t.name: {"rows": counts[t.name], "key": list(t.key), "doc": t.doc,
                            "files": {"jsonl": f"data/{t.name}.jsonl", "parquet": f"data/{t.name}.parquet"},
                            "columns": [{"name": c.name, "type": c.kind, "ref": c.ref, "doc": c.doc}
                                        for c in t.columns]} for t in TABLES}
    body = {"format": FORMAT, "name": meta.name, "version": meta.version, "description": meta.description,
            "license": meta.license, "splits": list(meta.splits), "created_at": meta.created_at.astimezone(dt.UTC)
            .isoformat(), "parent": parent or None, "media_included": meta.media_included,
            "counts": counts, "changes": changes, "tables": tables_meta, "mot_videos": n_mot}
    if meta.unfinished_audits:                   # only then: a release without it keeps its bytes
        body["unfinished_audits"] = json.loads(canonical_json(meta.unfinished_audits))
    _write_json(folder / "release.json", body)
    _write_json(folder / "construction.json", config)
    _write_json(folder / "statistics.json", stats)
    data_hashes = {path: file_sha256(folder / path) for path in _relative_files(folder) if path.startswith("data/")}
    _write_json(folder / "croissant.json", croissant_metadata(body, data_hashes,
                                                              {p: (folder / p).stat().st_size for p in data_hashes}))
    (folder / "README.md").write_text(dataset_card(body, stats, config), encoding="utf-8")
    files = []
    lines = []
    for path in _relative_files(folder):
        if path == CHECKSUMS:
            continue
        sha = data_hashes.get(path) or file_sha256(folder / path)
        table = path[len("data/"):].rsplit(".", 1)[0] if path.startswith("data/") else None
        files.append(WrittenFile(path, sha, (folder / path).stat().st_size, counts.get(table) if table else None))
        lines.append(f"{sha}  {path}\n")
    (folder / CHECKSUMS).write_text("".join(lines), encoding="utf-8", newline="\n")
    manifest = file_sha256(folder / CHECKSUMS)
    files.append(WrittenFile(CHECKSUMS, manifest, (folder / CHECKSUMS).stat().st_size))
    say(f"{len(files)} files, manifest {manifest[:12]}")
    return WrittenRelease(folder=folder, manifest_sha256=manifest, files=files, counts=counts, stats=stats,
                          changes=changes)


def _write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n", encoding="utf-8",
                    newline="\n")


def make_read_only(folder: Path) -> None:
    """Files become read-only (0444); the SHA-256 manifest is what proves they did not change."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            os.chmod(path, 0o444)
