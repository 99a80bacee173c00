"""Mining strata read the structured compatibility of a query with each trajectory's approved facts,
not only similarity (Appendix E.3.2; issue 14, protocol corrections)."""
from __future__ import annotations

import pytest

from annotation.benchmark.services.mining import mining_run_create, mining_run_execute
from annotation.models import CrossPair, PoolMember, Query, WorkItem
from common.errors import ApplicationError
from tests.annotation.conftest import (
    approve,
    frozen_pool,
    propose_description,
    propose_query,
    review_row,
)

pytestmark = pytest.mark.django_db


def test_a_definite_conflict_is_an_easy_negative_and_a_possible_one_a_hard_negative(reviewable_run, annotators):
    # given a dev query for the person in the red top, and another video with a blue top (a
    # definite conflict), a red top, a red-and-white top (multi-coloured: a possible conflict) and
    # a member nobody described (no facts: nothing conflicts)
    pool_a, pool_b = (frozen_pool(reviewable_run, annotators, "dev") for _ in range(2))
    a = list(PoolMember.objects.filter(pool=pool_a).values_list("trajectory_id", flat=True))
    b = list(PoolMember.objects.filter(pool=pool_b).values_list("trajectory_id", flat=True))
    approve(propose_description(pool_a, a[0], "red", panel=1), annotators)
    for tid, colour in zip(b, ("blue", "red", "red and white")):
        approve(propose_description(pool_b, tid, colour, panel=1), annotators)
    query = review_row(propose_query(pool_a, a[0], "red"), annotators[3], {t: int(t == a[0]) for t in a})
    other = review_row(propose_query(pool_b, b[0], "blue"), annotators[3], {t: int(t == b[0]) for t in b})
    assert query.status == other.status == Query.Status.ACCEPTED, (query.rejection_reason, other.rejection_reason)

    # when the split is mined with budgets that would take every candidate as a potential match
    run = mining_run_create(split="dev", queue=False, config={
        "potential_k": 5, "hard_k": 5, "easy_k": 5, "random_k": 0, "easy_review_rate": 1.0})
    mining_run_execute(run=run)

    # then the strata follow the structure, and each pair's provenance says why
    pairs = {p.trajectory_id: p for p in CrossPair.objects.filter(query=query)}
    assert {t: p.stratum for t, p in pairs.items()} == {
        b[0]: "easy_negative", b[1]: "potential_match", b[2]: "hard_negative", b[3]: "potential_match"}
    blue = pairs[b[0]].provenance[0]
    assert blue["compatibility"] == "definite_conflict"
    assert blue["reason"]["definite"] == [{"name": "upper_colour", "value": "red", "facts": ["blue"]}]
    assert pairs[b[2]].provenance[0]["reason"]["possible"] == [
        {"name": "upper_colour", "value": "red", "facts": ["red and white"]}]
    assert pairs[b[3]].provenance[0]["reason"] == {"compatibility": "compatible", "definite": [], "possible": []}
    assert WorkItem.objects.filter(stage="pair", pair__query=query).count() == 4   # easy rate 1: all reviewed
    run.refresh_from_db()
    assert run.log["config"]["structured"] is True
    assert "definitely conflict" in run.log["strata_definition"]["easy_negative"]


def test_mining_without_the_structure_is_refused(db):
    with pytest.raises(ApplicationError) as refused:
        mining_run_create(split="dev", queue=False, config={"structured": False})
    assert refused.value.code == "invalid_config" and "structured must be true" in str(refused.value)
