"""A vote by a new annotator that arrives between the measure of the raters' range and the read
of the packed votes (``stages.base.read_with_rater_time``) is read as itself: the read keeps to the
measured range and is made again once the range has moved, instead of packing a rater beyond it
into the next field of the number."""
from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from annotation.curation.services.agreement import agreement_stats, decisions_and_agreement, decisions_audit
from annotation.curation.stages import base, usability
from annotation.models import Vote, WorkItem
from common.errors import ApplicationError
from tests.annotation.test_agreement_bulk import orm_agreement_stats, orm_rows, store

pytestmark = pytest.mark.django_db


def _newcomer_votes_after_the_measure(monkeypatch, times: int = 1) -> list[int]:
    """Each of the first ``times`` measures of the range is followed by a vote from a new account
    (a higher id than any rater so far) on an item of the stage; the ids of those votes."""
    measure, made = base.rater_time, []

    def measured_then_a_vote():
        result = measure()
        if len(made) < times:
            user = get_user_model().objects.create(username=f"newcomer-{len(made)}", password="!")
            voted = Vote.objects.values_list("item_id", flat=True)
            item = WorkItem.objects.filter(stage="usability").exclude(pk__in=voted.filter(annotator=user)).first()
            made.append(Vote.objects.create(item=item, annotator=user, label="unusable", time_spent_ms=1234).pk)
        return result

    monkeypatch.setattr(base, "rater_time", measured_then_a_vote)
    return made


def test_a_newcomers_vote_during_the_read_is_read_as_itself(monkeypatch):
    store(np.random.default_rng(3), n_items=60)
    made = _newcomer_votes_after_the_measure(monkeypatch)
    rows = usability.STAGE.agreement_rows(WorkItem.objects.filter(stage="usability"))
    assert made
    expected = orm_rows(Vote.objects.filter(item__stage="usability"))
    assert rows.rater.tolist() == expected["rater"].tolist()
    assert rows.unit.tolist() == expected["item"].tolist()
    assert rows.category.tolist() == expected["label"].tolist()
    assert np.array_equal(rows.seconds, expected["time_spent"], equal_nan=True)


def test_the_shared_reading_reads_again_too(monkeypatch):
    store(np.random.default_rng(4), n_items=60)
    made = _newcomer_votes_after_the_measure(monkeypatch)
    both = decisions_and_agreement(stage="usability")
    assert made
    monkeypatch.undo()
    assert both == {"decisions": decisions_audit(stage="usability"),
                    "agreement": agreement_stats(stage="usability", recompute=True)}
    assert both["agreement"] == orm_agreement_stats("usability", None)


def test_a_range_that_keeps_moving_is_refused(monkeypatch):
    store(np.random.default_rng(5), n_items=30)
    _newcomer_votes_after_the_measure(monkeypatch, times=base.RATER_READS)
    with pytest.raises(ApplicationError, match="kept arriving") as refused:
        usability.STAGE.agreement_rows(WorkItem.objects.filter(stage="usability"))
    assert refused.value.status_code == 409
