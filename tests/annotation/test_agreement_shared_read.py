"""One reading of the votes for the decisions audit and the agreement figures, and the packed
columns it reads, against the readings they replace, on random stores.

``decisions_and_agreement`` must give exactly what ``decisions_audit`` and
``agreement_stats(recompute=True)`` give (and so what the ORM readings of ``test_agreement_bulk``
give); the votes' rater and time travel in one number with their item where the raters' range
leaves room (``stages.base.rater_time``, ``common.columns.integer_columns_among(last_below=)``)
and in a column of their own where it does not (rater ids near 2**31): both ways are checked,
with missing times, reopened items, several policies and empty stages.
"""
from __future__ import annotations

from io import StringIO

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db.models import Q

from annotation.curation.services.agreement import (
    agreement_stats,
    decisions_and_agreement,
    decisions_audit,
)
from annotation.curation.stages import usability
from annotation.curation.stages.base import label_code, rater_time
from annotation.models import Vote, WorkItem
from common.columns import integer_columns, integer_columns_among, order_by_column, sorted_distinct
from common.errors import ApplicationError
from tests.annotation.test_agreement_bulk import (
    orm_agreement_stats,
    orm_decisions_audit,
    orm_rows,
    store,
)

pytestmark = pytest.mark.django_db

BIG = (1 << 31) - 1                       # the highest id a rater (a 4-byte key) can have


def big_raters(rng, items: list[WorkItem], n: int = 3) -> None:
    """Votes from raters whose ids lie near 2**31 on some items (each rater once per item), so the
    raters' range no longer fits beside the item in one number."""
    users = get_user_model().objects.bulk_create(
        [get_user_model()(pk=BIG - i, username=f"big-{i}", password="!") for i in range(n)])
    for item in rng.choice(items, size=min(12, len(items)), replace=False):
        for user in users[:int(rng.integers(1, n + 1))]:
            Vote.objects.create(item=item, annotator=user, label=str(rng.choice(usability.STAGE.label_values)),
                                time_spent_ms=None if rng.random() < 0.3 else int(rng.integers(0, 1 << 31)))


def separately(stage: str = "usability") -> dict:
    return {"decisions": decisions_audit(stage=stage), "agreement": agreement_stats(stage=stage, recompute=True)}


@pytest.mark.parametrize("seed", range(3))
def test_one_reading_gives_both_results(seed):
    rng = np.random.default_rng(seed)
    store(rng)
    both = decisions_and_agreement(stage="usability")
    assert both == separately()
    assert both["decisions"] == orm_decisions_audit("usability")
    assert both["agreement"] == orm_agreement_stats("usability", None)


@pytest.mark.parametrize("seed", range(2))
def test_big_rater_ids_read_as_their_own_column(seed):
    rng = np.random.default_rng(10 + seed)
    items = store(rng, n_items=80)
    big_raters(rng, items)
    below = rater_time()[2] * 2 * (len(usability.STAGE.label_values) + 1)
    assert below >= 1 << 63                # no room beside an item and a label: the fallback is what runs
    both = decisions_and_agreement(stage="usability")
    assert both == separately()
    assert both["agreement"] == orm_agreement_stats("usability", None)
    assert both["decisions"] == orm_decisions_audit("usability")
    rows = usability.STAGE.agreement_rows(WorkItem.objects.filter(stage="usability"))
    expected = orm_rows(Vote.objects.filter(item__stage="usability"))
    assert np.array_equal(rows.unit, expected["item"]) and np.array_equal(rows.rater, expected["rater"])
    assert np.array_equal(rows.seconds, expected["time_spent"], equal_nan=True)
    assert rows.rater.max() == BIG


def test_packed_and_separate_columns_agree():
    rng = np.random.default_rng(5)
    items = store(rng, n_items=120)
    labels = usability.STAGE.label_values
    for big in (False, True):  # rater ids near 2**31: the last column travels on its own
        if big:
            big_raters(rng, items)
        assert (rater_time()[2] * 2 * (len(labels) + 1) >= 1 << 63) == big
        for queryset in (WorkItem.objects.filter(stage="usability"),
                         WorkItem.objects.filter(video__split_group__split="dev")):
            keys = sorted_distinct(integer_columns(queryset, "id")[0])
            _, packed_time, below = rater_time()
            common = dict(field="item_id", keys=keys, parents=queryset, first_below=2 * (len(labels) + 1))
            packed = integer_columns_among(Vote.objects.all(), label_code(labels), "id", packed_time,
                                           last_below=below, **common)
            apart = integer_columns_among(Vote.objects.all(), label_code(labels), "id", packed_time, **common)
            too_wide = integer_columns_among(Vote.objects.all(), label_code(labels), "id", packed_time,
                                             last_below=1 << 62, **common)       # no room: a column of its own
            reference = order_by_column(apart[2], *apart)
            for reading in (packed, too_wide):
                assert all(np.array_equal(a, b) for a, b in zip(order_by_column(reading[2], *reading), reference))
            assert reference[0].size == Vote.objects.filter(item__in=queryset).count()


def test_empty_stages_and_refusals():
    assert decisions_and_agreement(stage="usability") == separately()       # no items at all
    assert decisions_and_agreement(stage="identity") == separately("identity")
    items = store(np.random.default_rng(4), n_items=20)
    WorkItem.objects.filter(pk__in=[i.pk for i in items]).update(reopened_at=items[0].created_at)
    both = decisions_and_agreement(stage="usability")                     # every item reopened
    assert both == separately() and both["decisions"]["n_items"] == 0
    with pytest.raises(ApplicationError, match="not decided by the majority rule"):
        decisions_and_agreement(stage="relation")


def test_a_label_outside_the_stage_is_refused_first_by_the_audit():
    items = store(np.random.default_rng(3), n_items=30)
    voter = get_user_model().objects.create(username="stray", password="!")
    Vote.objects.create(item=items[0], annotator=voter, label="same")
    with pytest.raises(ValueError, match="has the label 'same', not one of usable, unusable, uncertain"):
        decisions_and_agreement(stage="usability")
    # on a reopened item only the agreement figures read it, and refuse it as they did
    WorkItem.objects.filter(Q(pk=items[0].pk)).update(reopened_at=items[0].created_at)
    with pytest.raises(ValueError, match="label must lie in 0..2"):
        decisions_and_agreement(stage="usability")
    with pytest.raises(ValueError, match="label must lie in 0..2"):
        agreement_stats(stage="usability", recompute=True)


def test_the_command_audits_from_one_reading():
    store(np.random.default_rng(6), n_items=40)
    out = StringIO()
    call_command("agreement", "--stage", "usability", "--audit", stdout=out)
    audit = decisions_audit(stage="usability")
    assert f"decisions audit: {audit['n_items']} items" in out.getvalue()
    assert f"{len(audit['mismatched'])} stored decisions differ from the rule" in out.getvalue()
    out = StringIO()
    call_command("agreement", "--stage", "usability", "--audit", "--json", stdout=out)
    assert '"decisions_audit"' in out.getvalue()
