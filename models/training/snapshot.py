"""The relation-snapshot data format (DESIGN 2.10) that training and evaluation read.

A snapshot is everything a retriever needs about one split, frozen: the videos, the pooled
trajectories (observations in original pixels), the accepted queries with their predicates, and
the verified relations ``(query, trajectory, label)`` with label ``1``, ``0`` or ``-1`` (⊥), each
with its source and mining stratum. Pseudo-labels are tagged (``pseudo=True``) and are training
signal only: evaluation never scores them.

On disk a snapshot is a folder with ``snapshot.json`` (videos, queries, relations, meta) and
``tracks.npz`` (packed observations). :meth:`RelationSnapshotData.content_sha256` hashes the
canonical content, so the same relations give the same hash wherever they were written.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

LABELS = (1, 0, -1)
SOURCES = ("human", "second_review", "adjudicated", "pool", "pseudo", "ground_truth")
STRATA = ("within", "potential_match", "hard_negative", "easy_negative", "random", "completion")


@dataclass
class SnapshotVideo:
    id: int
    path: str                                    # absolute path of the video file (or frame folder)
    width: int
    height: int
    fps: float
    n_frames: int
    pool_version: int = 1                        # the frozen pool version the relations refer to


@dataclass
class SnapshotTrack:
    id: int                                      # trajectory id
    video_id: int
    frames: np.ndarray                           # int32 [N], increasing frame indices
    boxes: np.ndarray                            # float32 [N, 4] xyxy in original pixels


@dataclass
class SnapshotQuery:
    id: int
    video_id: int                                # the video the query was written for
    text: str
    predicates: list[dict] = field(default_factory=list)  # [{"name", "value", "fact_ids"}]
    target_id: int | None = None                 # the trajectory it was written from


@dataclass
class Relation:
    query_id: int
    trajectory_id: int
    label: int                                   # 1 match, 0 mismatch, -1 unknown (⊥)
    source: str = "human"                        # one of SOURCES
    stratum: str = "within"                      # one of STRATA
    pseudo: bool = False                         # an automatic easy negative: training only


@dataclass
class RelationSnapshotData:
    split: str
    videos: list[SnapshotVideo]
    tracks: list[SnapshotTrack]
    queries: list[SnapshotQuery]
    relations: list[Relation]
    meta: dict = field(default_factory=dict)     # how it was built (not part of the content hash)

    # -- validation and views -----------------------------------------------------------------
    def validate(self) -> None:
        """Raise ValueError on dangling ids, bad labels or malformed tracks."""
        video_ids = {v.id for v in self.videos}
        track_ids = set()
        for t in self.tracks:
            if t.video_id not in video_ids:
                raise ValueError(f"track {t.id} refers to unknown video {t.video_id}")
            if t.frames.ndim != 1 or t.boxes.shape != (len(t.frames), 4) or len(t.frames) == 0:
                raise ValueError(f"track {t.id}: frames {t.frames.shape} and boxes {t.boxes.shape} do not match")
            if not np.isfinite(t.boxes).all():
                raise ValueError(f"track {t.id} has non-finite boxes")
            track_ids.add(t.id)
        query_ids = set()
        for q in self.queries:
            if q.video_id not in video_ids:
                raise ValueError(f"query {q.id} refers to unknown video {q.video_id}")
            query_ids.add(q.id)
        seen = set()
        for r in self.relations:
            if r.query_id not in query_ids or r.trajectory_id not in track_ids:
                raise ValueError(f"relation ({r.query_id}, {r.trajectory_id}) refers to an unknown query or trajectory")
            if r.label not in LABELS or r.source not in SOURCES or r.stratum not in STRATA:
                raise ValueError(f"relation ({r.query_id}, {r.trajectory_id}): bad label/source/stratum "
                                 f"{r.label}/{r.source}/{r.stratum}")
            key = (r.query_id, r.trajectory_id)
            if key in seen:
                raise ValueError(f"relation {key} appears twice")
            seen.add(key)

    def matrix(self, *, include_pseudo: bool = True) -> tuple[np.ndarray, list[int], list[int]]:
        """Dense relation matrix int8 [Q, T] (-1 where nothing is recorded), with query and track ids."""
        qids = [q.id for q in self.queries]
        tids = [t.id for t in self.tracks]
        qi = {q: i for i, q in enumerate(qids)}
        ti = {t: i for i, t in enumerate(tids)}
        out = np.full((len(qids), len(tids)), -1, dtype=np.int8)
        for r in self.relations:
            if r.pseudo and not include_pseudo:
                continue
            out[qi[r.query_id], ti[r.trajectory_id]] = r.label
        return out, qids, tids

    def model_inputs(self) -> RelationSnapshotData:
        """The snapshot as a retriever may read it at evaluation and search (DESIGN 4.4): the
        videos, the tracks (observations in original pixels) and each query's id, video and
        text. Predicates, target ids, relations and meta are left out, so nothing a retriever
        computes from this view can depend on the answer key. Arrays are shared, not copied."""
        return RelationSnapshotData(
            split=self.split, videos=list(self.videos), tracks=list(self.tracks),
            queries=[SnapshotQuery(id=q.id, video_id=q.video_id, text=q.text) for q in self.queries],
            relations=[], meta={})

    def counts(self) -> dict:
        """Counts by label, source and stratum, and zero-negative row and column rates."""
        by = {"label": {}, "source": {}, "stratum": {}}
        for r in self.relations:
            by["label"][str(r.label)] = by["label"].get(str(r.label), 0) + 1
            by["source"][r.source] = by["source"].get(r.source, 0) + 1
            by["stratum"][r.stratum] = by["stratum"].get(r.stratum, 0) + 1
        m, _, _ = self.matrix()
        rows = (m == 1).any(axis=1)
        cols = (m == 1).any(axis=0)
        zero_row = float(((m[rows] == 0).sum(axis=1) == 0).mean()) if rows.any() else 0.0
        zero_col = float(((m[:, cols] == 0).sum(axis=0) == 0).mean()) if cols.any() else 0.0
        return {**by, "n_queries": len(self.queries), "n_tracks": len(self.tracks), "n_videos": len(self.videos),
                "n_relations": len(self.relations), "zero_neg_row_rate": zero_row, "zero_neg_col_rate": zero_col}

    # -- storage -------------------------------------------------------------------------------
    def _content(self) -> dict:
        return {
            "split": self.split,
            "videos": [asdict(v) for v in sorted(self.videos, key=lambda v: v.id)],
            "queries": [asdict(q) for q in sorted(self.queries, key=lambda q: q.id)],
            "relations": [asdict(r) for r in sorted(self.relations, key=lambda r: (r.query_id, r.trajectory_id))],
        }

    def content_sha256(self) -> str:
        digest = hashlib.sha256()
        content = self._content()
        for v in content["videos"]:
            v.pop("path")                        # where the file lives is not what it is
        digest.update(json.dumps(content, sort_keys=True, separators=(",", ":")).encode())
        for t in sorted(self.tracks, key=lambda t: t.id):
            digest.update(f"{t.id}:{t.video_id}:".encode())
            digest.update(np.ascontiguousarray(t.frames, dtype="<i4").tobytes())
            digest.update(np.ascontiguousarray(t.boxes, dtype="<f4").tobytes())
        return digest.hexdigest()

    def save(self, folder: str | os.PathLike) -> str:
        """Write the folder (atomically per file); returns the content hash."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        sha = self.content_sha256()
        body = {**self._content(), "meta": self.meta, "content_sha256": sha}
        tmp = folder / "snapshot.json.tmp"
        tmp.write_text(json.dumps(body, sort_keys=True, indent=None, separators=(",", ":")))
        tracks = sorted(self.tracks, key=lambda t: t.id)
        lengths = np.array([len(t.frames) for t in tracks], dtype=np.int64)
        arrays = {
            "ids": np.array([t.id for t in tracks], dtype=np.int64),
            "video_ids": np.array([t.video_id for t in tracks], dtype=np.int64),
            "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            "frames": np.concatenate([t.frames for t in tracks]).astype(np.int32) if tracks else np.zeros(0, np.int32),
            "boxes": (np.concatenate([t.boxes for t in tracks]).astype(np.float32) if tracks
                      else np.zeros((0, 4), np.float32)),
        }
        with open(folder / "tracks.npz.tmp", "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(folder / "tracks.npz.tmp", folder / "tracks.npz")
        os.replace(tmp, folder / "snapshot.json")
        return sha

    @classmethod
    def load(cls, folder: str | os.PathLike, *, verify: bool = True) -> RelationSnapshotData:
        folder = Path(folder)
        body = json.loads((folder / "snapshot.json").read_text())
        with np.load(folder / "tracks.npz") as z:
            ids, vids, offs, frames, boxes = z["ids"], z["video_ids"], z["offsets"], z["frames"], z["boxes"]
        tracks = [SnapshotTrack(int(ids[i]), int(vids[i]), frames[offs[i]:offs[i + 1]], boxes[offs[i]:offs[i + 1]])
                  for i in range(len(ids))]
        snap = cls(split=body["split"], videos=[SnapshotVideo(**v) for v in body["videos"]], tracks=tracks,
                   queries=[SnapshotQuery(**q) for q in body["queries"]],
                   relations=[Relation(**r) for r in body["relations"]], meta=body.get("meta", {}))
        if verify and snap.content_sha256() != body.get("content_sha256"):
            raise ValueError(f"snapshot at {folder} does not match its recorded hash (changed on disk?)")
        return snap
