"""Default search reads no answer key (DESIGN 4.4): with every human-side record of the searched
gallery perturbed — approved descriptions (texts and facts), the votes that approved them, the
snapshot's query predicates, target ids and relation labels — every score, ranking, description
and comparator count of ``POST /api/search/`` in its default mode is bit-identical. The catalogue
mode, which browses the approved descriptions, changes under the same perturbation (so the
perturbation reaches what a leaking search would read)."""
from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from annotation.models import (
    CandidatePool,
    Description,
    DescriptionRun,
    DescriptionVersion,
    Vote,
    WorkItem,
)
from models.facts import parse_description
from models.media.trajectory_ops import quality_signals
from models.training.snapshot import RelationSnapshotData, SnapshotQuery
from tests.trajectories.factories import run_factory, video_factory
from tests.workers.factories import finished_run, register_snapshot
from trajectories.models import Trajectory
from workers import search as search_module

pytestmark = pytest.mark.django_db
TEXTS = ("a person in a red top walking to the right", "someone in blue trousers")
COLOURS = ("red", "blue", "green", "yellow", "white", "black")


@pytest.fixture(autouse=True)
def fresh_process_caches():
    search_module._loaded.clear()
    search_module._descriptions.clear()
    yield
    search_module._loaded.clear()
    search_module._descriptions.clear()


def _content(upper: str, lower: str, direction: str, end: int) -> dict:
    facts = [("attribute", "upper_colour", upper), ("attribute", "lower_colour", lower), ("event", "walks", direction)]
    return {"appearance": f"a person in a {upper} top and {lower} trousers", "motion": f"walks to the {direction}",
            "facts": [{"id": f"f{i}", "kind": kind, "name": name, "value": value, "start_frame": 0, "end_frame": end,
                       "evidence_frames": [0], "scope": "whole" if kind == "attribute" else "interval",
                       "known": True} for i, (kind, name, value) in enumerate(facts)]}


def _approve(description: Description, content: dict, number: int, annotators, parent=None) -> None:
    """A version of ``content``, three ``usable`` votes on it, and the approval pointing at it."""
    version = DescriptionVersion.objects.create(description=description, number=number, parent=parent,
                                                origin="model" if parent is None else "correction", content=content,
                                                content_sha256=parse_description(content).content_hash())
    item = WorkItem.objects.create(stage="description", video_id=description.pool.video_id,
                                   trajectory_id=description.trajectory_id, description=version, panel_size=3,
                                   required_votes=2, state="decided", decision="usable")
    for user in annotators:
        Vote.objects.create(item=item, annotator=user, label="usable")
    Description.objects.filter(pk=description.pk).update(status=Description.Status.APPROVED, approved_version=version)


def _catalogue(data: RelationSnapshotData, annotators) -> dict[int, Description]:
    """The gallery's approved records in the database: a trajectory row per snapshot track (same
    id), a pool per video, and an approved description per trajectory."""
    run_of = {}
    for v in data.videos:
        video = video_factory(split=data.split, width=v.width, height=v.height, frame_count=v.n_frames, fps=v.fps)
        run = run_factory(video=video)
        run_of[v.id] = (video, run, CandidatePool.objects.create(video=video, version=1, run=run))
    # proposed by another backend than the heuristic comparator the search reranks with: a reranker
    # that is the proposer is refused (workers.answer_guard)
    model_run = DescriptionRun.objects.create(backend={"name": "transformers"}, prompt_version="fixture",
                                              prompt_sha256="0" * 64, budget={})
    rng = random.Random(0)
    out = {}
    for t in data.tracks:
        video, run, pool = run_of[t.video_id]
        q = quality_signals(t.frames, t.boxes)
        Trajectory.objects.create(
            id=t.id, run=run, video=video, track_id=t.id, category="person", n_obs=q.n_obs, first_frame=q.first_frame,
            last_frame=q.last_frame, frames=t.frames.astype("<i4").tobytes(), boxes=t.boxes.astype("<f4").tobytes(),
            scores=np.ones(len(t.frames), "<f4").tobytes(), temporal_coverage=q.temporal_coverage,
            longest_run=q.longest_run, median_area=q.median_area, abrupt_changes=q.abrupt_changes, mean_score=1.0)
        model_run.pools.add(pool)
        d = Description.objects.create(run=model_run, pool=pool, trajectory_id=t.id,
                                       status=Description.Status.IN_REVIEW, attempts=1)
        _approve(d, _content(rng.choice(COLOURS), rng.choice(COLOURS), rng.choice(("left", "right")),
                             int(t.frames[-1]) + 1), 1, annotators)
        out[t.id] = d
    return out


def _perturb_catalogue(descriptions: dict[int, Description], annotators, bait: int) -> None:
    """Every approved description gets a corrected version with other texts and fact values,
    approved by other votes; ``bait`` gets the first search text word for word."""
    rng = random.Random(1)
    for tid, d in descriptions.items():
        d.refresh_from_db()
        old = d.approved_version.content
        new = _content(rng.choice(COLOURS), rng.choice(COLOURS), rng.choice(("left", "right")),
                       old["facts"][0]["end_frame"])
        if tid == bait:
            new["appearance"], new["motion"] = TEXTS[0], ""
        _approve(d, new, 2, annotators[::-1], parent=d.approved_version)


def _perturbed_snapshot(data: RelationSnapshotData) -> RelationSnapshotData:
    """The snapshot with its human-side records changed: every query's predicates shuffled
    between queries and their values replaced, target ids rotated, relation labels flipped."""
    rng = random.Random(2)
    predicates = [list(q.predicates) for q in data.queries]
    rng.shuffle(predicates)
    targets = [q.target_id for q in data.queries]
    queries = [SnapshotQuery(id=q.id, video_id=q.video_id, text=q.text, target_id=targets[i - 1],
                             predicates=[{**p, "value": rng.choice(COLOURS)} for p in predicates[i]])
               for i, q in enumerate(data.queries)]
    relations = [dataclasses.replace(r, label={1: 0, 0: 1, -1: 1}[r.label]) for r in data.relations]
    out = RelationSnapshotData(split=data.split, videos=data.videos, tracks=data.tracks, queries=queries,
                               relations=relations, meta={"perturbed": True})
    out.validate()
    return out


def _searches(client, runs, snapshot, mode: str = "retrieval") -> list:
    """Every kind of search over ``snapshot``: both texts, both levels, with and without fusion
    and reranking (the catalogue mode always reranks)."""
    out = []
    for text in TEXTS:
        for level in ("trajectory", "video"):
            for fuse in ([], [runs[1].pk]):
                for rerank in (False, True):
                    r = client.post("/api/search/", {"run": runs[0].pk, "snapshot": snapshot.pk, "text": text,
                                                     "k": 10, "level": level, "fuse_with": fuse, "rerank": rerank,
                                                     "mode": mode}, format="json")
                    assert r.status_code == 200, r.content
                    body = r.json()
                    out.append((text, level, fuse, rerank, body.get("mode"), body["comparator_calls"],
                                body["results"]))
    return out


def test_default_search_is_invariant_to_every_human_side_record(snapshots, trained_dirs, var_dir, tmp_path,
                                                                make_user, client_for):
    # given trained runs, the dev snapshot and its approved catalogue in the database
    runs = [finished_run(snapshots, trained_dirs["vtrajembed"]), finished_run(snapshots, trained_dirs["scout"], "scout")]
    data = RelationSnapshotData.load(snapshots["dev"].path)
    annotators = [make_user("annotator", username=f"ann{i}") for i in range(3)]
    catalogue = _catalogue(data, annotators)
    client = client_for(make_user("annotator", username="searcher"))
    before = _searches(client, runs, snapshots["dev"])
    catalogue_before = _searches(client, runs, snapshots["dev"], mode="catalogue")
    bait = before[1][-1][-1]["trajectory"]          # last of the first reranked head

    # when every human-side record is perturbed (and nothing computed before is kept in memory)
    _perturb_catalogue(catalogue, annotators, bait=bait)
    perturbed = _perturbed_snapshot(data)
    perturbed.save(tmp_path / "perturbed")
    perturbed_row = register_snapshot(tmp_path / "perturbed")
    assert perturbed_row.content_sha256 != snapshots["dev"].content_sha256
    search_module._loaded.clear()
    search_module._descriptions.clear()

    # then every default search is bit-identical, on the same snapshot and on its perturbed copy
    assert _searches(client, runs, snapshots["dev"]) == before
    search_module._descriptions.clear()
    assert _searches(client, runs, perturbed_row) == before
    assert {mode for *_, mode, _, _ in before} == {"retrieval"}
    reranked = [results for *_, rerank, _, _, results in before if rerank]
    assert all(hit["description_source"] == "describer" for results in reranked for hit in results)
    # and the catalogue mode, which reads the approved descriptions, is not
    catalogue_after = _searches(client, runs, snapshots["dev"], mode="catalogue")
    assert {mode for *_, mode, _, _ in catalogue_after} == {"catalogue"}
    assert all(hit["description_source"] == "approved" for hit in catalogue_before[0][-1])
    assert catalogue_after != catalogue_before
    assert catalogue_after[0][-1][0]["trajectory"] == bait != before[1][-1][0]["trajectory"]
