"""Agreement statistics of stored votes: the service, the API and the command."""
from __future__ import annotations

import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command

from annotation.curation.services.agreement import agreement_stats
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.models import CrossPair, PoolMember, WorkItem
from tests.annotation.conftest import (
    frozen_pool,
    panel_votes,
    propose_description,
    review_row,
    seat,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def voted(reviewable_run, annotators, adjudicator):
    reviewable_run()
    items = list(WorkItem.objects.filter(stage="usability").order_by("id"))
    patterns = [["usable"] * 3, ["usable", "usable", "unusable"], ["unusable", "uncertain", "usable"],
                ["unusable"] * 3]
    for item, labels in zip(items, patterns):
        panel_votes(item, annotators[:3], labels)
    adjudication_cast(item_id=items[2].pk, adjudicator=adjudicator, label="unusable", reason="blurred")
    return items, patterns


def test_the_report_matches_an_independent_computation(voted, annotators):
    _, patterns = voted
    report = agreement_stats(stage="usability")
    assert (report["n_items"], report["n_votes"], report["n_adjudication_votes"]) == (4, 13, 1)
    assert report["vote_distributions"]["patterns"] == {"3-0": 2, "2-1": 1, "1-1-1": 1}
    # raw agreement: per item, agreeing pairs out of 3 -> (1 + 1/3 + 0 + 1) / 4
    assert report["raw_agreement"] == pytest.approx((1 + 1 / 3 + 0 + 1) / 4)
    labels = ["usable", "unusable", "uncertain"]
    data = np.array([[labels.index(p[r]) for p in patterns] for r in range(3)], float)  # [raters, items]
    assert report["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    assert report["adjudication_rate"] == pytest.approx(0.25)
    assert set(report["per_rater"]) == {a.username for a in annotators[:3]} | {"adj"}


def test_api_and_command(voted, manager_client, client_for, annotators):
    r = manager_client.get("/api/review/agreement/?stage=usability&split=train")
    assert r.status_code == 200 and r.json()["n_items"] == 4
    assert manager_client.get("/api/review/agreement/?stage=usability&split=test").json()["n_items"] == 0
    assert manager_client.get("/api/review/agreement/?stage=relations").status_code == 400
    assert client_for(annotators[0]).get("/api/review/agreement/?stage=usability").status_code == 403
    out = io.StringIO()
    call_command("agreement", "--stage", "usability", stdout=out)
    assert "krippendorff_alpha" in out.getvalue() and "ann0" in out.getvalue()
    out = io.StringIO()
    call_command("agreement", "--stage", "identity", "--json", stdout=out)
    empty = json.loads(out.getvalue())
    assert empty["n_votes"] == 0 and empty["fleiss_kappa"] is None  # undefined, not NaN


def test_the_bulk_audit_agrees_with_the_stored_states(voted):
    from annotation.curation.services.agreement import decisions_audit

    audit = decisions_audit(stage="usability")
    assert audit["mismatched"] == [] and audit["outcomes"] == {"decided": 4}
    items, _ = voted
    WorkItem.objects.filter(pk=items[0].pk).update(state="adjudicate", decision="")  # a corrupted state
    assert decisions_audit(stage="usability")["mismatched"] == [items[0].pk]


# -- every stage through one endpoint ----------------------------------------------------------------
SHAPE = {"n_items", "n_votes", "n_panel_votes", "n_adjudication_votes", "labels", "vote_distributions",
         "raw_agreement", "fleiss_kappa", "krippendorff_alpha", "adjudication_rate", "time_per_vote",
         "time_per_item", "per_rater", "stage", "split"}


def test_every_stage_answers_with_the_same_shape(manager_client):
    for stage in ("usability", "identity", "description", "relation", "pair"):
        r = manager_client.get(f"/api/review/agreement/?stage={stage}")
        assert r.status_code == 200, stage
        assert SHAPE <= set(r.json()) and r.json()["stage"] == stage
    r = manager_client.get("/api/review/agreement/?stage=relations")
    assert r.status_code == 400
    message = str(r.json())
    assert "usability, identity, description, relation, pair" in message and "Stage." not in message


def test_identity_agreement_by_hand(reviewable_run, annotators):
    reviewable_run()
    item = WorkItem.objects.get(stage="identity")
    panel_votes(item, annotators[:3], ["same", "same", "different"])
    report = agreement_stats(stage="identity")
    assert (report["n_items"], report["n_votes"]) == (1, 3)
    assert report["vote_distributions"]["patterns"] == {"3-0": 0, "2-1": 1, "1-1-1": 0}
    assert report["raw_agreement"] == pytest.approx(1 / 3)          # one agreeing pair of three
    assert report["labels"] == ["same", "different", "uncertain"]
    assert report["per_rater"]["ann2"]["agreement_with_majority"] == 0.0
    assert report["per_rater"]["ann0"]["agreement_with_majority"] is None   # the others split 1-1: unscored
    assert report["per_rater"]["ann0"]["n_scored"] == 0 and report["per_rater"]["ann2"]["n_scored"] == 1


def test_description_agreement_by_hand(reviewable_run, annotators, adjudicator):
    pool = frozen_pool(reviewable_run, annotators, "dev")
    members = list(PoolMember.objects.filter(pool=pool).values_list("trajectory_id", flat=True))
    versions = [propose_description(pool, members[0], "red"), propose_description(pool, members[1], "blue")]
    panel_votes(WorkItem.objects.get(description=versions[0]), annotators[:3], ["usable"] * 3)
    item = panel_votes(WorkItem.objects.get(description=versions[1]), annotators[:3],
                       ["usable", "unusable", "uncertain"])
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="unusable", reason="not the person")
    report = agreement_stats(stage="description")
    assert (report["n_items"], report["n_votes"], report["n_adjudication_votes"]) == (2, 7, 1)
    assert report["vote_distributions"]["patterns"] == {"3-0": 1, "2-1": 0, "1-1-1": 1}
    assert report["raw_agreement"] == pytest.approx((1 + 0) / 2)
    assert report["adjudication_rate"] == pytest.approx(0.5)
    assert report["labels"] == ["usable", "usable_after_minor_correction", "unusable", "uncertain"]
    # the panel votes of both items, raters as rows: alpha as the reference computes it
    data = np.array([[0, 0], [0, 2], [0, 3]], float)                    # [raters, items]
    assert report["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))


def test_relation_agreement_counts_each_candidate_of_a_row(world, annotators):
    # the red row: prelabels 1 (red), 0 (blue), ⊥ (green, in review), ⊥ (undescribed)
    a = world.a
    item = WorkItem.objects.get(stage="relation", query=world.qa)
    seat(item, annotators[3])
    vote_cast(item_id=item.pk, annotator=annotators[3], label="reviewed", time_spent_ms=8000,
              judgments={a[0]: 1, a[1]: 1, a[2]: 0, a[3]: -1}, payload={"faithful": True, "natural": 4})
    item.refresh_from_db()
    assert sorted(item.disputed) == sorted([a[1], a[3]])             # against the pre-label 0, and ⊥
    seat(item, annotators[4])
    vote_cast(item_id=item.pk, annotator=annotators[4], label="reviewed", time_spent_ms=3000,
              judgments={a[1]: 0, a[3]: -1})
    report = agreement_stats(stage="relation")
    # units: the four candidates; a[1] and a[3] were labelled twice
    assert (report["n_items"], report["n_votes"]) == (4, 6)
    assert report["labels"] == ["1", "0", "⊥"]
    assert report["label_counts"] == {"1": 2, "0": 2, "⊥": 2}
    # the units labelled twice are the disputed ones: no coefficient over them, a dispute rate instead
    assert report["review"]["kind"] == "single_review"
    assert report["vote_distributions"]["patterns"] == {}
    assert report["raw_agreement"] is report["fleiss_kappa"] is report["krippendorff_alpha"] is None
    assert (report["dispute"]["n_units"], report["dispute"]["n_disputed"]) == (4, 2)
    assert report["dispute"]["first_labels"] == {"1": 2, "0": 1, "⊥": 1}
    assert report["dispute"]["second_review_labels"] == {"1": 0, "0": 1, "⊥": 1}
    # a row's time is spread over the candidates it labels: 8 s over 4, 3 s over 2
    assert report["per_rater"]["ann3"]["mean_time"] == pytest.approx(2.0)
    assert report["per_rater"]["ann4"]["mean_time"] == pytest.approx(1.5)
    assert (report["per_rater"]["ann3"]["n_votes"], report["per_rater"]["ann4"]["n_votes"]) == (4, 2)


def test_pair_agreement_by_hand(world, annotators):
    review_row(world.qa, annotators[3], {world.a[0]: 1, world.a[1]: 0, world.a[2]: 0, world.a[3]: 0})
    proposal = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
    items = []
    for tid in world.b[:2]:
        pair = CrossPair.objects.create(query=world.qa, trajectory_id=tid, stratum="hard_negative",
                                        strata=["hard_negative"], provenance=[], similarity=0.5,
                                        proposal=proposal, review="queued")
        items.append(WorkItem.objects.create(stage="pair", video_id=world.qa.video_id, pair=pair, panel_size=1,
                                             required_votes=1, prelabels={"proposal": proposal}))
    for item, first, second in ((items[0], "match", "match"), (items[1], "match", "mismatch")):
        seat(item, annotators[0])
        vote_cast(item_id=item.pk, annotator=annotators[0], label=first)    # against the proposal: widened
        seat(item, annotators[1])
        vote_cast(item_id=item.pk, annotator=annotators[1], label=second)
    report = agreement_stats(stage="pair")
    assert (report["n_items"], report["n_votes"]) == (2, 4)
    assert report["raw_agreement"] is None and report["vote_distributions"]["patterns"] == {}
    assert report["dispute"] == {"n_units": 2, "n_disputed": 2, "rate": 1.0, "ci95": [pytest.approx(0.1581, abs=1e-4), 1.0],
                                 "first_labels": {"match": 2, "mismatch": 0, "uncertain": 0},
                                 "second_review_labels": {"match": 1, "mismatch": 1, "uncertain": 0}}
    assert report["per_rater"]["ann1"]["n_votes"] == 2


def test_the_command_takes_every_stage(world):
    for stage in ("description", "relation", "pair"):
        out = io.StringIO()
        call_command("agreement", "--stage", stage, "--json", stdout=out)
        assert json.loads(out.getvalue())["stage"] == stage
