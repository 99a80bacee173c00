"""What a review stage declares, and the pieces several stages share.

A stage is one :class:`ReviewStage` value in its own module. Every hook runs inside the vote's
transaction with the item row locked (``annotation.curation.services.votes``):

- ``payload(item)`` declares what the item's next panel vote may carry as its payload (a
  :class:`Payload`, or ``None``: nothing), and :func:`payload_checked` holds every vote to it
  before ``check`` runs;
- ``check(item=, annotator=, label=, correction=, payload=, judgments=)`` validates what a vote
  carries besides its label (``payload`` already checked) and returns the extra ``Vote`` fields
  (raises ``ApplicationError``);
- ``after_vote(item=, vote=, judgments=)`` stores rows that belong to the vote (an adjudication's
  too, when it carries judgments);
- ``adjudication_check(item=, judgments=)``, where a stage has one, validates the judgments an
  adjudication carries (a stage without one takes an adjudication's label and reason only);
- ``rule(item)`` gives the item's ``(state, decision)`` from its votes (it may widen the panel for
  an independent second review);
- ``on_closed(item)`` runs once the item is decided or unresolved;
- ``read_target(item=, viewer=, second=, suggestions=)`` gives what a reviewer is shown, as plain
  data that ``target_serializer`` writes out (blinding: ``second`` is set for the second reviewer
  of a widened item, :meth:`ReviewStage.second_reviewer`; ``suggestions`` is false for a blind
  reader and on audits; the stage leaves out what either may not see);
- ``agreement_rows(items)`` reads the votes on a queryset of the stage's items as agreement units
  and categories;
- ``blinds(items)`` says what a person seated on open ``items`` of the stage may not read through
  any endpoint until those items close (:class:`Blind`): the records that share the items' target
  and predicates, whose pre-labels, proposals, votes and labels would tell what the item's other
  reviewers said (:func:`seated_blind` in ``annotation.curation.stages`` asks every stage).

The serializers of what several stages show (a query's predicates, a writer's proposal) are here
too; the benchmark API reuses the predicate shape for the queries a manager writes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
from django.db.models import (
    BigIntegerField,
    ExpressionWrapper,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Value,
)
from django.db.models.functions import Cast, Coalesce
from rest_framework import serializers

from annotation.curation.labels import Label
from annotation.models import Query, Vote, WorkItem
from annotation.rules import ADJUDICATE, PENDING, UNRESOLVED, decide
from common.columns import (
    index_of,
    integer_columns,
    integer_columns_among,
    order_by_column,
    sorted_distinct,
)
from common.errors import ApplicationError
from models.facts import ATTRIBUTES, EVENTS

CLOSED_STATES = (WorkItem.State.DECIDED, WorkItem.State.UNRESOLVED)


@dataclass(frozen=True)
class AgreementRows:
    """A stage's votes as agreement units: parallel arrays ``[V]``."""

    unit: np.ndarray             # int64: the unit judged (an item, or an item's candidate)
    rater: np.ndarray            # int64: user id
    category: np.ndarray         # int64: index into the stage's ``categories``
    is_adjudication: np.ndarray  # bool
    seconds: np.ndarray          # float64, nan where no time was recorded


@dataclass(frozen=True)
class Blind:
    """What one person may not read while they sit on open review items: of the ``queries``,
    their rows' labels, sources and evidence (pre-labels and reviews), their ratings and their
    mined pairs' proposals and labels; of the ``pairs`` (query, trajectory), the relation and the
    mined pair's proposal and label. Empty for a person without an open seat."""

    queries: frozenset[int] = frozenset()
    pairs: frozenset[tuple[int, int]] = frozenset()

    def __or__(self, other: Blind) -> Blind:
        return Blind(self.queries | other.queries, self.pairs | other.pairs)

    def __bool__(self) -> bool:
        return bool(self.queries or self.pairs)

    def hides(self, query_id: int, trajectory_id: int | None = None) -> bool:
        """Whether the query's records (with ``trajectory_id``: the pair's) are hidden."""
        return query_id in self.queries or (trajectory_id is not None and (query_id, trajectory_id) in self.pairs)

    def relation_filter(self, prefix: str = "") -> Q:
        """The rows (``prefix`` reaches a query and a trajectory field) this blind hides, as a filter."""
        hidden = Q(**{f"{prefix}query_id__in": sorted(self.queries)})
        for query_id, trajectory_id in sorted(self.pairs):
            hidden |= Q(**{f"{prefix}query_id": query_id, f"{prefix}trajectory_id": trajectory_id})
        return hidden


def predicate_key(predicates) -> tuple[tuple[str, str], ...]:
    """What a query requires, without the facts it cites: its (name, value) pairs, sorted."""
    return tuple(sorted((str(p.get("name")), str(p.get("value"))) for p in predicates or () if isinstance(p, dict)))


def query_family(query_ids: Iterable[int]) -> frozenset[int]:
    """The queries whose labels would tell those of any of ``query_ids``, themselves included:
    their revision trees (parents and revisions), and every query of the same target whose
    required predicates contain or are contained in those of a member of such a tree (a query
    that entails another, or is entailed by it, labels a candidate 1 or 0 the way the other's
    label implies; equal predicates included)."""
    ids = set(query_ids)
    if not ids:
        return frozenset()
    rows = list(Query.objects.filter(target_id__in=Query.objects.filter(pk__in=ids).values("target_id"))
                .values_list("pk", "parent_id", "target_id", "predicates"))
    root = {pk: pk for pk, *_ in rows}

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    for pk, parent_id, _, _ in rows:
        if parent_id in root:
            root[find(pk)] = find(parent_id)
    trees = {find(pk) for pk in ids if pk in root}
    members = [(target_id, frozenset(predicate_key(predicates))) for pk, _, target_id, predicates in rows
               if find(pk) in trees]
    return frozenset(pk for pk, _, target_id, predicates in rows if find(pk) in trees or any(
        target_id == target and (key <= required or required <= key)
        for key in [frozenset(predicate_key(predicates))] for target, required in members))


@dataclass(frozen=True)
class Payload:
    """What a vote's payload holds: the fields of ``serializer`` (each required) and nothing
    else; a payload that does not fit is refused with ``code`` and ``message``."""

    serializer: type[serializers.Serializer]
    code: str = "invalid_payload"
    message: str = "the payload does not fit this vote"


def no_payload(item: WorkItem) -> Payload | None:
    return None


def payload_checked(stage: ReviewStage, item: WorkItem, payload) -> dict:
    """``payload`` as the stage declares it for the item's next panel vote (``stage.payload``):
    400 ``unexpected_fields`` naming keys it does not declare (any key, where it declares none),
    400 with the declaration's code naming the fields whose values do not fit."""
    payload = payload or {}
    declared = stage.payload(item)
    fields = {} if declared is None else declared.serializer().fields
    unknown = sorted(str(k) for k in set(payload) - set(fields))
    if unknown:
        what = f"only {', '.join(fields)}" if fields else "no payload"
        raise ApplicationError(f"this {stage.name} vote carries {what}; not {', '.join(unknown)}",
                               code="unexpected_fields", extra={"fields": unknown})
    if declared is None:
        return {}
    checked = declared.serializer(data=payload)
    if not checked.is_valid():
        problems = "; ".join(f"{name}: {' '.join(map(str, errors))}" for name, errors in checked.errors.items())
        raise ApplicationError(f"{declared.message} ({problems})", code=declared.code,
                               extra={"fields": {k: [str(e) for e in v] for k, v in checked.errors.items()}})
    return dict(checked.validated_data)


@dataclass(frozen=True, kw_only=True)
class ReviewStage:
    name: str
    labels: tuple[Label, ...]
    decisive: tuple[str, ...]                # labels that decide an item
    reasons: tuple[str, ...]                 # the reasons a reviewer may tick
    panel: int                               # seats an item opens with
    required: int                            # votes a decision needs
    check: Callable[..., dict]
    after_vote: Callable[..., None]
    rule: Callable[[WorkItem], tuple[str, str]]
    on_closed: Callable[[WorkItem], None]
    read_target: Callable[..., dict | None]
    agreement_rows: Callable[[QuerySet], AgreementRows] | None = None  # the items' votes; default: one unit per item
    categories: tuple[str, ...] = ()         # agreement categories (default: the labels; a row's 1/0/⊥)
    agreement_panel: int                     # panel votes per unit that make a full panel
    accepted: tuple[str, ...]                # decisions that make an item's record part of the benchmark
    accepted_where: Q = field(default_factory=Q)  # what else an accepted item's record needs
    target_key: str | None = None            # where ``read_target`` goes in an item's target
    target_serializer: type[serializers.Serializer] | None = None  # writes out ``read_target``
    from_policy: bool = False                # items copy the review policy's panel and required votes
    widened_panel: int | None = None         # seats after a dispute widens the panel
    not_adjudicated: tuple[str, ...] = ()    # labels an adjudicator may not give
    majority_rule: bool = False              # decided by ``annotation.rules.decide`` (bulk audit applies)
    blinds: Callable[[QuerySet[WorkItem]], Blind] | None = None  # what its seated reviewers may not read
    adjudication_check: Callable[..., dict] | None = None  # validates an adjudication's judgments
    payload: Callable[[WorkItem], Payload | None] = no_payload  # what the item's next panel vote's payload holds

    def __post_init__(self) -> None:
        # A stage whose votes are labels counts agreement over them, one unit per item.
        if not self.categories:
            object.__setattr__(self, "categories", self.label_values)
        if self.agreement_rows is None:
            object.__setattr__(self, "agreement_rows", label_rows(self.label_values))

    @property
    def label_values(self) -> tuple[str, ...]:
        return tuple(label.value for label in self.labels)

    def accepted_items(self, items: QuerySet[WorkItem]) -> QuerySet[WorkItem]:
        """The decided items of ``items`` whose record is part of the benchmark."""
        return items.filter(self.accepted_where, state=WorkItem.State.DECIDED, decision__in=self.accepted)

    def awaiting_second_review(self) -> Q:
        """Items (a ``WorkItem`` filter) whose panel was widened over disputed candidates and that
        wait for their independent second review; nothing for a stage that never widens."""
        if self.widened_panel is None:
            return Q(pk__in=[])
        return Q(state=WorkItem.State.OPEN, panel_size__gte=self.widened_panel) & ~Q(disputed=[])

    def second_reviewer(self, item: WorkItem, viewer) -> bool:
        """Whether ``viewer`` sits on the independent second review of a widened item (its panel
        grew over disputed candidates): someone else cast the item's first vote (what that vote
        said is not read here)."""
        if self.widened_panel is None or item.panel_size < self.widened_panel or not item.disputed:
            return False
        first = Vote.objects.filter(item=item, is_adjudication=False).order_by("created_at", "id") \
            .values_list("annotator_id", flat=True).first()
        return first is not None and first != getattr(viewer, "pk", None)


# -- shared hooks ----------------------------------------------------------------------------------
def label_only_check(stage_name: str) -> Callable[..., dict]:
    """The check of a stage whose vote is a label and reasons only."""
    def check(*, item, annotator, label, correction, payload, judgments) -> dict:
        if correction is not None or payload or judgments:
            raise ApplicationError(f"a {stage_name} vote carries only a label and reasons", code="unexpected_fields")
        return {}

    return check


def nothing_after_vote(*, item, vote, judgments) -> None:
    return None


def nothing_on_closed(item: WorkItem) -> None:
    return None


def outcome_state(outcome: str) -> tuple[str, str]:
    """An ``annotation.rules.decide`` outcome as the item's ``(state, decision)``."""
    return {
        PENDING: (WorkItem.State.OPEN, ""),
        ADJUDICATE: (WorkItem.State.ADJUDICATE, ""),
        UNRESOLVED: (WorkItem.State.UNRESOLVED, ""),
    }.get(outcome, (WorkItem.State.DECIDED, outcome))


def majority_outcome(item: WorkItem, decisive: tuple[str, ...]) -> str:
    """DESIGN 5 ``decide`` over the item's votes in casting order: ``item.labels_cast`` where the
    vote just cast read them with its write (``annotation.curation.services.votes``), else read."""
    labels = getattr(item, "labels_cast", None)
    if labels is None:
        labels = list(Vote.objects.filter(item=item).order_by("created_at", "id").values_list("label", flat=True))
    return decide(labels, decisive, required=item.required_votes, panel=item.panel_size)


def trajectory_target(*, item, viewer, second: bool, suggestions: bool) -> None:
    """Usability and identity items show their trajectories; the item's own fields say which."""
    return None


def model_proposal(entry) -> dict | None:
    """A writer's pre-label or proposal as shown to a reviewer (``None`` when there is none);
    written out by :class:`ModelProposalSerializer`."""
    if not isinstance(entry, dict) or "label" not in entry:
        return None
    return {"label": int(entry["label"]), "predicates": list(entry.get("predicates") or []),
            "evidence": list(entry.get("evidence") or [])}


# -- what several stages show ----------------------------------------------------------------------
class PredicateSerializer(serializers.Serializer):
    name = serializers.ChoiceField(choices=list(ATTRIBUTES + EVENTS), help_text="a fact name")
    value = serializers.CharField(max_length=100, help_text="the value the query requires")
    fact_ids = serializers.ListField(child=serializers.CharField(max_length=32), min_length=1,
                                     help_text="the approved facts of the source description that support it")


class ModelProposalSerializer(serializers.Serializer):
    """A writer's suggestion for one (query, trajectory) pair; it never decides."""

    label = serializers.IntegerField(help_text="1 match, 0 mismatch, -1 unknown (⊥)")
    predicates = serializers.ListField(child=serializers.JSONField(), help_text="decisive predicates")
    evidence = serializers.ListField(child=serializers.JSONField(), help_text="evidence fact ids")


# -- agreement units -------------------------------------------------------------------------------
def label_rows(labels: tuple[str, ...]) -> Callable[[QuerySet], AgreementRows]:
    """Agreement units of a stage whose votes are labels: one unit per item, its labels the
    categories (-1 for a label outside them). The database turns each vote on the items into
    integers (its item, adjudication flag and label index, its rater and its milliseconds as one
    number where they fit in one, :func:`rater_time`; its id), read as arrays without a Python step
    per vote (``common.columns``). Rows come in vote order, so sums over them (a rater's mean time)
    are the same on every instance holding the votes, an instance that imported a release
    included."""
    code = label_code(labels)

    def rows(items: QuerySet[WorkItem]) -> AgreementRows:
        keys = sorted_distinct(integer_columns(items, "id")[0])                            # [I]
        low, (position, codes, vote_id, packed) = read_with_rater_time(
            lambda votes, packed_time, below: integer_columns_among(
                votes, code, "id", packed_time, field="item_id", keys=keys, parents=items,
                first_below=2 * (len(labels) + 1), last_below=below))
        _, position, codes, packed = order_by_column(vote_id, position, codes, packed)
        return label_agreement_rows(labels, keys[position], codes, packed, low)

    rows.labels = labels  # what a reader of the same votes (``decisions_and_agreement``) checks
    return rows


def label_code(labels: tuple[str, ...]) -> ExpressionWrapper:
    """A vote's adjudication flag and label index as one integer, ``flag * (K + 1) + index``
    (index K for a label outside ``labels``)."""
    return ExpressionWrapper(Cast("is_adjudication", IntegerField()) * (len(labels) + 1) + index_of("label", labels),
                             output_field=IntegerField())


_TIME_RADIX = 1 << 32


def rater_time() -> tuple[int, ExpressionWrapper, int]:
    """A vote's rater and milliseconds as one int64, ``(annotator_id - low) * 2**32 +
    (time_spent_ms + 1)`` (0 in the low half where no time was recorded), with ``low`` the lowest
    rater id of any vote: ``(low, expression, bound)``, every value below ``bound``. The time is a
    4-byte integer never negative (the column's check), so the low half stays in 0 .. 2**31, and
    the rater ids (4-byte) keep the whole in int64 range; the highest and lowest come through the
    rater index. ``common.columns.integer_columns_among`` adds the item to the same number where
    the bound leaves room (a column costs about 0.1 s per million votes in PostgreSQL)."""
    low, high = _rater_range()
    big = BigIntegerField()
    expression = ExpressionWrapper(
        (Cast("annotator_id", big) - Value(low, output_field=big)) * Value(_TIME_RADIX, output_field=big)
        + Coalesce(Cast("time_spent_ms", big) + Value(1, output_field=big), Value(0, output_field=big)),
        output_field=big)
    return low, expression, (high - low + 1) * _TIME_RADIX


def _rater_range() -> tuple[int, int]:
    """The lowest and highest rater id of any vote (0, 0 without votes), through the rater index."""
    bounds = Vote.objects.aggregate(low=Min("annotator_id"), high=Max("annotator_id"))
    return bounds["low"] or 0, bounds["high"] or 0


RATER_READS = 5                      # reads of the votes before a range that keeps moving is refused


def read_with_rater_time(read: Callable[[QuerySet, ExpressionWrapper, int], object]) -> tuple[int, object]:
    """``(low, read(votes, expression, bound))`` with :func:`rater_time`'s packing, ``votes`` the
    votes whose rater lies in the range it measured, read again until that range still holds
    afterwards. A vote by an account outside the range (a new annotator's first vote, committed
    between the measure and the read) would otherwise spill into the packed number's next field
    and be read as another vote; votes are never edited or deleted, so an unchanged range after
    the read means the read left none out."""
    for _ in range(RATER_READS):
        low, expression, bound = rater_time()
        high = low + bound // _TIME_RADIX - 1
        result = read(Vote.objects.filter(annotator_id__gte=low, annotator_id__lte=high), expression, bound)
        if _rater_range() == (low, high):
            return low, result
    raise ApplicationError("votes by new annotators kept arriving while the votes were read; try again",
                           code="votes_changing", status_code=409)


def label_agreement_rows(labels: tuple[str, ...], unit: np.ndarray, codes: np.ndarray, packed: np.ndarray,
                         rater_low: int) -> AgreementRows:
    """:class:`AgreementRows` of label votes from their units ``[V]``, :func:`label_code` values
    ``[V]`` and :func:`rater_time` values ``[V]`` (``rater_low`` its lowest rater)."""
    adjudication, index = np.divmod(codes, len(labels) + 1)                                # [V], [V]
    rater, ms = np.divmod(packed, _TIME_RADIX)                                             # [V], [V] ms + 1
    return AgreementRows(unit=unit, rater=rater + rater_low, category=np.where(index == len(labels), -1, index),
                         is_adjudication=adjudication.astype(bool),
                         seconds=np.where(ms == 0, np.nan, (ms - 1) / 1000.0))
