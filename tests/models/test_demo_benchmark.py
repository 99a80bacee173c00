"""The rendered demo benchmark: snapshots whose tracks, queries and relations follow the ground truth
(checked against the rendered truth and ``models.facts`` directly), unique ids across splits,
fully binary dev/test rows, and the same content for the same seed."""
from __future__ import annotations

import numpy as np
import pytest

from models.demo.benchmark import (
    DemoBenchmarkConfig,
    build_demo_benchmark,
    person_facts,
    split_scenes,
)
from models.facts import Predicate, QueryProposal, check_query, predicates_label
from models.training.snapshot import RelationSnapshotData
from models.world.scene import GroundTruth, gt_path_for

SMALL = {"videos": {"train": 3, "dev": 1, "test": 2}, "include_demo_scenes": False, "width": 192, "height": 108,
         "n_frames": 24}


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    return root, build_demo_benchmark(root, SMALL)


def truth_of(snapshot: RelationSnapshotData) -> dict[int, GroundTruth]:
    return {v.id: GroundTruth.load(gt_path_for(v.path)) for v in snapshot.videos}


def test_tracks_follow_the_visible_ground_truth(bench):
    _, snaps = bench
    for snap in snaps.values():
        truth = truth_of(snap)
        for t in snap.tracks:
            gt = truth[t.video_id]
            # the person whose boxes these are: boxes equal the truth on every observed frame
            matches = [p for p in gt.people if all(p.boxes[f] is not None and np.allclose(p.boxes[f], b)
                                                   for f, b in zip(t.frames.tolist(), t.boxes))]
            assert len(matches) == 1
            person = matches[0]
            assert all(person.visible[f] >= 0.25 for f in t.frames.tolist())
            expected = [f for f in range(gt.n_frames) if person.boxes[f] is not None and person.visible[f] >= 0.25]
            assert t.frames.tolist() == expected                     # every visible frame, nothing interpolated


def test_queries_single_out_their_target_and_relations_follow_the_facts(bench):
    _, snaps = bench
    for split, snap in snaps.items():
        truth = truth_of(snap)
        tracks = {t.id: t for t in snap.tracks}

        def facts_of(tid, tracks=tracks, truth=truth):
            t = tracks[tid]
            gt = truth[t.video_id]
            person = next(p for p in gt.people if p.boxes[int(t.frames[0])] is not None
                          and np.allclose(p.boxes[int(t.frames[0])], t.boxes[0]))
            return person_facts(person), (int(t.frames[0]), int(t.frames[-1]) + 1)

        matrix, _, tids = snap.matrix()
        assert snap.queries, f"{split} has no queries"
        for i, q in enumerate(snap.queries):
            predicates = [Predicate(**p) for p in q.predicates]
            facts, _ = facts_of(q.target_id)
            assert check_query(QueryProposal(q.text, predicates), facts) == []
            own = [j for j, tid in enumerate(tids) if tracks[tid].video_id == q.video_id]
            labels = [int(matrix[i, j]) for j in own]
            assert labels.count(1) == 1 and matrix[i, tids.index(q.target_id)] == 1
            if split != "train":
                assert -1 not in labels                               # dev/test rows are fully binary
            for j, tid in enumerate(tids):
                facts, covered = facts_of(tid)
                assert int(matrix[i, j]) == predicates_label(predicates, facts, covered=covered)
            for p in predicates:                                      # the text says what the predicates say
                assert p.value.split()[-1] in q.text or p.name in ("walks", "stands")
        for r in snap.relations:
            assert r.source == "ground_truth" and not r.pseudo
            same = tracks[r.trajectory_id].video_id == next(q.video_id for q in snap.queries if q.id == r.query_id)
            assert (r.stratum == "within") == same
            if not same:
                assert r.label in (0, 1) and (r.stratum == "potential_match") == (r.label == 1)


def test_ids_are_unique_across_splits_and_snapshots_are_saved(bench):
    root, snaps = bench
    for kind in ("videos", "tracks", "queries"):
        ids = [x.id for s in snaps.values() for x in getattr(s, kind)]
        assert len(ids) == len(set(ids)), kind
    for split, snap in snaps.items():
        loaded = RelationSnapshotData.load(root / "snapshots" / split)
        assert loaded.content_sha256() == snap.content_sha256()
        assert loaded.meta["builder"] == "models.demo_benchmark"
    assert snaps["train"].counts()["n_videos"] == 3 and snaps["test"].counts()["n_videos"] == 2


def test_the_same_seed_gives_the_same_benchmark(bench, tmp_path):
    root, snaps = bench
    again = build_demo_benchmark(root, SMALL, save=False)             # videos reused from the folder
    assert {s: x.content_sha256() for s, x in again.items()} == {s: x.content_sha256() for s, x in snaps.items()}
    other = build_demo_benchmark(tmp_path, {**SMALL, "seed": 1, "videos": {"train": 1, "dev": 0, "test": 1}})
    assert other["train"].queries[0].text != snaps["train"].queries[0].text or \
        other["train"].content_sha256() != snaps["train"].content_sha256()


def test_config_and_demo_scenes():
    cfg = DemoBenchmarkConfig(videos={"train": 1, "dev": 0, "test": 1})
    names = [s.name for s in split_scenes(cfg, "test")]
    assert names[0] == "demo_test_000" and names[1:] == ["demo_test_crossing", "demo_test_stop_and_go",
                                                         "demo_test_busy_plaza"]
    assert [s.name for s in split_scenes(cfg, "dev")] == []
    with pytest.raises(ValueError, match="videos"):
        DemoBenchmarkConfig(videos={"val": 2})
    with pytest.raises(ValueError, match="unknown key"):
        DemoBenchmarkConfig.from_dict({"scenes": 3})
