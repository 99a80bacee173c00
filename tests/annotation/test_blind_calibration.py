"""Pseudo-label calibration reads only blinded labels: pairs whose deciding vote was cast by people
not shown the writer's proposal (Appendix E.3.2; issue 14, protocol corrections)."""
from __future__ import annotations

import pytest
from django.utils import timezone

from annotation.benchmark.selectors import cross_pair_list
from annotation.benchmark.services.pseudolabels import (
    pseudo_labels_apply,
    pseudo_rule_calibrate,
    pseudo_rule_declare,
)
from annotation.curation.selectors import review_target
from annotation.curation.services.votes import vote_cast
from annotation.models import CrossPair, PoolMember, PseudoLabelRule, Relation, WorkItem
from common.errors import ConflictError
from models.curation.calibration import EasyNegativeRule, calibrate
from tests.annotation.conftest import approve, frozen_pool, propose_description, seat

pytestmark = pytest.mark.django_db
PROPOSAL = {"label": 0, "predicates": ["upper_colour"], "evidence": ["f1"]}
RULE = {"name": "colour contradicted", "s_max": 0.3, "encoder": "minilm"}


def mined(query, trajectory_id: int, *, item: bool) -> CrossPair:
    """A mined easy negative with the writer's proposal; under (sighted) pair review if ``item``."""
    pair = CrossPair.objects.create(query=query, trajectory_id=trajectory_id, stratum="easy_negative",
                                    strata=["easy_negative"], similarity=0.1, proposal=PROPOSAL,
                                    provenance=[{"stratum": "easy_negative", "encoder": "minilm"}],
                                    review="queued" if item else "not_sampled")
    if item:
        WorkItem.objects.create(stage="pair", video_id=query.video_id, pair=pair, panel_size=1, required_votes=1,
                                prelabels={"proposal": PROPOSAL})
    return pair


def vote(pair: CrossPair, user, label: str) -> WorkItem:
    item = WorkItem.objects.get(stage="pair", pair=pair)
    seat(item, user)
    vote_cast(item_id=item.pk, annotator=user, label=label)
    item.refresh_from_db()
    return item


@pytest.fixture
def dev_pairs(world, reviewable_run, annotators):
    """Five dev pairs reviewed with the proposal in view (one went to a blind second review) and
    eight the rule selects that nobody reviewed; all of them contradict the query's colour."""
    approve(world.green, annotators)
    approve(propose_description(world.pool_b, world.b[1], "black", panel=1), annotators)
    pool_c = frozen_pool(reviewable_run, annotators, "dev")
    c = list(PoolMember.objects.filter(pool=pool_c).values_list("trajectory_id", flat=True))
    for tid, colour in zip(c, ("blue", "green", "black", "white")):
        approve(propose_description(pool_c, tid, colour, panel=1), annotators)
    sighted = [mined(q, t, item=True) for q, t in [(world.qa, world.b[0]), (world.qa, world.b[1]),
                                                   (world.qb, world.a[0]), (world.qb, world.a[1]),
                                                   (world.qb, world.a[2])]]
    for pair in sighted[:4]:
        assert vote(pair, annotators[0], "mismatch").state == "decided"       # agrees with the proposal
    assert vote(sighted[4], annotators[0], "uncertain").panel_size == 2        # ⊥: a second review, blind
    assert review_target(item=WorkItem.objects.get(pair=sighted[4]), viewer=annotators[1])["pair"]["proposal"] is None
    assert vote(sighted[4], annotators[1], "mismatch").state == "decided"
    unreviewed = [mined(q, t, item=False) for q in (world.qa, world.qb) for t in c]
    return sighted, unreviewed


def test_labels_given_with_the_proposal_in_view_do_not_calibrate(dev_pairs, annotators):
    sighted, _ = dev_pairs
    rule_row = pseudo_rule_declare(rule=RULE, declared_bound=0.5)        # needs 5 audited pairs
    with pytest.raises(ConflictError) as refused:
        pseudo_rule_calibrate(rule_row=rule_row)                         # five reviewed, one of them blind
    assert refused.value.code == "audit_too_small"
    assert refused.value.extra == {"selected": 13, "blinded": 1, "not_blinded": 4, "unreviewed": 8, "needed": 5}
    rule_row.refresh_from_db()
    assert rule_row.calibrated_at is None
    blind = [Relation.objects.get(query=p.query, trajectory=p.trajectory).evidence["blind"] for p in sighted]
    assert blind == [False, False, False, False, True]                   # only the second review was blind


def test_a_blinded_sample_is_reviewed_without_the_proposal_and_calibrates(dev_pairs, annotators, manager_client):
    sighted, unreviewed = dev_pairs
    rule_row = pseudo_rule_declare(rule=RULE, declared_bound=0.5)
    url = f"/api/pseudo-rules/{rule_row.pk}/calibration-sample/"
    assert manager_client.post(url, {"size": 0}, format="json").status_code == 400
    sample = manager_client.post(url, {"seed": 3}, format="json")
    assert sample.status_code == 200, sample.content
    assert sample.json() == {"considered": 13, "selected": 13, "eligible": 8, "queued": 5, "blinded": 1,
                             "needed": 5, "other_encoder": 0}
    items = list(WorkItem.objects.filter(stage="pair", prelabels__blind=True))
    assert len(items) == 5 and {i.pair_id for i in items} <= {p.pk for p in unreviewed}
    listed = {p.pk: p.visible_proposal for p in cross_pair_list(viewer=annotators[3])}
    assert all(listed[i.pair_id] is None for i in items)                 # nor in the mined-pair list
    assert listed[sighted[0].pk] == PROPOSAL
    for item in items:                                                   # nobody on them sees the proposal
        assert review_target(item=item, viewer=annotators[2])["pair"]["proposal"] is None
        assert vote(item.pair, annotators[2], "mismatch").state == "decided"
    # a sighted item of the same reviewer, for contrast, shows it
    assert review_target(item=WorkItem.objects.get(pair=sighted[0]), viewer=annotators[2])["pair"]["proposal"]

    rule_row = pseudo_rule_calibrate(rule_row=rule_row)
    cal = rule_row.calibration
    assert (cal["blinded"], cal["n_blinded"], cal["n_not_blinded"], cal["n_unreviewed"]) == (True, 6, 4, 3)
    assert cal["n"] == 6 and cal["errors"] == 0 and rule_row.accepted
    again = manager_client.post(url, {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "rule_calibrated"


def test_a_calibration_that_was_not_blinded_labels_nothing(world, annotators):
    rule_row = pseudo_rule_declare(rule=RULE, declared_bound=0.5)
    sighted = calibrate(EasyNegativeRule.from_dict(RULE), ["correct"] * 5, 0.5)   # blinded=False
    PseudoLabelRule.objects.filter(pk=rule_row.pk).update(calibration=sighted.to_dict(), accepted=True,
                                                          calibrated_at=timezone.now())
    rule_row.refresh_from_db()
    with pytest.raises(ConflictError) as refused:
        pseudo_labels_apply(rule_row=rule_row)
    assert refused.value.code == "calibration_not_blinded"
