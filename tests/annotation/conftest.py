from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Assignment, WorkItem
from annotation.services.items import work_items_create_for_run
from annotation.services.votes import vote_cast
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


def panel_votes(item: WorkItem, annotators, labels):
    """Seat the annotators on the item (as claims would) and cast their votes."""
    now = timezone.now()
    for seat, (user, label) in enumerate(zip(annotators, labels)):
        Assignment.objects.create(item=item, annotator=user, seat=seat, claimed_at=now,
                                  lease_expires_at=now + timedelta(minutes=10))
        vote_cast(item_id=item.pk, annotator=user, label=label)
    item.refresh_from_db()
    return item
