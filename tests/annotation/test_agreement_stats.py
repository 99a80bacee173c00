"""Agreement statistics of stored votes: the service, the API and the command."""
from __future__ import annotations

import io
import json

import krippendorff
import numpy as np
import pytest
from django.core.management import call_command

from annotation.models import WorkItem
from annotation.services.agreement import agreement_stats
from annotation.services.votes import adjudication_cast
from tests.annotation.conftest import panel_votes

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
    from annotation.services.agreement import decisions_audit

    audit = decisions_audit(stage="usability")
    assert audit["mismatched"] == [] and audit["outcomes"] == {"decided": 4}
    items, _ = voted
    WorkItem.objects.filter(pk=items[0].pk).update(state="adjudicate", decision="")  # a corrupted state
    assert decisions_audit(stage="usability")["mismatched"] == [items[0].pk]
