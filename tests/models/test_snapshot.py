"""The relation-snapshot data format: validation, matrix, counts, hashing and tamper detection."""
from __future__ import annotations

import json

import numpy as np
import pytest

from models.training.snapshot import (
    Relation,
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)


def snapshot() -> RelationSnapshotData:
    videos = [SnapshotVideo(1, "/v/1.mp4", 640, 360, 10.0, 50), SnapshotVideo(2, "/v/2.mp4", 640, 360, 10.0, 50)]
    tracks = [SnapshotTrack(t, 1 if t < 20 else 2, np.arange(5, dtype=np.int32),
                            np.tile(np.array([[1, 2, 30, 60]], np.float32), (5, 1)) + t) for t in (10, 11, 20)]
    queries = [SnapshotQuery(100, 1, "red person", [{"name": "upper_colour", "value": "red", "fact_ids": ["f1"]}], 10),
               SnapshotQuery(101, 2, "blue person", [], 20)]
    relations = [Relation(100, 10, 1), Relation(100, 11, 0), Relation(100, 20, 0, stratum="easy_negative"),
                 Relation(101, 20, 1), Relation(101, 10, -1, source="pool", stratum="random"),
                 Relation(101, 11, 0, source="pseudo", stratum="easy_negative", pseudo=True)]
    return RelationSnapshotData("train", videos, tracks, queries, relations, meta={"note": "x"})


def test_round_trip_keeps_content_and_hash(tmp_path):
    snap = snapshot()
    snap.validate()
    sha = snap.save(tmp_path / "s")
    back = RelationSnapshotData.load(tmp_path / "s")
    assert back.content_sha256() == sha
    assert [t.id for t in back.tracks] == [10, 11, 20]
    assert np.array_equal(back.tracks[2].boxes, snap.tracks[2].boxes)
    # the file location is not content; the meta is not content either
    moved = snapshot()
    moved.videos[0].path, moved.meta = "/elsewhere.mp4", {}
    assert moved.content_sha256() == sha


def test_matrix_and_counts():
    snap = snapshot()
    m, qids, tids = snap.matrix()
    assert qids == [100, 101] and tids == [10, 11, 20]
    assert m.tolist() == [[1, 0, 0], [-1, 0, 1]]
    assert snap.matrix(include_pseudo=False)[0].tolist() == [[1, 0, 0], [-1, -1, 1]]
    counts = snap.counts()
    assert counts["label"] == {"1": 2, "0": 3, "-1": 1} and counts["source"]["pseudo"] == 1
    assert counts["zero_neg_row_rate"] == 0.0
    # column 20 has a 1 (query 101) and a 0 (query 100); column 10 has a 1 and a ⊥ only
    assert counts["zero_neg_col_rate"] == pytest.approx(0.5)


def test_a_changed_folder_is_refused(tmp_path):
    snapshot().save(tmp_path / "s")
    body = json.loads((tmp_path / "s" / "snapshot.json").read_text())
    body["relations"][0]["label"] = 0
    (tmp_path / "s" / "snapshot.json").write_text(json.dumps(body))
    with pytest.raises(ValueError, match="does not match its recorded hash"):
        RelationSnapshotData.load(tmp_path / "s")


@pytest.mark.parametrize("break_it, message", [
    (lambda s: s.relations.append(Relation(100, 10, 0)), "appears twice"),
    (lambda s: s.relations.append(Relation(100, 99, 0)), "unknown query or trajectory"),
    (lambda s: s.relations.append(Relation(101, 11, 2)), "bad label"),
    (lambda s: setattr(s.tracks[0], "boxes", s.tracks[0].boxes * np.nan), "non-finite"),
    (lambda s: setattr(s.tracks[0], "video_id", 7), "unknown video"),
])
def test_validation_refuses_broken_snapshots(break_it, message):
    snap = snapshot()
    break_it(snap)
    with pytest.raises(ValueError, match=message):
        snap.validate()
