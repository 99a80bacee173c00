from __future__ import annotations

import pytest

from annotation.services.items import work_items_create_for_run
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories.services.proposals import trajectories_store


@pytest.fixture
def reviewable_run(db):
    """A finished run with 4 trajectories (two of them overlapping: one duplicate pair), items open."""
    def make(video=None):
        run = run_factory(video=video or video_factory(split="train"))
        trajectories_store(run=run, proposals=[
            proposal(1, 0, 30, x=10), proposal(2, 10, 30, x=31),   # the same object twice
            proposal(3, 0, 30, x=300, y=200), proposal(4, 40, 30, x=500, y=10),
        ])
        run.refresh_from_db()
        work_items_create_for_run(run=run)
        return run

    return make


@pytest.fixture
def annotators(make_user):
    return [make_user("annotator", username=f"ann{i}") for i in range(5)]


@pytest.fixture
def adjudicator(make_user):
    return make_user("adjudicator", username="adj")
