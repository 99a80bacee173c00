"""Rules of Appendix E that the review stages apply exactly (issue 14, protocol corrections)."""
from __future__ import annotations

import pytest

from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.models import CrossPair, PoolMember, Relation, WorkItem
from tests.annotation.conftest import approve, frozen_pool, propose_description, propose_query, seat

pytestmark = pytest.mark.django_db


@pytest.fixture
def train_pair(reviewable_run, annotators):
    """A query of one training video and a mined trajectory of another, under pair review."""
    pool_a = frozen_pool(reviewable_run, annotators, "train")
    pool_b = frozen_pool(reviewable_run, annotators, "train")
    a = list(PoolMember.objects.filter(pool=pool_a).values_list("trajectory_id", flat=True))
    b = list(PoolMember.objects.filter(pool=pool_b).values_list("trajectory_id", flat=True))
    approve(propose_description(pool_a, a[0], "red", panel=1), annotators)
    query = propose_query(pool_a, a[0], "red")
    proposal = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
    pair = CrossPair.objects.create(query=query, trajectory_id=b[0], stratum="hard_negative",
                                    strata=["hard_negative"], provenance=[], similarity=0.7, proposal=proposal,
                                    review="queued")
    return WorkItem.objects.create(stage="pair", video_id=query.video_id, pair=pair, panel_size=1,
                                   required_votes=1, prelabels={"proposal": proposal})


def _vote(item, user, label, **kwargs):
    seat(item, user)
    vote_cast(item_id=item.pk, annotator=user, label=label, **kwargs)
    item.refresh_from_db()
    return item


def test_contradicting_reviews_of_a_training_pair_go_to_adjudication(train_pair, annotators, adjudicator):
    item = _vote(train_pair, annotators[0], "match")             # against the writer's 0: a second review
    assert (item.state, item.panel_size) == ("open", 2)
    item = _vote(item, annotators[1], "mismatch")
    assert item.state == "adjudicate"                            # not left ⊥ as before
    assert not Relation.objects.filter(query=item.pair.query, trajectory=item.pair.trajectory).exists()
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="match", reason="the top is red")
    item.refresh_from_db()
    assert item.state == "decided"
    relation = Relation.objects.get(query=item.pair.query, trajectory=item.pair.trajectory)
    assert (relation.label, relation.source, relation.pseudo) == (1, "adjudicated", False)


def test_an_unsure_second_review_of_a_training_pair_stays_unresolved(train_pair, annotators):
    item = _vote(train_pair, annotators[0], "uncertain")
    item = _vote(item, annotators[1], "uncertain")
    assert item.state == "unresolved"                            # uncertainty on train keeps ⊥ (E.3.1)
    relation = Relation.objects.get(query=item.pair.query, trajectory=item.pair.trajectory)
    assert relation.label == -1 and not relation.pseudo


def test_training_mining_targets_only_trajectories_with_an_accepted_source_query(reviewable_run, annotators):
    """L_bi compares the indexed positive records: on train, candidates are query targets (E.3.2)."""
    from annotation.benchmark.services.mining import mining_run_create, mining_run_execute
    from annotation.models import Query
    from tests.annotation.conftest import review_row

    pools = [frozen_pool(reviewable_run, annotators, "train") for _ in range(2)]
    members = [list(PoolMember.objects.filter(pool=p).values_list("trajectory_id", flat=True)) for p in pools]
    queries = []
    for pool, tids, colour in zip(pools, members, ("red", "yellow")):
        approve(propose_description(pool, tids[0], colour, panel=1), annotators)
        approve(propose_description(pool, tids[1], "blue", panel=1), annotators)      # described, no query
        query = review_row(propose_query(pool, tids[0], colour), annotators[3], {t: int(t == tids[0]) for t in tids})
        assert query.status == Query.Status.ACCEPTED, query.rejection_reason
        queries.append(query)
    run = mining_run_create(split="train", queue=False, config={
        "potential_k": 5, "hard_k": 5, "easy_k": 5, "easy_max": 0.99, "random_k": 5, "easy_review_rate": 1.0})
    mining_run_execute(run=run)
    mined = set(CrossPair.objects.values_list("query_id", "trajectory_id"))
    targets = {q.target_id for q in queries}
    assert mined == {(queries[0].pk, queries[1].target_id), (queries[1].pk, queries[0].target_id)}
    assert {t for _, t in mined} <= targets
    run.refresh_from_db()
    assert run.log["members_without_source_query"] == 6
    # a run may still ask for every trajectory (say, to audit the selection)
    every = mining_run_create(split="train", queue=False, config={"source_query_only": False, "random_k": 5})
    mining_run_execute(run=every)
    assert {t for _, t in CrossPair.objects.values_list("query_id", "trajectory_id")} - targets


def test_a_rule_reads_only_similarities_of_its_own_encoder(world, reviewable_run, annotators):
    from annotation.benchmark.services.pseudolabels import (
        pseudo_labels_apply,
        pseudo_rule_calibrate,
        pseudo_rule_declare,
    )
    from annotation.models import CrossPair
    from common.errors import ConflictError
    from tests.annotation.conftest import reviewed_pair

    approve(world.green, annotators)
    approve(propose_description(world.pool_b, world.b[1], "black", panel=1), annotators)
    for query, trajectory_id in [(world.qa, world.b[0]), (world.qa, world.b[1]), (world.qb, world.a[0]),
                                 (world.qb, world.a[1]), (world.qb, world.a[2])]:
        reviewed_pair(query, trajectory_id, 0)                  # similarities of "minilm"
    other = pseudo_rule_declare(rule={"name": "clip rule", "s_max": 0.3, "encoder": "clip"}, declared_bound=0.5)
    with pytest.raises(ConflictError, match="5 dev pairs have a similarity of another encoder") as refused:
        pseudo_rule_calibrate(rule_row=other)
    assert refused.value.code == "audit_too_small"
    rule = pseudo_rule_calibrate(rule_row=pseudo_rule_declare(
        rule={"name": "minilm rule", "s_max": 0.3, "encoder": "minilm"}, declared_bound=0.5))
    assert rule.accepted and rule.calibration["n"] == 5
    # train: two unreviewed pairs with contradicting facts, one scored by another encoder
    pool_c, pool_d = (frozen_pool(reviewable_run, annotators, "train") for _ in range(2))
    c0 = PoolMember.objects.filter(pool=pool_c).first().trajectory_id
    d = list(PoolMember.objects.filter(pool=pool_d).values_list("trajectory_id", flat=True))
    approve(propose_description(pool_c, c0, "red", panel=1), annotators)
    approve(propose_description(pool_d, d[0], "blue", panel=1), annotators)
    approve(propose_description(pool_d, d[1], "green", panel=1), annotators)
    query = propose_query(pool_c, c0, "red")
    for tid, encoder in ((d[0], "minilm"), (d[1], "clip")):
        CrossPair.objects.create(query=query, trajectory_id=tid, stratum="easy_negative", strata=["easy_negative"],
                                 provenance=[{"stratum": "easy_negative", "encoder": encoder}], similarity=0.05,
                                 review="not_sampled")
    result = pseudo_labels_apply(rule_row=rule)
    assert (result["labelled"], result["other_encoder"]) == (1, 1)
    assert list(Relation.objects.filter(pseudo=True).values_list("trajectory_id", flat=True)) == [d[0]]


def test_unresolved_identity_pairs_are_flagged_on_the_relation_rows_of_their_video(
        reviewable_run, annotators, adjudicator, client_for):
    from annotation.curation.selectors import review_target
    from annotation.curation.services.pools import pool_freeze
    from annotation.models import ReviewPolicy
    from tests.annotation.conftest import panel_votes
    from tests.trajectories.factories import video_factory

    ReviewPolicy.objects.update_or_create(name="default", defaults={"panel_size": 1, "required_votes": 1})
    run = reviewable_run(video_factory(split="dev"))
    for item in WorkItem.objects.filter(stage="usability", trajectory__run=run):
        panel_votes(item, annotators[:1], ["usable"])
    identity = WorkItem.objects.get(stage="identity", duplicate__trajectory_a__run=run)
    assert panel_votes(identity, annotators[:1], ["uncertain"]).state == "adjudicate"
    adjudication_cast(item_id=identity.pk, adjudicator=adjudicator, label="uncertain", reason="cannot tell")
    identity.refresh_from_db()
    assert identity.state == "unresolved"
    pool = pool_freeze(run=run)
    pair = sorted([identity.duplicate.trajectory_a_id, identity.duplicate.trajectory_b_id])
    assert set(pair) <= set(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    members = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    approve(propose_description(pool, members[0], "red", panel=1), annotators)
    row = WorkItem.objects.get(stage="relation", query=propose_query(pool, members[0], "red"))
    assert review_target(item=row, viewer=annotators[2])["relation_row"]["unresolved_identity"] == [pair]
    seat_ = client_for(annotators[2]).post("/api/review/next/", {"stage": "relation"}, format="json").json()
    assert seat_["target"]["relation_row"]["unresolved_identity"] == [pair]


def test_releases_count_the_queries_rejected_for_bottom_per_split(reviewable_run, annotators, adjudicator):
    from annotation.models import Query
    from annotation.releases.services.pseudonyms import reviewer_pseudonyms_assign
    from annotation.releases.services.release_io.statistics import release_statistics
    from annotation.releases.services.release_io.tables import ReleaseScope
    from tests.annotation.conftest import review_row

    pool = frozen_pool(reviewable_run, annotators, "dev")
    m = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    approve(propose_description(pool, m[0], "red", panel=1), annotators)
    approve(propose_description(pool, m[1], "blue", panel=1), annotators)
    accepted = review_row(propose_query(pool, m[0], "red"), annotators[3], {m[0]: 1, m[1]: 0, m[2]: 0, m[3]: 0})
    assert accepted.status == Query.Status.ACCEPTED
    blue = propose_query(pool, m[1], "blue")
    row = WorkItem.objects.get(stage="relation", query=blue)
    _vote(row, annotators[3], "reviewed", judgments={m[0]: 0, m[1]: 1, m[2]: -1, m[3]: 0},
          payload={"faithful": True, "natural": 4})
    row = _vote(row, annotators[4], "reviewed", judgments={m[2]: -1})  # the second review is unsure too
    assert row.state == "adjudicate"                                  # dev ⊥ is adjudicated first
    adjudication_cast(item_id=row.pk, adjudicator=adjudicator, label="reviewed", reason="never in view",
                      judgments={m[2]: -1})                           # the adjudicator cannot tell either
    blue.refresh_from_db()
    assert blue.status == Query.Status.REJECTED and "fully binary row" in blue.rejection_reason
    scope = ReleaseScope.of(["dev"])
    reviewer_pseudonyms_assign(people=scope.people())                 # as release_create does first
    stats = release_statistics(scope)
    assert stats["queries_rejected_for_bottom"] == {"dev": {"within_video": 1, "cross_video": 0}}
