"""Freezing candidate pools: consolidation of decided items, conflicts, versions, immutability."""
from __future__ import annotations

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from annotation.curation.services import pools as pool_service
from annotation.curation.services.items import work_items_create_for_run
from annotation.curation.services.pools import pool_freeze
from annotation.curation.services.votes import adjudication_cast
from annotation.models import CandidatePool, PoolMember, WorkItem
from common.errors import ConflictError
from tests.annotation.conftest import panel_votes
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


def make_run(video=None, tracks=None):
    run = run_factory(video=video or video_factory(split="train"))
    trajectories_store(run=run, proposals=tracks or [
        proposal(1, 0, 40, x=10, dx=1),           # 40 observations: the representative
        proposal(2, 20, 40, x=30, dx=1),          # same object; frames 40..59 are its own
        proposal(3, 0, 30, x=300, y=200),         # someone else
        proposal(4, 0, 10, x=500, y=10, dx=0),    # a shadow
    ])
    run.refresh_from_db()
    work_items_create_for_run(run=run)
    return run


def usability(run, track_id):
    return WorkItem.objects.get(stage="usability", trajectory__run=run, trajectory__track_id=track_id)


def identity(run, a, b):
    return WorkItem.objects.get(stage="identity", duplicate__trajectory_a__run=run,
                                duplicate__trajectory_a__track_id=a, duplicate__trajectory_b__track_id=b)


def review(run, annotators, *, unusable=(4,), pairs=None):
    for t in run.trajectories.all():
        label = "unusable" if t.track_id in unusable else "usable"
        panel_votes(usability(run, t.track_id), annotators, [label] * 3)
    for (a, b), label in (pairs or {(1, 2): "same"}).items():
        panel_votes(identity(run, a, b), annotators, [label] * 3)


def test_freeze_consolidates_the_retained_trajectories(annotators, make_user):
    run = make_run()
    assert WorkItem.objects.filter(stage="identity").count() == 1
    with pytest.raises(ConflictError) as err:
        pool_freeze(run=run)
    assert err.value.code == "review_unfinished"
    review(run, annotators)
    pool = pool_freeze(run=run, frozen_by=make_user("manager"))
    assert pool.version == 1 and pool.frozen_at is not None and len(pool.content_sha256) == 64
    members = {m.trajectory.track_id: m for m in pool.members.select_related("trajectory")}
    assert set(members) == {1, 2, 3}                             # the shadow was not retained
    assert members[1].role == "representative" and members[1].n_obs == 40
    fragment = members[2]
    assert fragment.role == "fragment" and fragment.group_representative.track_id == 1
    frames = np.frombuffer(bytes(fragment.frames), "<i4")
    np.testing.assert_array_equal(frames, np.arange(40, 60))     # only frames the representative lacks
    assert fragment.n_removed == 20 and members[3].role == "single"
    assert pool_freeze(run=run).pk == pool.pk                    # freezing again returns it
    roles = {row["source_id"]: row["role"] for row in pool.lineage}
    assert roles == {members[1].trajectory_id: "representative", members[2].trajectory_id: "fragment",
                     members[3].trajectory_id: "single"}


def _conflicting_run(annotators, votes_23):
    """Tracks 1, 2, 3 with 1-2 same, 2-3 decided by ``votes_23`` and 1-3 different: a cycle."""
    run = make_run(tracks=[proposal(1, 0, 30, x=10), proposal(2, 0, 30, x=12), proposal(3, 0, 30, x=14)])
    assert WorkItem.objects.filter(stage="identity").count() == 3
    review(run, annotators, unusable=(), pairs={(1, 2): "same", (1, 3): "different"})
    panel_votes(identity(run, 2, 3), annotators, votes_23)
    return run


def _pair_ids(run, pairs):
    return sorted((identity(run, a, b).duplicate.trajectory_a_id, identity(run, a, b).duplicate.trajectory_b_id)
                  for a, b in pairs)


def test_a_conflict_goes_back_to_adjudication_and_is_decided_by_all_votes(annotators, adjudicator, make_user):
    run = _conflicting_run(annotators, ["same", "same", "different"])
    with pytest.raises(ConflictError) as err:
        pool_freeze(run=run)
    assert err.value.code == "consolidation_conflict"
    assert sorted(map(tuple, err.value.extra["pairs"])) == _pair_ids(run, [(1, 2), (1, 3), (2, 3)])
    reopened = WorkItem.objects.filter(stage="identity", state="adjudicate", reopened_at__isnull=False)
    assert reopened.count() == 3 and not CandidatePool.objects.exists()
    # the adjudicator finds 2 and 3 different: with the panel's two `same` that is no majority
    adjudication_cast(item_id=identity(run, 2, 3).pk, adjudicator=adjudicator, label="different", reason="2 turns left")
    adjudication_cast(item_id=identity(run, 1, 2).pk, adjudicator=adjudicator, label="same", reason="same coat")
    adjudication_cast(item_id=identity(run, 1, 3).pk, adjudicator=adjudicator, label="different", reason="confirmed")
    assert (identity(run, 2, 3).state, identity(run, 2, 3).decision) == ("unresolved", "")  # 2 same, 2 different
    assert identity(run, 1, 2).decision == "same" and identity(run, 1, 3).decision == "different"
    pool = pool_freeze(run=run)
    roles = sorted(pool.members.values_list("trajectory__track_id", "role"))
    assert roles == [(1, "representative"), (3, "single")]      # 2 lies wholly under 1
    assert {row["role"] for row in pool.lineage} == {"representative", "removed", "single"}  # 2 is on record


def test_a_unanimous_panel_outvotes_its_adjudicator_and_the_cycle_cannot_loop(annotators, adjudicator, make_user):
    run = _conflicting_run(annotators, ["same"] * 3)
    with pytest.raises(ConflictError):
        pool_freeze(run=run)
    adjudication_cast(item_id=identity(run, 2, 3).pk, adjudicator=adjudicator, label="different", reason="2 turns left")
    assert identity(run, 2, 3).decision == "same"               # three panel votes against one: not overridden
    adjudication_cast(item_id=identity(run, 1, 2).pk, adjudicator=adjudicator, label="same", reason="same coat")
    adjudication_cast(item_id=identity(run, 1, 3).pk, adjudicator=adjudicator, label="different", reason="confirmed")
    # the votes still contradict each other: the judgments decided again end unresolved, not reopened
    with pytest.raises(ConflictError) as err:
        pool_freeze(run=run)
    assert err.value.extra["pairs"] == []
    assert sorted(map(tuple, err.value.extra["unresolved"])) == _pair_ids(run, [(1, 2), (1, 3), (2, 3)])
    assert not WorkItem.objects.filter(stage="identity").exclude(state="unresolved").exists()
    pool = pool_freeze(run=run)                                  # nothing left to contradict
    roles = sorted(pool.members.values_list("trajectory__track_id", "role"))
    assert roles == [(1, "single"), (2, "single"), (3, "single")]


def test_a_frozen_pool_cannot_change_even_in_raw_sql(annotators):
    run = make_run()
    review(run, annotators)
    pool = pool_freeze(run=run)
    member = pool.members.first()
    with pytest.raises(IntegrityError), transaction.atomic():
        CandidatePool.objects.filter(pk=pool.pk).update(reason="edited")
    with pytest.raises(IntegrityError), transaction.atomic():
        CandidatePool.objects.filter(pk=pool.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        PoolMember.objects.filter(pk=member.pk).update(n_obs=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        PoolMember.objects.filter(pk=member.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        PoolMember.objects.create(pool=pool, trajectory=member.trajectory, role="single", n_obs=1,
                                  frames=b"\0\0\0\0", boxes=b"\0" * 16)
    pool.refresh_from_db()
    assert pool.reason == "" and pool.members.count() == 3


def test_a_tracking_fix_makes_a_new_version_and_calls_the_hooks(annotators, monkeypatch):
    first = make_run()
    review(first, annotators)
    old = pool_freeze(run=first)
    calls = []
    monkeypatch.setattr(pool_service, "queries_mark_for_reverification",
                        lambda before, after: calls.append((before.pk, after.version)))
    fixed = make_run(video=first.video, tracks=[proposal(1, 0, 60, x=10, dx=1), proposal(2, 0, 30, x=300, y=200)])
    for t in fixed.trajectories.all():
        panel_votes(usability(fixed, t.track_id), annotators, ["usable"] * 3)
    with pytest.raises(ConflictError) as err:
        pool_freeze(run=fixed)
    assert err.value.code == "pool_exists"
    new = pool_freeze(run=fixed, reason="track 1 was split by an occlusion")
    assert (new.version, new.supersedes_id, new.n_members) == (2, old.pk, 2)
    assert calls == [(old.pk, 2)]
    old.refresh_from_db()
    assert old.frozen_at is not None and old.superseded_by.pk == new.pk


def test_pool_api(annotators, client_for, manager_client, annotator):
    run = make_run()
    review(run, annotators)
    assert client_for(annotator).post("/api/pools/", {"run": run.pk}, format="json").status_code == 403
    r = manager_client.post("/api/pools/", {"run": run.pk}, format="json")
    assert r.status_code == 201 and r.json()["n_members"] == 3
    detail = client_for(annotator).get(f"/api/pools/{r.json()['id']}/").json()
    assert {m["role"] for m in detail["members"]} == {"representative", "fragment", "single"}
    assert client_for(annotator).get(f"/api/pools/?video={run.video_id}").json()["results"][0]["version"] == 1
    assert client_for(annotator).get("/api/pools/?video=first").status_code == 400
