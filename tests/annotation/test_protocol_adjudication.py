"""Appendix E rules on adjudication (issue 14): a dev/test row's ⊥ is adjudicated before its query
is admitted or rejected, and a judgment reopened by a consolidation conflict is decided by
``decide`` over all its votes."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages.relation import BOTTOM_ROW
from annotation.models import PoolMember, Query, Relation, WorkItem
from annotation.rules import ADJUDICATE, UNRESOLVED, decide, decide_reopened
from common.errors import ApplicationError
from tests.annotation.conftest import approve, frozen_pool, propose_description, propose_query, seat


# -- the pure rule of a reopened judgment --------------------------------------------------------
def test_a_reopened_judgment_waits_for_its_adjudication():
    assert decide_reopened(["same"] * 3, ("same", "different"), adjudicated=False) == ADJUDICATE


def test_a_reopened_judgment_counts_every_vote_as_one_panel():
    decisive = ("same", "different")
    assert decide_reopened(["same", "same", "different", "different"], decisive, adjudicated=True) == UNRESOLVED
    assert decide_reopened(["same", "same", "same", "different"], decisive, adjudicated=True) == "same"
    assert decide_reopened(["same", "different", "uncertain", "different"], decisive, adjudicated=True) == "different"
    # the panel's own majority does not settle it, as it would under the plain rule
    assert decide(["same", "same", "different", "different"], decisive) == "same"


@given(st.lists(st.sampled_from(["same", "different", "uncertain"]), min_size=4, max_size=9))
def test_a_reopened_judgment_never_goes_back_to_adjudication(votes):
    outcome = decide_reopened(votes, ("same", "different"), adjudicated=True)
    n_same, n_different = votes.count("same"), votes.count("different")
    if max(n_same, n_different) >= 2 and n_same != n_different:
        assert outcome == ("same" if n_same > n_different else "different")
    else:
        assert outcome == UNRESOLVED


# -- a dev/test row's ⊥ goes to adjudication -----------------------------------------------------
def _row(reviewable_run, annotators, split):
    """A query of a ``split`` pool whose first review is unsure of one candidate (disputed)."""
    pool = frozen_pool(reviewable_run, annotators, split)
    m = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    approve(propose_description(pool, m[0], "red", panel=1), annotators)
    query = propose_query(pool, m[0], "red")
    item = WorkItem.objects.get(stage="relation", query=query)
    seat(item, annotators[3])
    vote_cast(item_id=item.pk, annotator=annotators[3], label="reviewed", judgments={m[0]: 1, m[1]: 0, m[2]: -1, m[3]: 0},
              payload={"faithful": True, "natural": 4})
    seat(item, annotators[4])
    vote_cast(item_id=item.pk, annotator=annotators[4], label="reviewed", judgments={m[2]: -1})  # unsure too
    item.refresh_from_db()
    query.refresh_from_db()
    return item, query, m


@pytest.mark.django_db
def test_a_dev_row_left_bottom_is_adjudicated_before_its_query_is_admitted(reviewable_run, annotators, adjudicator):
    item, query, m = _row(reviewable_run, annotators, "dev")
    assert item.state == "adjudicate"                            # not rejected straight away
    assert query.status == Query.Status.IN_REVIEW and not Relation.objects.filter(query=query).exists()
    with pytest.raises(ApplicationError) as missing:
        adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="seen")
    assert missing.value.code == "judgments_required"
    with pytest.raises(ApplicationError) as wrong:
        adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="seen",
                          judgments={m[2]: 0, m[1]: 0})
    assert wrong.value.code == "not_bottom" and wrong.value.extra["candidates"] == [m[2]]
    with pytest.raises(ApplicationError) as bad:
        adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="seen",
                          judgments={m[2]: 2})
    assert bad.value.code == "invalid_judgments"
    assert not item.votes.filter(is_adjudication=True).exists()  # nothing half-written
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="its top is blue",
                      judgments={m[2]: 0})
    item.refresh_from_db()
    query.refresh_from_db()
    assert (item.state, item.decision) == ("decided", "reviewed")
    assert query.status == Query.Status.ACCEPTED, query.rejection_reason
    relation = Relation.objects.get(query=query, trajectory_id=m[2])
    assert (relation.label, relation.source) == (0, "adjudicated")
    assert relation.evidence["reviews"] == [-1, -1] and relation.evidence["adjudication"] == 0
    assert Relation.objects.get(query=query, trajectory_id=m[0]).source == "human"


@pytest.mark.django_db
def test_a_test_row_the_adjudicator_cannot_tell_either_rejects_its_query(reviewable_run, annotators, adjudicator):
    item, query, m = _row(reviewable_run, annotators, "test")
    assert item.state == "adjudicate"
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="fully occluded",
                      judgments={m[2]: -1})
    query.refresh_from_db()
    assert query.status == Query.Status.REJECTED and BOTTOM_ROW in query.rejection_reason
    assert "adjudication" in query.rejection_reason
    relation = Relation.objects.get(query=query, trajectory_id=m[2])
    assert (relation.label, relation.source) == (-1, "pool")


@pytest.mark.django_db
def test_a_training_row_keeps_its_bottom_without_adjudication(reviewable_run, annotators):
    item, query, m = _row(reviewable_run, annotators, "train")
    assert (item.state, item.decision) == ("decided", "reviewed")
    assert query.status == Query.Status.ACCEPTED, query.rejection_reason
    assert Relation.objects.get(query=query, trajectory_id=m[2]).label == -1


@pytest.mark.django_db
def test_other_stages_refuse_judgments_in_an_adjudication(reviewable_run, annotators, adjudicator):
    from tests.annotation.conftest import panel_votes

    run = reviewable_run()
    item = WorkItem.objects.filter(stage="usability", trajectory__run=run).first()
    panel_votes(item, annotators[:3], ["usable", "unusable", "uncertain"])
    assert item.state == "adjudicate"
    with pytest.raises(ApplicationError) as err:
        adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="usable", reason="fine",
                          judgments={item.trajectory_id: 1})
    assert err.value.code == "unexpected_fields"


@pytest.mark.django_db
def test_the_adjudication_api_shows_the_bottom_candidates_and_takes_their_labels(
        reviewable_run, annotators, adjudicator, client_for):
    item, query, m = _row(reviewable_run, annotators, "dev")
    client = client_for(adjudicator)
    body = client.get(f"/api/adjudication/{item.pk}/").json()
    assert body["target"]["relation_row"]["bottom"] == [m[2]]
    assert [v["judgments"] for v in body["votes"]] == [
        {str(m[0]): 1, str(m[1]): 0, str(m[2]): -1, str(m[3]): 0}, {str(m[2]): -1}]
    refused = client.post(f"/api/adjudication/{item.pk}/", {"label": "reviewed", "reason": "seen",
                                                              "judgments": {str(m[1]): 1}}, format="json")
    assert refused.status_code == 400 and refused.json()["code"] == "not_bottom"
    done = client.post(f"/api/adjudication/{item.pk}/", {"label": "reviewed", "reason": "the top is red",
                                                           "judgments": {str(m[2]): 0}}, format="json")
    assert done.status_code == 201, done.content
    assert done.json()["judgments"] == {str(m[2]): 0} and done.json()["is_adjudication"]
    query.refresh_from_db()
    assert query.status == Query.Status.ACCEPTED
