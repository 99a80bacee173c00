"""Queries and pairs over their lifetime: revisions close what they replace, admission needs the
target, unresolved dev/test pairs go to adjudication, mining runs again without drifting, and the
completeness report counts what a brute force counts."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.benchmark.services.mining import (
    completeness_report,
    mining_run_create,
    mining_run_execute,
)
from annotation.benchmark.services.queries import query_revise
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages.relation import query_admission_problem
from annotation.models import Assignment, CrossPair, Query, Relation, Vote, WorkItem
from annotation.rules import description_outcome
from common.errors import ApplicationError, ConflictError
from tests.annotation.test_relation_chain import _verified_pools

pytestmark = pytest.mark.slow


def _seat(item, user):
    now = timezone.now()
    seat = Assignment.objects.filter(item=item).count()
    Assignment.objects.create(item=item, annotator=user, seat=seat, claimed_at=now,
                              lease_expires_at=now + timedelta(minutes=10))


@pytest.fixture
def dev_benchmark(db, media_root, tmp_path, settings, make_user):
    settings.VAR_DIR = tmp_path / "var"
    manager = make_user("manager", username="boss")
    pools = _verified_pools(tmp_path, media_root, manager, ["dev", "dev", "dev"])
    return {"manager": manager, "pools": pools}


def test_lifecycle(dev_benchmark, make_user):
    manager = dev_benchmark["manager"]
    reviewers = [make_user("annotator", username=f"rev{i}") for i in range(3)]
    judge = make_user("adjudicator", username="judge")

    # -- the completeness report counts what a brute force counts
    report = completeness_report(split="dev", limit=10**6)
    queries = list(Query.objects.filter(status="accepted"))
    from annotation.benchmark.services.mining import split_members

    _, members = split_members("dev")
    binary = set(Relation.objects.filter(label__in=(0, 1), pseudo=False).values_list("query_id", "trajectory_id"))
    brute = [(q.pk, m.trajectory_id) for q in queries for m in members if (q.pk, m.trajectory_id) not in binary]
    assert report["missing"] == len(brute) > 0
    assert sorted(map(tuple, report["missing_pairs"])) == sorted(brute)
    assert report["missing_by_kind"]["within_video"] == 0      # the rows are complete; cross-video is not

    # -- mining again with the same run records nothing new; another run adds provenance only
    run = mining_run_create(split="dev", queue=False, config={"easy_review_rate": 1.0})
    first = mining_run_execute(run=run)
    pairs = CrossPair.objects.count()
    again = mining_run_execute(run=run)                          # a re-delivered task
    assert CrossPair.objects.count() == pairs and again.get("already_stored") == first["pairs"]
    other = mining_run_create(split="dev", queue=False, config={"seed": 1, "easy_review_rate": 1.0})
    mining_run_execute(run=other)
    # the same pairs, mined twice: one row each, both provenances, one review item
    assert CrossPair.objects.count() == pairs
    twice = CrossPair.objects.filter(provenance__contains=[{"mining_run": run.pk}]).filter(
        provenance__contains=[{"mining_run": other.pk}])
    assert twice.exists()
    assert all(WorkItem.objects.filter(pair=p).count() == 1 for p in twice)

    # -- a dev pair that two reviewers leave unresolved goes to an adjudicator
    item = WorkItem.objects.filter(stage="pair", state="open").select_related("pair").first()
    _seat(item, reviewers[0])
    vote_cast(item_id=item.pk, annotator=reviewers[0], label="uncertain")
    item.refresh_from_db()
    assert item.panel_size == 2 and item.state == "open"
    _seat(item, reviewers[1])
    vote_cast(item_id=item.pk, annotator=reviewers[1], label="uncertain")
    item.refresh_from_db()
    assert item.state == "adjudicate"
    adjudication_cast(item_id=item.pk, adjudicator=judge, label="mismatch", reason="seen both videos")
    relation = Relation.objects.get(query_id=item.pair.query_id, trajectory_id=item.pair.trajectory_id)
    assert (relation.label, relation.source) == (0, "adjudicated")

    # ... and one the adjudicator cannot settle takes its query out of the dev galleries
    item2 = WorkItem.objects.filter(stage="pair", state="open").exclude(
        pair__query_id=item.pair.query_id).select_related("pair").first()
    for user in reviewers[:2]:
        _seat(item2, user)
        vote_cast(item_id=item2.pk, annotator=user, label="uncertain")
    adjudication_cast(item_id=item2.pk, adjudicator=judge, label="uncertain", reason="cannot tell")
    query = Query.objects.get(pk=item2.pair.query_id)
    assert query.status == "rejected" and "unresolved" in query.rejection_reason

    # -- a revision supersedes the query and closes its open items; a late vote is refused
    target = Query.objects.filter(status="accepted").exclude(pk=query.pk).first()
    open_pair = WorkItem.objects.filter(stage="pair", state="open", pair__query=target).first()
    revision = query_revise(query=target, text="the person in the " + target.text, predicates=target.predicates,
                            revised_by=manager)
    target.refresh_from_db()
    assert target.status == "superseded" and revision.status == "in_review" and revision.revision == 2
    if open_pair is not None:
        open_pair.refresh_from_db()
        assert open_pair.state == "unresolved"
        _seat(open_pair, reviewers[2])
        with pytest.raises(ConflictError) as late:
            vote_cast(item_id=open_pair.pk, annotator=reviewers[2], label="match")
        assert late.value.code == "item_closed"
    assert not Vote.objects.filter(item=open_pair, annotator=reviewers[2]).exists()

    # -- admission: the single match must be the trajectory the query was written from
    other_member = next(m.trajectory_id for m in members
                        if m.pool.video_id == revision.video_id and m.trajectory_id != revision.target_id)
    revision.ratings = {"faithful": True, "natural": 4}
    row = {revision.target_id: 0, other_member: 1}
    assert "not trajectory" in query_admission_problem(revision, row)
    assert query_admission_problem(revision, {revision.target_id: 1, other_member: 0}) == ""


def test_a_tie_between_approvals_and_rejections_is_no_majority():
    votes = [("usable", None), ("usable", None), ("unusable", None), ("unusable", None), ("uncertain", None)]
    assert description_outcome(votes, "h", required=2, panel=5) == ("adjudicate", None)


def test_wrongly_typed_backend_settings_are_a_clear_400(db, make_user):
    from annotation.benchmark.backends import build_describer, build_writer

    with pytest.raises(ApplicationError) as bad:
        build_describer({"name": "heuristic"}, {"max_crops": "abc"})
    assert bad.value.code == "invalid_backend"
    with pytest.raises(ApplicationError) as bad:
        build_writer({"name": "template", "synonym_threshold": "high"}, None)
    assert bad.value.code == "invalid_backend"
    with pytest.raises(ApplicationError) as bad:
        build_writer({"name": "openai", "base_url": 5}, None)
    assert bad.value.code == "location_in_request"
