from __future__ import annotations

import pytest

from common.errors import ApplicationError
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories.models import DuplicateCandidate, Trajectory
from trajectories.services.duplicates import (
    duplicate_candidate_create_manual,
    duplicate_candidates_propose,
)
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


def test_store_proposes_pairs_with_signals():
    run = run_factory()
    trajectories_store(run=run, proposals=[
        proposal(1, 0, 30, x=10),
        proposal(2, 10, 30, x=31),          # same object, a second track: overlap
        proposal(3, 0, 30, x=400, y=200),   # someone else
    ])
    pairs = list(DuplicateCandidate.objects.all())
    assert len(pairs) == 1
    pair = pairs[0]
    ids = dict(Trajectory.objects.values_list("track_id", "pk"))
    assert (pair.trajectory_a_id, pair.trajectory_b_id) == (ids[1], ids[2])
    assert pair.reasons == ["overlap"] and pair.covisible_frames == 20 and pair.mean_iou > 0.9
    run.refresh_from_db()
    assert run.duplicate_count == 1
    # Proposing again stores nothing new.
    assert duplicate_candidates_propose(video=run.video) == 0


def test_manual_pair_records_signals_and_refuses_nonsense(manager_client):
    run = run_factory()
    trajectories_store(run=run, proposals=[proposal(1, 0, 10), proposal(2, 50, 10, x=300)])
    a, b = Trajectory.objects.order_by("pk")
    pair = duplicate_candidate_create_manual(trajectory_a=b, trajectory_b=a)
    assert (pair.trajectory_a_id, pair.trajectory_b_id) == (a.pk, b.pk)
    assert pair.reasons[0] == "manual" and pair.origin == "manual" and pair.gap_frames == 41
    assert duplicate_candidate_create_manual(trajectory_a=a, trajectory_b=b).pk == pair.pk
    with pytest.raises(ApplicationError, match="its own duplicate"):
        duplicate_candidate_create_manual(trajectory_a=a, trajectory_b=a)
    other = run_factory(video=video_factory())
    trajectories_store(run=other, proposals=[proposal(1, 0, 10)])
    c = Trajectory.objects.get(run=other)
    r = manager_client.post("/api/duplicate-candidates/", {"trajectory_a": a.pk, "trajectory_b": c.pk}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "different_videos"
