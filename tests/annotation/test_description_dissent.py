"""A description correction that loses to two plain approvals is kept as recorded dissent (E.2,
issue 14) and read by adjudicators and auditors, never by annotators nor during a blind audit."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from annotation.benchmark.services.descriptions import description_dissent_record
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.models import Description, DescriptionDissent, PoolMember, Query, WorkItem
from tests.annotation.conftest import content, frozen_pool, propose_description, propose_query, seat

pytestmark = pytest.mark.django_db


def _dissenting(pool, trajectory_id, annotators):
    """A red description approved by two plain votes over a third reviewer's correction to dark red."""
    version = propose_description(pool, trajectory_id, "red", panel=3)
    item = WorkItem.objects.get(description=version)
    corrected = content("red")
    corrected["facts"][0] = {**corrected["facts"][0], "value": "dark red"}
    for user, label, correction in ((annotators[0], "usable", None), (annotators[1], "usable_after_minor_correction",
                                                                      corrected), (annotators[2], "usable", None)):
        seat(item, user)
        vote_cast(item_id=item.pk, annotator=user, label=label, correction=correction,
                  reasons=["a fact is wrong"] if correction else [])
    version.description.refresh_from_db()
    return version, item


@pytest.fixture
def dev_row(reviewable_run, annotators, adjudicator):
    """A dev pool whose first member's description carries dissent, and its query's row in
    adjudication (the second review left a candidate ⊥)."""
    pool = frozen_pool(reviewable_run, annotators, "dev")
    m = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    version, description_item = _dissenting(pool, m[0], annotators)
    query = propose_query(pool, m[0], "red")
    row = WorkItem.objects.get(stage="relation", query=query)
    seat(row, annotators[3])
    vote_cast(item_id=row.pk, annotator=annotators[3], label="reviewed", judgments={m[0]: 1, m[1]: 0, m[2]: -1, m[3]: 0},
              payload={"faithful": True, "natural": 4})
    seat(row, annotators[4])
    vote_cast(item_id=row.pk, annotator=annotators[4], label="reviewed", judgments={m[2]: -1})
    row.refresh_from_db()
    return version, description_item, row, query, m


def test_a_correction_that_loses_to_two_approvals_is_recorded_as_dissent(reviewable_run, annotators):
    pool = frozen_pool(reviewable_run, annotators, "train")
    m = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    version, item = _dissenting(pool, m[0], annotators)
    description = version.description
    assert description.status == Description.Status.APPROVED and description.approved_version_id == version.pk
    dissent = DescriptionDissent.objects.get(description=description)
    correction_vote = item.votes.get(label="usable_after_minor_correction")
    assert (dissent.vote_id, dissent.correction_id, dissent.approved_version_id, dissent.item_id) == (
        correction_vote.pk, correction_vote.correction_id, version.pk, item.pk)
    assert description_dissent_record(item=item, approved=version) == []         # recorded once
    # a record: neither the service's rows nor raw SQL change or remove it
    with pytest.raises(IntegrityError), transaction.atomic():
        DescriptionDissent.objects.filter(pk=dissent.pk).update(item=item)
    with pytest.raises(IntegrityError), transaction.atomic():
        DescriptionDissent.objects.filter(pk=dissent.pk).delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        DescriptionDissent.objects.create(description=description, item=item, vote=item.votes.first(),
                                          correction=version, approved_version=version)


def test_unanimous_approval_records_no_dissent(reviewable_run, annotators):
    from tests.annotation.conftest import approve

    pool = frozen_pool(reviewable_run, annotators, "train")
    member = PoolMember.objects.filter(pool=pool).first()
    approve(propose_description(pool, member.trajectory_id, "red", panel=3), annotators)
    assert not DescriptionDissent.objects.exists()


def test_adjudicators_read_the_dissent_annotators_do_not(dev_row, adjudicator, annotators, client_for):
    version, _, row, _, m = dev_row
    detail = f"/api/descriptions/{version.description_id}/"
    body = client_for(adjudicator).get(detail).json()
    [dissent] = body["dissent"]
    assert dissent["differences"] == [{"field": "fact f1 (upper_colour)", "approved": "red", "corrected": "dark red"}]
    assert dissent["reasons"] == ["a fact is wrong"] and dissent["trajectory"] == m[0]
    assert "annotator" not in dissent
    assert client_for(annotators[0]).get(detail).json()["dissent"] is None
    item = client_for(adjudicator).get(f"/api/adjudication/{row.pk}/").json()   # the row reads that description
    assert [d["id"] for d in item["dissent"]] == [dissent["id"]]
    queue = client_for(adjudicator).get("/api/adjudication/").json()
    assert [d["id"] for d in next(i for i in queue if i["item"] == row.pk)["dissent"]] == [dissent["id"]]


def test_auditors_read_the_dissent_once_their_blind_verdict_is_in(dev_row, adjudicator, auditor, client_for):
    from annotation.releases.services.audits import audit_create

    version, _, row, query, m = dev_row
    adjudication_cast(item_id=row.pk, adjudicator=adjudicator, label="reviewed", reason="seen", judgments={m[2]: 0})
    query.refresh_from_db()
    assert query.status == Query.Status.ACCEPTED
    audit = audit_create(split="dev", n_random=5, n_difficult=0, kinds=["description"])
    client = client_for(auditor)
    detail = f"/api/descriptions/{version.description_id}/"
    assert len(client.get(detail).json()["dissent"]) == 1                     # outside an audit
    sample = client.post(f"/api/audits/{audit.pk}/next/").json()
    assert sample["record"]["description"] == version.description_id
    assert "dissent" not in sample["record"]                                   # blind while judging
    assert client.get(detail).json()["dissent"] is None
    judged = client.post(f"/api/audits/{audit.pk}/judgments/", {"sample": sample["sample"], "verdict": "correct"},
                         format="json")
    assert judged.status_code == 201, judged.content
    assert [d["correction"] for d in judged.json()["dissent"]] == [
        DescriptionDissent.objects.get().correction_id]
    assert len(client.get(detail).json()["dissent"]) == 1
