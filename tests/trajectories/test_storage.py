"""Compact trajectory storage: validation, round trip, and the database's own constraints."""
from __future__ import annotations

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from common.errors import ApplicationError
from models.backends.tracking.base import TrackProposal
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories.models import DuplicateCandidate, ProposalRun, Trajectory
from trajectories.selectors import video_pool_read
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


def test_round_trip_and_quality_signals():
    run = run_factory()
    p = proposal(1, start=5, n=10, step=2)  # frames 5, 7, ..., 23
    trajectories_store(run=run, proposals=[p, proposal(2, start=100, n=20, x=300)])
    t = Trajectory.objects.get(run=run, track_id=1)
    np.testing.assert_array_equal(t.frames_array(), p.frames)
    np.testing.assert_allclose(t.boxes_array(), p.boxes)
    assert (t.n_obs, t.first_frame, t.last_frame, t.longest_run) == (10, 5, 23, 1)
    assert t.temporal_coverage == pytest.approx(10 / 19)
    assert t.median_area == pytest.approx(40 * 80)
    assert t.box_at(7) is not None and t.box_at(6) is None
    run.refresh_from_db()
    assert run.status == ProposalRun.Status.SUCCEEDED and run.trajectory_count == 2
    assert [x.track_id for x in video_pool_read(video_id=run.video_id)] == [1, 2]


def _bad(kind: str) -> TrackProposal:
    p = proposal(7, start=0, n=5)
    if kind == "nan":
        p.boxes[2, 1] = np.nan
    elif kind == "outside":
        p.boxes[3] = [600, 300, 700, 380]  # frame is 640x360
    elif kind == "negative":
        p.boxes[0, 0] = -5
    elif kind == "inverted":
        p.boxes[1] = [50, 50, 40, 90]
    elif kind == "frame-range":
        p.frames[-1] = 300  # video has 300 frames: 0..299
    elif kind == "unordered":
        p.frames[1], p.frames[2] = p.frames[2], p.frames[1]
    elif kind == "inf-score":
        p.scores[0] = np.inf
    return p


@pytest.mark.parametrize("kind", ["nan", "outside", "negative", "inverted", "frame-range", "unordered", "inf-score"])
def test_invalid_observations_refuse_the_whole_run(kind):
    run = run_factory()
    good = proposal(1, start=0, n=5)
    with pytest.raises(ApplicationError) as err:
        trajectories_store(run=run, proposals=[good, _bad(kind)])
    assert err.value.code == "invalid_observations"
    assert "track 7" in err.value.message
    assert Trajectory.objects.count() == 0 and DuplicateCandidate.objects.count() == 0
    run.refresh_from_db()
    assert run.status == ProposalRun.Status.QUEUED and run.trajectory_count == 0


def test_duplicate_track_ids_refused():
    with pytest.raises(ApplicationError, match="not unique"):
        trajectories_store(run=run_factory(), proposals=[proposal(1, 0, 3), proposal(1, 10, 3)])


def test_storing_twice_is_refused():
    run = run_factory()
    trajectories_store(run=run, proposals=[proposal(1, 0, 3)])
    with pytest.raises(ApplicationError, match="already has"):
        trajectories_store(run=run, proposals=[proposal(1, 0, 3)])
    assert Trajectory.objects.filter(run=run).count() == 1


def _raw(run, **overrides):
    fields = dict(run=run, video=run.video, track_id=1, category="person", n_obs=2, first_frame=0, last_frame=1,
                  frames=np.arange(2, dtype="<i4").tobytes(), boxes=np.ones((2, 4), "<f4").tobytes(),
                  scores=np.ones(2, "<f4").tobytes(), temporal_coverage=1.0, longest_run=2, median_area=1.0,
                  abrupt_changes=0, mean_score=1.0)
    fields.update(overrides)
    return fields


@pytest.mark.parametrize("overrides", [
    {"n_obs": 0},
    {"first_frame": 5, "last_frame": 1},
    {"n_obs": 3},                               # packed arrays hold 2
    {"frames": np.arange(3, dtype="<i4").tobytes()},
    {"boxes": np.ones((2, 3), "<f4").tobytes()},
    {"scores": b""},
    {"temporal_coverage": 0.0},
    {"last_frame": 0},                          # span of 1 frame cannot hold 2 observations
])
def test_database_constraints_hold_without_the_service(overrides):
    run = run_factory()
    Trajectory.objects.create(**_raw(run, track_id=99))  # the valid baseline is accepted
    with pytest.raises(IntegrityError), transaction.atomic():
        Trajectory.objects.create(**_raw(run, **overrides))


def test_duplicate_pair_constraints_hold_without_the_service():
    run = run_factory()
    a = Trajectory.objects.create(**_raw(run, track_id=1))
    b = Trajectory.objects.create(**_raw(run, track_id=2))
    DuplicateCandidate.objects.create(video=run.video, trajectory_a=a, trajectory_b=b, reasons=["manual"])
    with pytest.raises(IntegrityError), transaction.atomic():
        DuplicateCandidate.objects.create(video=run.video, trajectory_a=b, trajectory_b=a, reasons=["manual"])
    with pytest.raises(IntegrityError), transaction.atomic():
        DuplicateCandidate.objects.create(video=run.video, trajectory_a=a, trajectory_b=b, reasons=["again"])


def test_video_constraints_hold_without_the_service():
    with pytest.raises(IntegrityError), transaction.atomic():
        video_factory(frame_count=0)
