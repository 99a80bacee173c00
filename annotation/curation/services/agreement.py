"""Agreement statistics of the stored votes, per stage and split (DESIGN 2.3, issue 3 item 7).

Each stage says what its agreement units and categories are (``annotation.curation.stages``):
it reads the votes on a queryset of its items as integer columns (``common.columns``: one
statement, no Python step per vote) handed to the vectorised
``models.curation.agreement.agreement_report``; rater ids are mapped back to usernames at the end.
:func:`decisions_audit` reads the items and their votes the same way and applies the rule to all
of them at once; :func:`decisions_and_agreement` gives both from one reading of the votes (the
``agreement`` command's ``--audit``). Each report says who saw each unit and what was measured; a single-review stage
(relation rows, pairs) reports its dispute rate and its first labels' agreement with the blind
audits instead of a coefficient over its disputed units (``agreement_review``).
"""
from __future__ import annotations

import os

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import (
    BigIntegerField,
    Case,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Min,
    QuerySet,
    Value,
    When,
)
from django.db.models.functions import Cast

from annotation.curation.services.agreement_review import (
    audit_agreement,
    dispute_stats,
    review_design,
    single_review,
)
from annotation.curation.services.agreement_tallies import (
    TALLIED_NAMES,
    agreement_tallies_refresh,
    tallied_agreement_report,
)
from annotation.curation.stages import STAGES, stage_get
from annotation.curation.stages.base import (
    AgreementRows,
    ReviewStage,
    label_agreement_rows,
    label_code,
    read_with_rater_time,
)
from annotation.models import AuditSample, Vote, WorkItem
from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, decide_counts
from common.columns import index_of, integer_columns, integer_columns_among, order_by_column
from common.errors import ApplicationError
from models.curation.agreement import agreement_report


def vote_columns(*, stage: str, split: str | None = None) -> dict[str, np.ndarray]:
    """The stage's votes as parallel arrays over its agreement units (an item, or a relation row's
    candidate): unit, rater, category index, adjudication flag, seconds."""
    rows = stage_get(stage).agreement_rows(_items(stage, split))
    return {"item": rows.unit, "rater": rows.rater, "label": rows.category, "is_adjudication": rows.is_adjudication,
            "time_spent": rows.seconds}


def _items(stage: str, split: str | None) -> QuerySet[WorkItem]:
    items = WorkItem.objects.filter(stage=stage)
    return items.filter(video__split_group__split=split) if split else items


def stage_agreement_report(*, stage: ReviewStage, items: QuerySet[WorkItem], panel: int | None = None,
                           audit_samples: QuerySet[AuditSample] | None = None,
                           rows: AgreementRows | None = None) -> dict | None:
    """``models`` agreement figures of the votes on ``items`` (one stage's) over the stage's
    agreement units and categories; ``None`` without votes. Raters stay user ids (``per_rater``);
    ``panel`` defaults to the stage's full panel. ``review`` says who saw each unit and what was
    measured (``agreement_review``). A single-review stage leaves out its items awaiting their
    second review and reports no agreement coefficient (its two-label units are the disputed
    ones); it reports its ``dispute`` rate and, over ``audit_samples`` (every audit's when not
    given), its first labels' ``audit_agreement``. ``rows``: the votes on ``items`` as the stage's
    ``agreement_rows`` gives them, in any order, already read (a stage that reviews twice excepted)."""
    panel = panel or stage.agreement_panel
    if single_review(stage):
        items = items.exclude(stage.awaiting_second_review())
        rows = None
    if rows is None:
        rows = stage.agreement_rows(items)
    if rows.unit.size == 0:
        return None
    report = agreement_report(_unit_index(rows.unit), rows.rater, rows.category, rows.is_adjudication,
                              len(stage.categories), labels=list(stage.categories), time_spent=rows.seconds,
                              panel=panel)
    report["vote_distributions"].pop("combinations", None)  # tuple keys; "detail" says the same in text
    return _with_design(report, stage, panel, rows, audit_samples)


def _with_design(report: dict, stage: ReviewStage, panel: int, rows, audit_samples) -> dict:
    """The report with what it measures; a single-review stage's coefficients replaced by its
    dispute rate and audit agreement (``agreement_review``)."""
    report["review"] = review_design(stage, panel)
    if not single_review(stage):
        return report
    report.update(raw_agreement=None, fleiss_kappa=None, fleiss_n_items=0, krippendorff_alpha=None, alpha_n_items=0)
    report["vote_distributions"] = {"panel": panel, "n_items": 0, "patterns": {}, "detail": {}}
    for row in report["per_rater"].values():
        row.update(n_scored=0, agreement_with_majority=None)
    report["dispute"] = dispute_stats(rows, stage.categories)
    samples = AuditSample.objects.all() if audit_samples is None else audit_samples
    report["audit_agreement"] = audit_agreement(stage=stage, samples=samples)
    return report


def _unit_index(unit: np.ndarray) -> np.ndarray:
    """Each entry's position among the distinct units, as ``np.unique(unit, return_inverse=True)``
    gives it; through a table over the units' range where that range is small (item ids)."""
    low, high = int(unit.min()), int(unit.max())
    if high - low >= 4 * unit.size + (1 << 16):
        return np.unique(unit, return_inverse=True)[1].reshape(-1)
    present = np.zeros(high - low + 1, bool)                                               # [range]
    present[unit - low] = True
    return (np.cumsum(present) - 1)[unit - low]                                            # [V]


def agreement_stats(*, stage: str, split: str | None = None, recompute: bool = False,
                    rows: AgreementRows | None = None) -> dict:
    """Agreement report of one stage (optionally one split) with per-annotator rows by username.

    Units and categories are the stage's (``annotation.curation.stages``): an item and its labels,
    or for the relation stage each candidate of a row and its label 1, 0 or ⊥. Stages whose items
    copy the review policy use the items' panel size. A panel stage's figures come from its
    agreement tallies, brought up to date first (``agreement_tallies``); ``recompute`` reads them
    from every vote instead (the reference the tallies are tested against); ``rows`` with it: the
    votes already read (``decisions_and_agreement``)."""
    declared = stage_get(stage)
    panel = declared.agreement_panel
    if declared.from_policy:
        panel = int(_first_panel_size(stage) or panel)
    samples = AuditSample.objects.filter(audit__split=split) if split else AuditSample.objects.all()
    if declared.name in TALLIED_NAMES and not recompute:
        agreement_tallies_refresh()
        report = tallied_agreement_report(stage=declared, split=split, panel=panel)
        if report is not None:
            report = _with_design(report, declared, panel, None, samples)
    else:
        report = stage_agreement_report(stage=declared, items=_items(stage, split), panel=panel,
                                        audit_samples=samples, rows=rows)
    if report is None:
        empty = np.zeros(0, np.int64)
        report = agreement_report(empty, empty, empty, np.zeros(0, bool), len(declared.categories),
                                  labels=list(declared.categories), time_spent=np.zeros(0), panel=panel)
        report["vote_distributions"].pop("combinations", None)
        rows = AgreementRows(unit=empty, rater=empty, category=empty, is_adjudication=np.zeros(0, bool),
                             seconds=np.zeros(0))
        report = _with_design(report, declared, panel, rows, samples)
    names = dict(get_user_model().objects.filter(pk__in=[int(k) for k in report["per_rater"]])
                 .values_list("pk", "username"))
    report["per_rater"] = {names.get(int(k), str(k)): v for k, v in report["per_rater"].items()}
    report.update(stage=declared.name, split=split or "all")
    return _json_safe(report)


def _first_panel_size(stage: str) -> int | None:
    """The panel size of the stage's first item in the items' order (video, then id): the first
    video, then its first item, each through an index rather than a sort of every item."""
    items = WorkItem.objects.filter(stage=stage)
    first_video = items.aggregate(first=Min("video_id"))["first"]
    if first_video is None:
        return None
    return items.filter(video_id=first_video).order_by("id").values_list("panel_size", flat=True).first()


def _json_safe(value):
    """Plain JSON: NaN (an undefined statistic, e.g. kappa when every vote agrees) becomes None."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    return value


def decisions_audit(*, stage: str) -> dict:
    """Recompute every item's state of a stage from its votes, in bulk, and compare with the stored
    state: the items and their votes read as integer arrays (``common.columns``), counted per item
    and label with ``bincount``, and the rule vectorised (``rules.decide_counts``).

    Items reopened by a consolidation conflict follow ``decide`` over all their votes as one panel
    (``rules.decide_reopened``), or were closed unresolved by a later conflict, not the panel rule,
    and are left out. Returns counts per outcome and the ids of items whose stored state disagrees.
    A vote whose label is not one of the stage's is refused with ``ValueError``.
    """
    declared = _majority_stage(stage)
    items = WorkItem.objects.filter(stage=stage, reopened_at__isnull=True)
    ids, _, policy, stored = _item_columns(items, declared.label_values)
    if not ids.size:
        return _no_items(stage)
    position, code = integer_columns_among(
        Vote.objects.all(), label_code(declared.label_values), field="item_id", keys=ids, parents=items,
        first_below=2 * (len(declared.label_values) + 1))
    return _decisions(declared, items, ids, policy, stored, position, code)


def decisions_and_agreement(*, stage: str) -> dict:
    """:func:`decisions_audit` and ``agreement_stats(recompute=True)`` of one stage decided by the
    majority rule (the ``agreement`` command's ``--audit``), from one reading of its items and their
    votes: ``{"decisions": ..., "agreement": ...}``, each equal to what its own function returns
    (the agreement figures do not depend on the order the votes come in,
    ``models.curation.agreement``). Refuses what either refuses, the audit's refusals first."""
    declared = _majority_stage(stage)
    labels = declared.label_values
    if declared.categories != labels or getattr(declared.agreement_rows, "labels", None) != labels:
        return {"decisions": decisions_audit(stage=stage), "agreement": agreement_stats(stage=stage, recompute=True)}
    items = _items(stage, None)
    ids, reopened, policy, stored = _item_columns(items, labels)                      # [I] each
    low, (position, code, packed) = read_with_rater_time(
        lambda votes, packed_time, below: integer_columns_among(
            votes, label_code(labels), packed_time, field="item_id", keys=ids, parents=items,
            first_below=2 * (len(labels) + 1), last_below=below, parts=READ_PARTS))  # [V] each
    # the audit: the items not reopened and their votes, positions among those items
    kept = ~reopened                                                                   # [I]
    audited = kept[position]                                                           # [V]
    renumbered = np.cumsum(kept) - 1                                                   # [I]
    if not kept.any():
        decisions = _no_items(stage)
    else:
        decisions = _decisions(declared, items.filter(reopened_at__isnull=True), ids[kept], policy[kept],
                               stored[kept], renumbered[position[audited]], code[audited])
    rows = label_agreement_rows(labels, ids[position], code, packed, low)
    return {"decisions": decisions, "agreement": agreement_stats(stage=stage, recompute=True, rows=rows)}


def _majority_stage(stage: str) -> ReviewStage:
    declared = stage_get(stage)
    if not declared.majority_rule:
        majority = [s.name for s in STAGES if s.majority_rule]
        raise ApplicationError(f"the {stage} stage is not decided by the majority rule; audit one of "
                               f"{', '.join(majority)}", code="invalid_stage")
    return declared


def _no_items(stage: str) -> dict:
    return {"stage": stage, "n_items": 0, "outcomes": {}, "mismatched": []}


def _item_columns(items: QuerySet[WorkItem], labels: tuple[str, ...]) -> tuple[np.ndarray, ...]:
    """The items' ids, reopened flags, review policies (``panel * _POLICY_RADIX + required``) and
    stored outcomes (``state index * (K + 2) + decision index``), ``[I]`` each in id order. The
    database sends the four as one number per item where the ids leave room for it (the highest
    id, read through the primary key's index, bounds them), else as two columns."""
    n_stored = (len(_STATES) + 1) * (len(labels) + 2)    # state indices (one for any other) by decisions
    policy = F("panel_size") * _POLICY_RADIX + F("required_votes")          # < _POLICY_SPAN (two smallints)
    reopened = Case(When(reopened_at__isnull=False, then=Value(1)), default=Value(0), output_field=IntegerField())
    stored = index_of("state", _STATES) * (len(labels) + 2) + index_of("decision", ("", *labels))
    small = ExpressionWrapper((reopened * _POLICY_SPAN + policy) * n_stored + stored, output_field=BigIntegerField())
    radix = 2 * _POLICY_SPAN * n_stored                  # the values of ``small``
    bounds = WorkItem.objects.aggregate(low=Min("id"), high=Max("id"))
    if bounds["high"] is not None and bounds["low"] >= 0 and bounds["high"] < (1 << 63) // radix:
        (combined,) = integer_columns(items, ExpressionWrapper(Cast("id", BigIntegerField()) * radix + small,
                                                               output_field=BigIntegerField()))
        ids, small = np.divmod(combined, radix)                                        # [I], [I]
    else:
        ids, small = integer_columns(items, "id", small)                               # [I], [I]
    ids, small = order_by_column(ids, small)
    rest, stored = np.divmod(small, n_stored)                                          # [I], [I]
    reopened, policy = np.divmod(rest, _POLICY_SPAN)                                   # [I], [I]
    return ids, reopened.astype(bool), policy, stored


def _decisions(declared: ReviewStage, items: QuerySet[WorkItem], ids: np.ndarray, policy: np.ndarray,
               stored: np.ndarray, position: np.ndarray, code: np.ndarray) -> dict:
    """:func:`decisions_audit` of the items ``ids`` ``[I]`` (their policies and stored outcomes
    ``[I]``) from their votes: each one's position in ``ids`` and :func:`label_code` ``[V]``."""
    stage, labels = declared.name, declared.label_values
    n_labels = len(labels)
    radix = n_labels + 1                                     # label indices, and one for any other label
    if np.any(code % radix == n_labels):
        stray = Vote.objects.filter(item__in=items).exclude(label__in=labels).values_list("label", flat=True).first()
        raise ValueError(f"a vote on a {stage} item has the label {stray!r}, not one of {', '.join(labels)}")
    counts = np.bincount(position * (2 * radix) + code, minlength=ids.size * 2 * radix)  # [I * 2 * (K + 1)]
    counts = counts.reshape(ids.size, 2, radix)                                        # [I, 2, K + 1]
    panel_counts = np.ascontiguousarray(counts[:, 0, :n_labels])                       # [I, K]
    adjudication_counts = np.ascontiguousarray(counts[:, 1, :n_labels])                # [I, K]
    n_adjudication = adjudication_counts[:, 0].copy()                                  # [I] adjudication votes
    for k in range(1, n_labels):
        n_adjudication += adjudication_counts[:, k]
    all_counts = panel_counts + adjudication_counts                                    # [I, K]
    decisive = np.array([label in declared.decisive for label in labels])
    rules = np.unique(policy)
    outcome = np.full(ids.size, PENDING_CODE)                                          # [I]
    for rule in rules:  # one vectorised pass per review policy (usually one)
        panel, required = divmod(int(rule), _POLICY_RADIX)
        if rules.size == 1:  # every item under it: no rows to pick out
            outcome = decide_counts(panel_counts, all_counts, n_adjudication, decisive, required, panel)
            break
        rows_of = policy == rule                                                       # [I]
        outcome[rows_of] = decide_counts(panel_counts[rows_of], all_counts[rows_of], n_adjudication[rows_of],
                                         decisive, required, panel)
    expected_state = np.select([outcome >= 0, outcome == PENDING_CODE, outcome == ADJUDICATE_CODE],
                               [_STATES.index(WorkItem.State.DECIDED), _STATES.index(WorkItem.State.OPEN),
                                _STATES.index(WorkItem.State.ADJUDICATE)],
                               _STATES.index(WorkItem.State.UNRESOLVED))               # [I]
    expected_decision = np.where(outcome >= 0, outcome + 1, 0)                         # [I] index into ("", *labels)
    wrong = stored != expected_state * (n_labels + 2) + expected_decision              # [I]
    tally = np.bincount(expected_state, minlength=len(_STATES))                        # [S]
    return {"stage": stage, "n_items": int(ids.size),
            "outcomes": {name: int(n) for name, n in zip(_STATES, tally.tolist()) if n},
            "mismatched": ids[wrong].tolist()}


# An item's states in name order (as the outcome counts list them); any other stored value reads
# as the index past them, so it never matches an expected state.
_STATES = tuple(sorted(WorkItem.State.values))
_POLICY_RADIX = 1 << 16                                      # panel size and required votes, one number
_POLICY_SPAN = 1 << 31                                       # above any such number (both are smallints)
# the ``agreement`` command's reading of every vote of a stage: as many page ranges of the votes at
# once as the machine has cores (common.columns: the database computes each range on a core of its
# own; the items, a third as many rows, are read whole)
READ_PARTS = min(4, os.cpu_count() or 1)

