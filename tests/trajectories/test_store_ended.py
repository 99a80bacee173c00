"""A delivery that outlived its run (the sweep failed its job as abandoned, or a cancel ended it)
stores nothing when it finishes: its result is dropped, the run stays as it was ended, and no
review opens (issue 27, finding 8)."""
from __future__ import annotations

import pytest

from annotation.models import WorkItem
from common.errors import ConflictError
from tests.trajectories.factories import proposal, run_factory
from trajectories.models import ProposalRun, Trajectory
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("ended", [ProposalRun.Status.FAILED, ProposalRun.Status.CANCELLED])
def test_an_ended_run_takes_no_late_result(media_root, ended):
    run = run_factory(status=ended, error="no heartbeat for 300 s: the worker died")
    with pytest.raises(ConflictError) as refused:
        trajectories_store(run=run, proposals=[proposal(1, 0, 10), proposal(2, 0, 10, x=200)])
    assert refused.value.code == "run_ended"
    run.refresh_from_db()
    assert run.status == ended and run.trajectory_count == 0
    assert not Trajectory.objects.filter(run=run).exists() and not WorkItem.objects.exists()
