"""Single-review stages report their dispute rate and their first labels against the blind audit,
never a coefficient over the disputed units alone; three-vote panels keep their figures."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from statsmodels.stats.proportion import proportion_confint

from annotation.curation.services.agreement import agreement_stats
from annotation.curation.services.agreement_review import dispute_stats
from annotation.curation.services.votes import adjudication_cast, vote_cast
from annotation.curation.stages.base import AgreementRows
from annotation.models import Relation, WorkItem
from annotation.releases.services.audits import (
    audit_create,
    audit_judgment_record,
    audit_sample_claim_next,
)
from annotation.releases.services.release_io.agreement_card import agreement_section
from tests.annotation.conftest import review_row, seat

pytestmark = pytest.mark.django_db


def _exact(successes: int, n: int) -> list[float]:
    return list(proportion_confint(successes, n, alpha=0.05, method="beta"))


def _disputed_row(world, annotators) -> WorkItem:
    """The demo's pattern: a row whose first review disputes two candidates (one against its binary
    pre-label, one ⊥), so only those two get a second review."""
    a = world.a
    item = WorkItem.objects.get(stage="relation", query=world.qa)
    seat(item, annotators[3])
    vote_cast(item_id=item.pk, annotator=annotators[3], label="reviewed",
              judgments={a[0]: 1, a[1]: 1, a[2]: 0, a[3]: -1}, payload={"faithful": True, "natural": 4})
    seat(item, annotators[4])
    vote_cast(item_id=item.pk, annotator=annotators[4], label="reviewed", judgments={a[1]: 0, a[3]: -1})
    item.refresh_from_db()
    return item


def test_only_disputed_units_second_reviewed_give_a_dispute_rate_not_a_kappa(world, annotators):
    _disputed_row(world, annotators)
    review_row(world.qb, annotators[3], {world.b[0]: 1, world.b[1]: 0, world.b[2]: 0, world.b[3]: 0})  # no dispute
    report = agreement_stats(stage="relation")
    assert report["raw_agreement"] is None and report["fleiss_kappa"] is None
    assert report["krippendorff_alpha"] is None and report["vote_distributions"]["patterns"] == {}
    assert all(r["agreement_with_majority"] is None for r in report["per_rater"].values())
    dispute = report["dispute"]
    assert (dispute["n_units"], dispute["n_disputed"]) == (8, 2)
    assert dispute["rate"] == pytest.approx(0.25)
    assert dispute["ci95"] == pytest.approx(_exact(2, 8))
    assert report["review"]["people_per_unit"].startswith("1, or 2")

    # the command says the same, with no coefficient
    out = io.StringIO()
    call_command("agreement", "--stage", "relation", stdout=out)
    text = out.getvalue()
    assert "dispute rate" in text and "0.250" in text and "fleiss_kappa" not in text
    # three-vote panels keep their coefficients and say who saw each item
    usability = agreement_stats(stage="usability")
    assert usability["review"]["kind"] == "panel" and "fleiss_kappa" in usability and "dispute" not in usability


def test_a_row_awaiting_its_second_review_is_left_out_of_the_dispute_rate(world, annotators):
    item = WorkItem.objects.get(stage="relation", query=world.qa)
    seat(item, annotators[3])
    vote_cast(item_id=item.pk, annotator=annotators[3], label="reviewed",
              judgments={t: 1 if i == 0 else -1 for i, t in enumerate(world.a)},
              payload={"faithful": True, "natural": 4})
    review_row(world.qb, annotators[3], {world.b[0]: 1, world.b[1]: 0, world.b[2]: 0, world.b[3]: 0})
    report = agreement_stats(stage="relation")
    assert (report["dispute"]["n_units"], report["dispute"]["n_disputed"]) == (4, 0)
    assert report["dispute"]["ci95"] == pytest.approx(_exact(0, 4))


def test_first_labels_against_the_blind_audit_by_hand(world, annotators, adjudicator, auditor):
    a = world.a
    item = _disputed_row(world, annotators)
    assert item.state == WorkItem.State.ADJUDICATE                  # dev: a[1] (1 then 0) and a[3] stay ⊥
    adjudication_cast(item_id=item.pk, adjudicator=adjudicator, label="reviewed", reason="looked again",
                      judgments={a[1]: 0, a[3]: 0})
    final = dict(Relation.objects.filter(query=world.qa).values_list("trajectory_id", "label"))
    assert final == {a[0]: 1, a[1]: 0, a[2]: 0, a[3]: 0}
    audit = audit_create(split="dev", n_random=10, n_difficult=0, kinds=["relation"], seed=1)
    # the auditor: a[0] right; a[1] should be a match; a[2] wrong for another reason; a[3] right
    verdicts = {a[0]: ("correct", ""), a[1]: ("error", "should_be_match"), a[2]: ("error", "other"),
                a[3]: ("correct", "")}
    for _ in range(audit.samples.count()):
        sample = audit_sample_claim_next(audit=audit, auditor=auditor)
        verdict, error_type = verdicts[sample.recorded["trajectory"]]
        audit_judgment_record(sample=sample, auditor=auditor, verdict=verdict, error_type=error_type)
    # first labels 1, 1, 0, ⊥ against the auditor's 1, 1, "not 0", 0: two agree
    found = agreement_stats(stage="relation", split="dev")["audit_agreement"]
    assert (found["n_judged"], found["n_agree"], found["agreement"]) == (4, 2, 0.5)
    assert found["ci95"] == pytest.approx(_exact(2, 4))
    assert found["table"] == {"1": {"1": 2}, "0": {"not the accepted label": 1}, "⊥": {"0": 1}}
    assert agreement_stats(stage="relation", split="test")["audit_agreement"]["n_judged"] == 0
    assert agreement_stats(stage="pair")["audit_agreement"]["n_judged"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_dispute_stats_match_a_plain_loop(seed):
    rng = np.random.default_rng(seed)
    n_units = int(rng.integers(1, 40))
    unit, category, adjudication = [], [], []
    for u in rng.permutation(n_units):                   # votes in casting order: units interleave
        for _ in range(int(rng.integers(1, 3))):
            unit.append(u)
            category.append(int(rng.integers(0, 3)))
            adjudication.append(False)
        if rng.random() < 0.2:
            unit.append(u)
            category.append(int(rng.integers(0, 3)))
            adjudication.append(True)
    unit = np.array(unit)
    rows = AgreementRows(unit=unit, rater=np.zeros_like(unit), category=np.array(category),
                         is_adjudication=np.array(adjudication), seconds=np.zeros(unit.size))
    found = dispute_stats(rows, ("1", "0", "⊥"))
    labels: dict[int, list[int]] = {}
    for u, c, adj in zip(rows.unit, rows.category, rows.is_adjudication):
        if not adj:
            labels.setdefault(int(u), []).append(int(c))
    disputed = [ls for ls in labels.values() if len(ls) >= 2]
    assert (found["n_units"], found["n_disputed"]) == (len(labels), len(disputed))
    assert found["first_labels"] == {n: sum(ls[0] == k for ls in labels.values()) for k, n in enumerate("10⊥")}
    assert found["second_review_labels"] == {n: sum(ls[1] == k for ls in disputed) for k, n in enumerate("10⊥")}
    assert found["ci95"] == pytest.approx(_exact(len(disputed), len(labels)))


def test_the_card_gives_single_review_stages_no_kappa():
    single = {"review": {"kind": "single_review", "people_per_unit": "1, or 2 where the first label was disputed"},
              "n_items": 8, "n_panel_votes": 10, "raw_agreement": None, "fleiss_kappa": None,
              "krippendorff_alpha": None, "adjudication_rate": 0.125,
              "dispute": {"n_units": 8, "n_disputed": 2, "rate": 0.25, "ci95": _exact(2, 8)},
              "audit_agreement": {"n_judged": 4, "n_agree": 2, "agreement": 0.5, "ci95": _exact(2, 4)}}
    panel = {"review": {"kind": "panel", "people_per_unit": 3}, "n_items": 4, "n_panel_votes": 12,
             "raw_agreement": 0.5, "fleiss_kappa": 0.25, "krippendorff_alpha": 0.3, "adjudication_rate": 0.25}
    stats = {"pre_adjudication_agreement": {"usability": panel, "relation": single, "pair": None},
             "vote_distributions": {"usability": {"patterns": {"3-0": 2}}, "relation": {"patterns": {}}}}
    card = "\n".join(agreement_section(stats))
    relation_row = next(line for line in card.splitlines() if line.startswith("| relation |"))
    assert "| 2 (25.0%) | [3.2%, 65.1%] | 2 of 4 (50.0%) | [6.8%, 93.2%] |" in relation_row
    usability_row = next(line for line in card.splitlines() if line.startswith("| usability |"))
    assert "| 0.250 |" in usability_row and "| 3 |" in usability_row
    assert json.dumps(stats)                              # plain data
