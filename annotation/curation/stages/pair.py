"""Pair (DESIGN 2.9): does a mined trajectory of another video satisfy every predicate of a query?

A pair item starts with one reviewer; a vote ⊥ (``uncertain``) or one against the writer's binary
proposal widens the panel to two for an independent second review, blind to the proposal (it
would tell what the first reviewer said). ``annotation.rules.relation_final`` gives the final
label; two reviews that contradict each other go to an adjudicator on every split (E.3.2:
disagreements prompt independent adjudication), and on dev and test so does any unresolved pair
(their galleries need every pair binary); a dev/test pair left ⊥ even then takes its query out of
the benchmark.

Blinding: the proposal is shown neither to the second reviewer nor to an auditor, nor to anyone on
an item opened blind (``prelabels["blind"]``: the blinded calibration sample of a pseudo-label
rule); the mined-pair
list hides it while the pair waits for its second review (``ReviewStage.awaiting_second_review``).
A person seated on an open pair reads, through no endpoint, the proposal or the label of that pair
or of the same trajectory's pairs with the query's family (its revisions, parents and the queries
of the same target with the same predicates) until the item closes (:func:`blinds`).
"""
from __future__ import annotations

from rest_framework import serializers

from annotation.curation.labels import PAIR
from annotation.curation.stages.base import (
    Blind,
    ModelProposalSerializer,
    PredicateSerializer,
    ReviewStage,
    model_proposal,
    nothing_after_vote,
    query_family,
)
from annotation.models import CrossPair, Query, Relation, Vote, WorkItem
from annotation.rules import relation_disputed, relation_final
from common.errors import ApplicationError

LABELS, DECISIVE = PAIR.labels, PAIR.decisive
MATCH, MISMATCH, UNCERTAIN = PAIR.values
REASONS = (
    "a predicate is visibly violated",
    "the interval that would show it is not covered",
    "the tracking is off",
    "the query is ambiguous",
)
PAIR_LABEL_VALUES = {MATCH: 1, MISMATCH: 0, UNCERTAIN: -1}
# The words of the rejection of a dev/test query whose cross-video pair stays ⊥ (releases count them).
BOTTOM_PAIR = "stayed unresolved after review and adjudication"


def opened_blind(item: WorkItem) -> bool:
    """Whether the item was opened without the writer's proposal (nobody on it is shown one)."""
    return bool((item.prelabels or {}).get("blind"))


def decided_blind(item: WorkItem) -> bool:
    """Whether the pair's label was decided by a vote cast without the writer's proposal shown: on
    an item opened blind, or of a pair without a proposal, every vote; otherwise the independent second review
    (its label stands, ``relation_final``) and an adjudication of a widened item (adjudicators read
    it as a second reviewer would), never a single first review, which was shown the proposal."""
    if opened_blind(item) or model_proposal(item.pair.proposal) is None:
        return True
    reviews, adjudications = _pair_votes(item)
    if not reviews:
        return False
    if relation_final(reviews) == -1 and adjudications:
        return True
    return len(reviews) >= 2


def _check_pair(*, item: WorkItem, annotator, label: str, correction, payload, judgments) -> dict:
    if correction is not None or judgments:
        raise ApplicationError("a pair vote carries a label (match, mismatch, uncertain) and reasons only",
                               code="unexpected_fields")
    return {"payload": payload or {}}


def _pair_votes(item: WorkItem) -> tuple[list[int], list[int]]:
    """(review labels, adjudication labels) in casting order, as 1 / 0 / -1."""
    reviews, adjudications = [], []
    for label, adjudicated in Vote.objects.filter(item=item).order_by("created_at", "id") \
            .values_list("label", "is_adjudication"):
        (adjudications if adjudicated else reviews).append(PAIR_LABEL_VALUES[label])
    return reviews, adjudications


def _pair_final(item: WorkItem) -> int:
    reviews, adjudications = _pair_votes(item)
    final = relation_final(reviews)
    if final == -1 and adjudications:
        return adjudications[-1]
    return final


def _needs_binary(item: WorkItem) -> bool:
    """Dev and test galleries need every pair binary: an unresolved pair goes to an adjudicator."""
    return item.pair.query.video.split in ("dev", "test")


def _reviews_contradict(reviews: list[int]) -> bool:
    """Two reviews with opposite binary labels: a disagreement, adjudicated on every split."""
    return len(reviews) >= 2 and {reviews[0], reviews[-1]} == {0, 1}


def _pair_rule(item: WorkItem) -> tuple[str, str]:
    reviews, adjudications = _pair_votes(item)
    if not reviews:
        return WorkItem.State.OPEN, ""
    if len(reviews) == 1 and item.panel_size == STAGE.panel:
        proposal = (item.prelabels.get("proposal") or {}).get("label")
        if relation_disputed(reviews[0], proposal):
            item.panel_size, item.disputed = STAGE.widened_panel, [item.pair.trajectory_id]
            item.save(update_fields=["panel_size", "disputed"])
            return WorkItem.State.OPEN, ""
    if len(reviews) < item.panel_size:
        return WorkItem.State.OPEN, ""
    final = _pair_final(item)
    if final == -1 and not adjudications and (_needs_binary(item) or _reviews_contradict(reviews)):
        return WorkItem.State.ADJUDICATE, ""
    if final == -1:
        return WorkItem.State.UNRESOLVED, ""
    return WorkItem.State.DECIDED, {1: MATCH, 0: MISMATCH}[final]


def _on_pair_closed(item: WorkItem) -> None:
    """Record the pair's relation. A dev/test pair left ⊥ even after adjudication takes its query
    out of the benchmark (its galleries could never be complete), with the reason recorded."""
    reviews, adjudications = _pair_votes(item)
    final = _pair_final(item)
    pair = CrossPair.objects.select_for_update().get(pk=item.pair_id)
    source = (Relation.Source.POOL if final == -1 else Relation.Source.ADJUDICATED if adjudications
              else Relation.Source.SECOND_REVIEW if len(reviews) > 1 else Relation.Source.HUMAN)
    Relation.objects.update_or_create(query_id=pair.query_id, trajectory_id=pair.trajectory_id, defaults=dict(
        label=final, source=source, stratum=pair.stratum, item=item, pseudo=False, rule=None,
        evidence={"proposal": pair.proposal, "reviews": reviews, "adjudication": adjudications,
                  "blind": decided_blind(item)}))
    pair.review = CrossPair.Review.DONE
    pair.save(update_fields=["review"])
    if final == -1 and _needs_binary(item):
        Query.objects.filter(pk=pair.query_id, status=Query.Status.ACCEPTED).update(
            status=Query.Status.REJECTED,
            rejection_reason=f"its relation to trajectory {pair.trajectory_id} (another video) {BOTTOM_PAIR}; "
                             "dev/test galleries need it binary")


class PairTargetSerializer(serializers.Serializer):
    pair = serializers.IntegerField()
    query = serializers.IntegerField()
    text = serializers.CharField()
    predicates = PredicateSerializer(many=True)
    query_video = serializers.IntegerField()
    trajectory = serializers.IntegerField()
    trajectory_video = serializers.IntegerField()
    proposal = ModelProposalSerializer(allow_null=True)


def read_target(*, item: WorkItem, viewer, second: bool, suggestions: bool) -> dict:
    """The query, the trajectory and the writer's proposal where ``suggestions`` allows (not for
    an auditor, nor on an audit), this is not the second review (a pair is disputed only when
    its first reviewer said ⊥ or disagreed with the proposal, so showing it would tell which) and
    the item was not opened blind (a calibration sample)."""
    pair = CrossPair.objects.select_related("query", "trajectory").get(pk=item.pair_id)
    return {"pair": pair.pk, "query": pair.query_id, "text": pair.query.text, "predicates": pair.query.predicates,
            "query_video": pair.query.video_id, "trajectory": pair.trajectory_id,
            "trajectory_video": pair.trajectory.video_id,
            "proposal": model_proposal(pair.proposal) if suggestions and not second and not opened_blind(item)
            else None}


def blinds(items) -> Blind:
    """The pairs of the items' trajectories with every query of their queries' families."""
    seated = list(items.values_list("pair__query_id", "pair__trajectory_id"))
    families = {query_id: query_family([query_id]) for query_id in {q for q, _ in seated}}
    return Blind(pairs=frozenset((family_query, trajectory_id) for query_id, trajectory_id in seated
                                 for family_query in families[query_id]))


STAGE = ReviewStage(
    name="pair", labels=LABELS, decisive=DECISIVE, reasons=REASONS, panel=1, required=1, widened_panel=2,
    check=_check_pair, after_vote=nothing_after_vote, rule=_pair_rule, on_closed=_on_pair_closed,
    read_target=read_target, target_key="pair", target_serializer=PairTargetSerializer, agreement_panel=2,
    accepted=DECISIVE, blinds=blinds)
