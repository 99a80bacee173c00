"""The agreement tallies against the full recomputation from every vote, on random cases.

``agreement_stats`` answers a panel stage from its tallies (``agreement_tallies``), brought up to
date as votes arrive; ``recompute=True`` reads every vote (the reference). Here both are compared
on random stores (``test_agreement_bulk.store``: policies, missing times, adjudications, reopened
items, two splits, ids out of table order), then after more votes in several batches, counted in
between, with a vote that commits while a refresh reads (counted once, by the next refresh), and
after the migration's count of votes stored before the tallies existed.
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from annotation.curation.services import agreement_tallies
from annotation.curation.services.agreement import agreement_stats
from annotation.models import AgreementPending, AgreementRaterTally, AgreementTally, Vote, WorkItem
from tests.annotation.test_agreement_bulk import LABELS, orm_agreement_stats, store

pytestmark = pytest.mark.django_db
SPLITS = (None, "train", "dev", "test")


def assert_same(fast, reference, path="report"):
    """Equal, floats up to rounding (a mean summed in another order)."""
    if isinstance(reference, dict):
        assert isinstance(fast, dict) and set(fast) == set(reference), (path, set(fast) ^ set(reference))
        for key in reference:
            assert_same(fast[key], reference[key], f"{path}.{key}")
    elif isinstance(reference, list):
        assert isinstance(fast, list) and len(fast) == len(reference), path
        for i, (a, b) in enumerate(zip(fast, reference)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(reference, float) and not isinstance(fast, bool):
        assert isinstance(fast, int | float) and math.isclose(fast, reference, rel_tol=1e-12, abs_tol=1e-12), \
            (path, fast, reference)
    else:
        assert fast == reference and type(fast) is type(reference), (path, fast, reference)


def assert_tallies_match():
    for split in SPLITS:
        reference = agreement_stats(stage="usability", split=split, recompute=True)
        assert reference == orm_agreement_stats("usability", split)
        assert_same(agreement_stats(stage="usability", split=split), reference)
    assert not AgreementPending.objects.exists()


def more_votes(rng, items: list[WorkItem], n: int) -> None:
    """``n`` votes from new raters on random items: panel votes and adjudications, some untimed."""
    users = get_user_model().objects.bulk_create(
        [get_user_model()(username=f"late-{rng.integers(1 << 40)}-{i}", password="!") for i in range(n)])
    votes = []
    for user in users:
        item = items[int(rng.integers(len(items)))]
        adjudication = bool(rng.random() < 0.25)
        votes.append(Vote(item=item, annotator=user, label=str(rng.choice(LABELS)), is_adjudication=adjudication,
                          comment="checked" if adjudication else "",
                          time_spent_ms=None if rng.random() < 0.2 else int(rng.integers(0, 20_000))))
    Vote.objects.bulk_create(votes)


@pytest.mark.parametrize("seed", range(4))
def test_tallies_match_the_recomputation_as_votes_arrive(seed):
    rng = np.random.default_rng(seed)
    items = store(rng, n_items=150)
    assert AgreementPending.objects.count() == Vote.objects.count()  # the trigger logged every vote
    assert_tallies_match()
    for _ in range(3):                                # votes in batches, some items reopened between
        more_votes(rng, items, int(rng.integers(1, 40)))
        reopened = [item.pk for item in items if rng.random() < 0.05]
        WorkItem.objects.filter(pk__in=reopened).update(reopened_at=timezone.now(), state="open", decision="")
        if rng.random() < 0.5:
            agreement_tallies.agreement_tallies_refresh(batch=int(rng.integers(1, 30)))  # in small batches
        assert_tallies_match()


def test_a_vote_committed_while_a_refresh_reads_is_counted_once():
    rng = np.random.default_rng(11)
    items = store(rng, n_items=40)
    agreement_tallies.agreement_tallies_refresh()
    more_votes(rng, items[:5], 6)
    # given: the refresh took the pending rows of the first three new votes, and the other three
    # committed before it read the items' votes (their pending rows are still there)
    taken, on = agreement_tallies._take_pending(3)
    assert taken.size == 3 and AgreementPending.objects.count() == 3
    agreement_tallies._count_in(taken, np.unique(on))
    # then: the next refresh counts the rest, and the figures are the recomputation's
    assert agreement_tallies.agreement_tallies_refresh() == 3
    assert_tallies_match()


def test_stored_votes_are_counted_by_the_migration_and_an_empty_stage_reads_as_before():
    assert_same(agreement_stats(stage="usability"), agreement_stats(stage="usability", recompute=True))
    store(np.random.default_rng(5), n_items=60)
    expected = agreement_stats(stage="usability", recompute=True)
    # given: the votes were stored before the tallies existed (nothing logged, nothing counted)
    AgreementPending.objects.all().delete()
    AgreementTally.objects.all().delete()
    AgreementRaterTally.objects.all().delete()
    migration = importlib.import_module("annotation.migrations.0018_agreement_tallies")
    with connection.schema_editor(atomic=False) as editor:
        migration.count_stored_votes(None, editor)
    assert not AgreementPending.objects.exists()
    assert_same(agreement_stats(stage="usability"), expected)
    assert_same(agreement_stats(stage="identity"), agreement_stats(stage="identity", recompute=True))


def test_the_page_answers_from_the_tallies(manager_client, django_assert_max_num_queries):
    store(np.random.default_rng(8), n_items=80)
    agreement_tallies.agreement_tallies_refresh()
    with django_assert_max_num_queries(12):           # a handful of statements, none per vote or item
        page = manager_client.get("/api/review/agreement/?stage=usability&split=dev")
    assert page.status_code == 200
    assert_same(page.json(), agreement_stats(stage="usability", split="dev", recompute=True))
