"""Relation (DESIGN 2.8): a query's row of relations against its video's complete frozen pool.

A relation item starts with one reviewer, who labels every candidate 1, 0 or ⊥ (-1) and rates the
query (faithful, natural 1-5). Candidates the reviewer marks ⊥ or labels against a binary
pre-label are disputed: the panel widens to two and an independent second reviewer labels those
candidates only; ``annotation.rules.relation_final`` gives each candidate's final label and what
stays unresolved is ⊥. On dev and test a row that still holds ⊥ goes to an adjudicator, whose vote
labels exactly those candidates (:func:`bottom_candidates`) 1, 0 or ⊥ again; training rows keep
their ⊥ without adjudication. Then the query is admitted or rejected
(:func:`query_admission_problem`).

Blinding: the second reviewer sees only the disputed candidates, never the first review, and no
pre-label (a candidate is disputed only when the first reviewer said ⊥ or disagreed with a binary
pre-label, so a pre-label beside it would tell what the first reviewer said); an auditor, and any
reader on an audit, sees no pre-label either. Pairs of candidates whose identity review stayed
unresolved are flagged on the row (``unresolved_identity``): they stay separate candidates (E.1), and
a query that matches both is ambiguous. A person seated on an open row reads, through no
endpoint, the labels, pre-labels, reviews and ratings of any query of its family (its revisions,
parents and the queries of the same target with the same predicates, whose rows would tell the
same) until the item closes (:func:`blinds`). Agreement units are the candidates of each row,
their categories the labels 1, 0 and ⊥.
"""
from __future__ import annotations

import numpy as np
from django.db.models import ExpressionWrapper, IntegerField, Q, QuerySet, Value
from django.db.models.functions import Cast, Coalesce
from rest_framework import serializers

from annotation.curation.labels import RELATION
from annotation.curation.stages.base import (
    AgreementRows,
    Blind,
    ModelProposalSerializer,
    Payload,
    PredicateSerializer,
    ReviewStage,
    model_proposal,
    query_family,
)
from annotation.models import PoolMember, Query, Relation, RelationJudgment, Vote, WorkItem
from annotation.rules import relation_disputed, relation_final
from common.columns import index_of, integer_columns, integer_columns_among, sorted_distinct
from common.errors import ApplicationError

LABELS, DECISIVE = RELATION.labels, RELATION.decisive
(REVIEWED,) = RELATION.values
MIN_NATURALNESS = 3          # ratings 1-5; below this the query is rejected as unnatural
CATEGORIES = ("1", "0", "⊥")            # a candidate's label 1, 0, -1 (⊥), in this order
CATEGORY_OF = {1: 0, 0: 1, -1: 2}
_BY_CATEGORY = tuple(sorted(CATEGORY_OF, key=CATEGORY_OF.get))   # the labels in category order
# The words of the rejection of a dev/test query whose row keeps a ⊥ (releases count them per split).
BOTTOM_ROW = "needs a fully binary row"


def _members(item: WorkItem) -> list[int]:
    return list(PoolMember.objects.filter(pool_id=item.query.pool_id).order_by("trajectory_id")
                .values_list("trajectory_id", flat=True))


def _prelabel(item: WorkItem, tid: int) -> int | None:
    entry = item.prelabels.get(str(tid))
    return None if entry is None else int(entry["label"])


def _check_row(*, item: WorkItem, annotator, label: str, correction, payload, judgments) -> dict:
    if correction is not None:
        raise ApplicationError("a relation vote carries no correction", code="unexpected_fields")
    if not isinstance(judgments, dict) or not judgments:
        raise ApplicationError("label the candidates: judgments {trajectory id: 1 | 0 | -1}", code="judgments_required")
    members = set(_members(item))
    try:
        labels = {int(k): int(v) for k, v in judgments.items()}
    except (TypeError, ValueError):
        raise ApplicationError("judgments map trajectory ids to 1, 0 or -1", code="invalid_judgments") from None
    outside = sorted(set(labels) - members)
    if outside:
        raise ApplicationError(f"trajectories {outside} are not in this query's pool", code="not_in_pool",
                               extra={"trajectories": outside})
    if len(labels) != len(judgments):
        raise ApplicationError("each trajectory is labelled once", code="invalid_judgments")
    bad = sorted(k for k, v in labels.items() if v not in (1, 0, -1))
    if bad:
        raise ApplicationError(f"labels must be 1, 0 or -1 (⊥); trajectories {bad} have others", code="invalid_judgments")
    first = not Vote.objects.filter(item=item).exists()
    needed = members if first else set(item.disputed)
    missing = sorted(needed - set(labels))
    if missing:
        raise ApplicationError(f"label every {'candidate' if first else 'disputed candidate'}: missing {missing}",
                               code="incomplete_row", extra={"missing": missing})
    extra = sorted(set(labels) - needed)
    if extra:
        raise ApplicationError(f"the second review labels only the disputed candidates; {extra} are not disputed",
                               code="not_disputed", extra={"trajectories": extra})
    return {"payload": payload}


class StrictBoolean(serializers.BooleanField):
    """true or false, nothing that merely reads as one ("yes", 1)."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictInteger(serializers.IntegerField):
    """A JSON integer, not a string or a boolean that reads as one."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class RowRatings(serializers.Serializer):
    """The first review's ratings of the query (the second review rates nothing)."""

    faithful = StrictBoolean(help_text="whether the query is faithful to its target")
    natural = StrictInteger(min_value=1, max_value=5, help_text="how natural the query reads, 1-5")


RATINGS = Payload(RowRatings, code="ratings_required", message="rate the query: faithful (true/false) and natural (1-5)")


def _payload(item: WorkItem) -> Payload | None:
    """The first review rates the query; the second review and later votes carry no payload."""
    return None if Vote.objects.filter(item=item).exists() else RATINGS


def _store_judgments(*, item: WorkItem, vote: Vote, judgments) -> None:
    RelationJudgment.objects.bulk_create([RelationJudgment(vote=vote, trajectory_id=int(k), label=int(v))
                                          for k, v in judgments.items()])


def _row_labels(item: WorkItem) -> dict[int, list[int]]:
    """The panel's labels of each candidate, in casting order (adjudication left out)."""
    out: dict[int, list[int]] = {}
    rows = (RelationJudgment.objects.filter(vote__item=item, vote__is_adjudication=False)
            .order_by("vote__created_at", "vote_id").values_list("trajectory_id", "label"))
    for tid, label in rows:
        out.setdefault(tid, []).append(label)
    return out


def _adjudication_labels(item: WorkItem) -> dict[int, int]:
    """The adjudicator's labels of the candidates the panel left ⊥ (empty before adjudication)."""
    return dict(RelationJudgment.objects.filter(vote__item=item, vote__is_adjudication=True)
                .values_list("trajectory_id", "label"))


def _needs_binary_row(item: WorkItem) -> bool:
    return item.query.video.split in ("dev", "test")


def bottom_candidates(item: WorkItem) -> list[int]:
    """The candidates of a dev/test row whose final label after its panel (both reviews) is ⊥:
    what an adjudicator labels before the query is admitted or rejected. Empty for a training row
    (it keeps its ⊥) and while the panel is incomplete."""
    if not _needs_binary_row(item):
        return []
    if Vote.objects.filter(item=item, is_adjudication=False).count() < item.panel_size:
        return []
    return sorted(tid for tid, labels in _row_labels(item).items() if relation_final(labels) == -1)


def final_row(item: WorkItem) -> dict[int, int]:
    """Each candidate's final label: the panel's (``relation_final``), and for a candidate the
    panel left ⊥ the adjudicator's where there is one."""
    final = {tid: relation_final(labels) for tid, labels in _row_labels(item).items()}
    for tid, label in _adjudication_labels(item).items():
        if final.get(tid) == -1:
            final[tid] = label
    return final


def _check_adjudication(*, item: WorkItem, judgments) -> dict:
    """An adjudication of a row labels exactly its ⊥ candidates, 1, 0 or -1 (⊥: they cannot tell
    either)."""
    bottom = bottom_candidates(item)
    if not isinstance(judgments, dict) or not judgments:
        raise ApplicationError(f"label the candidates left ⊥: judgments {{trajectory id: 1 | 0 | -1}} for {bottom}",
                               code="judgments_required", extra={"candidates": bottom})
    try:
        labels = {int(k): int(v) for k, v in judgments.items()}
    except (TypeError, ValueError):
        raise ApplicationError("judgments map trajectory ids to 1, 0 or -1", code="invalid_judgments") from None
    if len(labels) != len(judgments):
        raise ApplicationError("each trajectory is labelled once", code="invalid_judgments")
    bad = sorted(k for k, v in labels.items() if v not in (1, 0, -1))
    if bad:
        raise ApplicationError(f"labels must be 1, 0 or -1 (⊥); trajectories {bad} have others", code="invalid_judgments")
    if set(labels) != set(bottom):
        raise ApplicationError(f"an adjudication labels exactly the candidates left ⊥ ({bottom}); missing "
                               f"{sorted(set(bottom) - set(labels))}, not left ⊥ {sorted(set(labels) - set(bottom))}",
                               code="not_bottom", extra={"candidates": bottom})
    return {}


def _row_rule(item: WorkItem) -> tuple[str, str]:
    n_votes = Vote.objects.filter(item=item, is_adjudication=False).count()
    if n_votes == 0:
        return WorkItem.State.OPEN, ""
    if n_votes == 1 and item.panel_size == STAGE.panel:
        labels = _row_labels(item)
        disputed = sorted(tid for tid, ls in labels.items() if relation_disputed(ls[0], _prelabel(item, tid)))
        if disputed:
            item.panel_size, item.disputed = STAGE.widened_panel, disputed
            item.save(update_fields=["panel_size", "disputed"])
            return WorkItem.State.OPEN, ""
    if n_votes < item.panel_size:
        return WorkItem.State.OPEN, ""
    if not Vote.objects.filter(item=item, is_adjudication=True).exists() and bottom_candidates(item):
        return WorkItem.State.ADJUDICATE, ""
    return WorkItem.State.DECIDED, REVIEWED


def query_admission_problem(query: Query, row: dict[int, int]) -> str:
    """Why a verified query is not admitted (empty when it is): unfaithful or unnatural wording, a
    row without exactly one match (several fragments, or none), or, on dev/test, a row that is not
    fully binary (``row`` is final: on dev/test its ⊥ has been adjudicated)."""
    ratings = query.ratings or {}
    if ratings.get("faithful") is False:
        return "the reviewer found the query unfaithful to the target's facts"
    if int(ratings.get("natural", MIN_NATURALNESS)) < MIN_NATURALNESS:
        return f"the reviewer rated the query unnatural ({ratings.get('natural')}/5)"
    positives = [tid for tid, label in row.items() if label == 1]
    if len(positives) > 1:
        return f"the query matches {len(positives)} candidates of the pool ({positives}); it must single one out"
    if not positives:
        return "the query matches no candidate of the pool"
    if positives[0] != query.target_id:
        return (f"the query matches trajectory {positives[0]}, not trajectory {query.target_id} it was written "
                "from")
    unknown = [tid for tid, label in row.items() if label == -1]
    if query.video.split in ("dev", "test") and unknown:
        return (f"a {query.video.split} query {BOTTOM_ROW}; {len(unknown)} candidates stay ⊥ ({unknown}) after "
                "review and adjudication")
    return ""


def _on_row_closed(item: WorkItem) -> None:
    """Write the row's relations and admit or reject the query (DESIGN 2.8)."""
    query = Query.objects.select_for_update().get(pk=item.query_id)
    if query.status != Query.Status.IN_REVIEW:
        return  # revised or re-pooled meanwhile: its row no longer decides anything
    labels, adjudicated = _row_labels(item), _adjudication_labels(item)
    final = final_row(item)
    for tid, label in final.items():
        source = (Relation.Source.POOL if label == -1 else Relation.Source.ADJUDICATED if tid in adjudicated
                  else Relation.Source.HUMAN if len(labels[tid]) == 1 else Relation.Source.SECOND_REVIEW)
        evidence = {"prelabel": item.prelabels.get(str(tid)), "reviews": labels[tid]}
        if tid in adjudicated:
            evidence["adjudication"] = adjudicated[tid]
        Relation.objects.update_or_create(query=query, trajectory_id=tid, defaults=dict(
            label=label, source=source, stratum="within", item=item, pseudo=False, rule=None, evidence=evidence))
    ratings = (Vote.objects.filter(item=item, is_adjudication=False).order_by("created_at", "id")
               .values_list("payload", flat=True).first())
    query.ratings = ratings or {}
    reason = query_admission_problem(query, final)
    if reason:
        query.status, query.rejection_reason = Query.Status.REJECTED, reason
    else:
        query.status = Query.Status.ACCEPTED
    query.save(update_fields=["status", "rejection_reason", "ratings"])


class RowCandidateSerializer(serializers.Serializer):
    trajectory = serializers.IntegerField()
    prelabel = ModelProposalSerializer(allow_null=True)


class RelationRowTargetSerializer(serializers.Serializer):
    query = serializers.IntegerField()
    text = serializers.CharField()
    predicates = PredicateSerializer(many=True)
    pool = serializers.IntegerField()
    review_round = serializers.IntegerField(help_text="1: label every candidate; 2: only the disputed ones")
    rate_query = serializers.BooleanField(help_text="the vote's payload must rate it: faithful, natural 1-5")
    candidates = RowCandidateSerializer(many=True)
    bottom = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="a dev/test row in adjudication: the candidates both reviews left ⊥, which an adjudication labels "
                  "(exactly these, 1, 0 or -1); empty otherwise")
    unresolved_identity = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="pairs of the pool's members whose identity review stayed unresolved: they may be one object "
                  "kept as two candidates (E.1), so a query matching both is ambiguous")


def unresolved_identity_pairs(pool_id: int) -> list[list[int]]:
    """The pool's member pairs whose identity item ended unresolved (kept apart, flagged)."""
    members = set(PoolMember.objects.filter(pool_id=pool_id).values_list("trajectory_id", flat=True))
    pairs = (WorkItem.objects.filter(stage=WorkItem.Stage.IDENTITY, state=WorkItem.State.UNRESOLVED,
                                     duplicate__trajectory_a_id__in=members, duplicate__trajectory_b_id__in=members)
             .values_list("duplicate__trajectory_a_id", "duplicate__trajectory_b_id"))
    return sorted([min(a, b), max(a, b)] for a, b in pairs)


def read_target(*, item: WorkItem, viewer, second: bool, suggestions: bool) -> dict:
    """The query, its predicates and its pool's candidates (all of them on the first review, the
    disputed ones on the second) with the writer's pre-labels where ``suggestions`` allows (not
    for an auditor, nor on an audit) and this is not the second review (they would tell which
    candidates the first reviewer disputed and how)."""
    query = Query.objects.get(pk=item.query_id)
    if second:
        candidates = sorted(int(t) for t in item.disputed)
    else:
        candidates = list(PoolMember.objects.filter(pool_id=query.pool_id).order_by("trajectory_id")
                          .values_list("trajectory_id", flat=True))
    prelabels = (item.prelabels or {}) if suggestions and not second else {}
    return {"query": query.pk, "text": query.text, "predicates": query.predicates, "pool": query.pool_id,
            "review_round": 2 if second else 1, "rate_query": not second,
            "unresolved_identity": unresolved_identity_pairs(query.pool_id),
            "bottom": bottom_candidates(item) if item.state == WorkItem.State.ADJUDICATE else [],
            "candidates": [{"trajectory": tid, "prelabel": model_proposal(prelabels.get(str(tid)))}
                           for tid in candidates]}


def agreement_rows(items: QuerySet[WorkItem]) -> AgreementRows:
    """One unit per (row, candidate) of the votes on ``items``; a vote's time is spread evenly over
    the candidates it labels. The judgments arrive as integer columns (``common.columns``), in
    vote order (see ``base.label_rows``), then judgment order."""
    keys = sorted_distinct(integer_columns(items, "id")[0])                                # [I]
    code = ExpressionWrapper(Cast("vote__is_adjudication", IntegerField()) * 4 + index_of("label", _BY_CATEGORY),
                             output_field=IntegerField())
    milliseconds = Coalesce("vote__time_spent_ms", Value(-1), output_field=IntegerField())
    position, codes, judgment, vote, trajectory, rater, ms = integer_columns_among(
        RelationJudgment.objects.all(), code, "id", "vote_id", "trajectory_id", "vote__annotator_id", milliseconds,
        field="vote__item", keys=keys, parents=items, first_below=8)
    if not position.size:
        empty = np.zeros(0, np.int64)
        return AgreementRows(unit=empty, rater=empty, category=empty, is_adjudication=np.zeros(0, bool),
                             seconds=np.zeros(0))
    in_order = np.all((vote[1:] > vote[:-1]) | ((vote[1:] == vote[:-1]) & (judgment[1:] > judgment[:-1])))
    if not in_order:
        order = np.lexsort((judgment, vote))                                               # [J]
        position, codes, vote, trajectory, rater, ms = (
            c[order] for c in (position, codes, vote, trajectory, rater, ms))
    _, candidate = np.unique(trajectory, return_inverse=True)                              # [J]
    _, unit = np.unique(position * (candidate.max() + 1) + candidate, return_inverse=True)  # [J] (row, candidate)
    _, vote_index, per_vote = np.unique(vote, return_inverse=True, return_counts=True)
    adjudication, category = np.divmod(codes, 4)                                           # [J], [J]
    return AgreementRows(unit=unit.reshape(-1), rater=rater, category=category,
                         is_adjudication=adjudication.astype(bool),
                         seconds=np.where(ms < 0, np.nan, ms / 1000.0) / per_vote[vote_index])


def blinds(items: QuerySet[WorkItem]) -> Blind:
    """Every query of the families of the items' queries."""
    return Blind(queries=query_family(items.values_list("query_id", flat=True)))


STAGE = ReviewStage(
    name="relation", labels=LABELS, decisive=DECISIVE, reasons=(), panel=1, required=1, widened_panel=2,
    check=_check_row, payload=_payload, after_vote=_store_judgments, adjudication_check=_check_adjudication, rule=_row_rule, on_closed=_on_row_closed,
    read_target=read_target, target_key="relation_row", target_serializer=RelationRowTargetSerializer,
    agreement_rows=agreement_rows, categories=CATEGORIES, agreement_panel=2,
    accepted=(REVIEWED,), accepted_where=Q(query__status=Query.Status.ACCEPTED), blinds=blinds)
