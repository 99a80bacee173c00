"""Agreement statistics of the stored votes, per stage and split (DESIGN 2.3, issue 3 item 7).

Each stage says what its agreement units and categories are (``annotation.curation.stages``);
its votes are read as columns (one query, no per-item Python) and handed to the vectorised
``models.curation.agreement.agreement_report``; rater ids are mapped back to usernames at the end.
"""
from __future__ import annotations

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Count, QuerySet

from annotation.curation.stages import STAGES, stage_get
from annotation.curation.stages.base import ReviewStage
from annotation.models import Vote, WorkItem
from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, UNRESOLVED_CODE, decide_counts
from common.errors import ApplicationError
from models.curation.agreement import agreement_report


def vote_columns(*, stage: str, split: str | None = None) -> dict[str, np.ndarray]:
    """The stage's votes as parallel arrays over its agreement units (an item, or a relation row's
    candidate): unit, rater, category index, adjudication flag, seconds."""
    rows = stage_get(stage).agreement_rows(_votes(stage, split))
    return {"item": rows.unit, "rater": rows.rater, "label": rows.category, "is_adjudication": rows.is_adjudication,
            "time_spent": rows.seconds}


def _votes(stage: str, split: str | None) -> QuerySet[Vote]:
    votes = Vote.objects.filter(item__stage=stage)
    return votes.filter(item__video__split_group__split=split) if split else votes


def stage_agreement_report(*, stage: ReviewStage, votes: QuerySet[Vote], panel: int | None = None) -> dict | None:
    """``models`` agreement figures of ``votes`` (one stage's) over the stage's agreement units and
    categories; ``None`` without votes. Raters stay user ids (``per_rater``); ``panel`` defaults to
    the stage's full panel."""
    rows = stage.agreement_rows(votes)
    if rows.unit.size == 0:
        return None
    _, unit_index = np.unique(rows.unit, return_inverse=True)
    report = agreement_report(unit_index.reshape(-1), rows.rater, rows.category, rows.is_adjudication,
                              len(stage.categories), labels=list(stage.categories), time_spent=rows.seconds,
                              panel=panel or stage.agreement_panel)
    report["vote_distributions"].pop("combinations", None)  # tuple keys; "detail" says the same in text
    return report


def agreement_stats(*, stage: str, split: str | None = None) -> dict:
    """Agreement report of one stage (optionally one split) with per-annotator rows by username.

    Units and categories are the stage's (``annotation.curation.stages``): an item and its labels,
    or for the relation stage each candidate of a row and its label 1, 0 or ⊥. Stages whose items
    copy the review policy use the items' panel size."""
    declared = stage_get(stage)
    panel = declared.agreement_panel
    if declared.from_policy:
        panel = int(WorkItem.objects.filter(stage=stage).values_list("panel_size", flat=True).first() or panel)
    report = stage_agreement_report(stage=declared, votes=_votes(stage, split), panel=panel)
    if report is None:
        empty = np.zeros(0, np.int64)
        report = agreement_report(empty, empty, empty, np.zeros(0, bool), len(declared.categories),
                                  labels=list(declared.categories), time_spent=np.zeros(0), panel=panel)
        report["vote_distributions"].pop("combinations", None)
    names = dict(get_user_model().objects.filter(pk__in=[int(k) for k in report["per_rater"]])
                 .values_list("pk", "username"))
    report["per_rater"] = {names.get(int(k), str(k)): v for k, v in report["per_rater"].items()}
    report.update(stage=declared.name, split=split or "all")
    return _json_safe(report)


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
    state: grouped counts from the database, the rule vectorised (``rules.decide_counts``).

    Items reopened by a consolidation conflict follow ``decide`` over all their votes as one panel
    (``rules.decide_reopened``), or were closed unresolved by a later conflict, not the panel rule,
    and are left out. Returns counts per outcome and the ids of items whose stored state disagrees.
    """
    declared = stage_get(stage)
    if not declared.majority_rule:
        majority = [s.name for s in STAGES if s.majority_rule]
        raise ApplicationError(f"the {stage} stage is not decided by the majority rule; audit one of "
                               f"{', '.join(majority)}", code="invalid_stage")
    labels = declared.label_values
    items = list(WorkItem.objects.filter(stage=stage, reopened_at__isnull=True).order_by("id")
                 .values_list("id", "state", "decision", "panel_size", "required_votes"))
    if not items:
        return {"stage": stage, "n_items": 0, "outcomes": {}, "mismatched": []}
    ids = np.fromiter((r[0] for r in items), np.int64, len(items))
    grouped = (Vote.objects.filter(item__stage=stage, item__reopened_at__isnull=True).order_by()
               .values_list("item_id", "label", "is_adjudication").annotate(n=Count("id")))
    panel_counts = np.zeros((len(ids), len(labels)), np.int64)                  # [I, K]
    adjudication_counts = np.zeros_like(panel_counts)                           # [I, K]
    rows = list(grouped)
    if rows:
        row_item = np.searchsorted(ids, np.fromiter((r[0] for r in rows), np.int64, len(rows)))
        row_label = np.fromiter((labels.index(r[1]) for r in rows), np.int64, len(rows))
        row_adj = np.fromiter((r[2] for r in rows), bool, len(rows))
        row_n = np.fromiter((r[3] for r in rows), np.int64, len(rows))
        np.add.at(panel_counts, (row_item[~row_adj], row_label[~row_adj]), row_n[~row_adj])
        np.add.at(adjudication_counts, (row_item[row_adj], row_label[row_adj]), row_n[row_adj])
    decisive = np.array([label in declared.decisive for label in labels])
    outcome = np.full(len(ids), PENDING_CODE)
    policies = {(r[3], r[4]) for r in items}
    panel_sizes = np.fromiter((r[3] for r in items), np.int64, len(items))
    required = np.fromiter((r[4] for r in items), np.int64, len(items))
    for panel, req in policies:  # one vectorised pass per review policy (usually one)
        rows_of = (panel_sizes == panel) & (required == req)
        outcome[rows_of] = decide_counts(panel_counts[rows_of], panel_counts[rows_of] + adjudication_counts[rows_of],
                                         adjudication_counts[rows_of].sum(axis=1), decisive, req, panel)
    names = {PENDING_CODE: "open", ADJUDICATE_CODE: "adjudicate", UNRESOLVED_CODE: "unresolved"}
    expected_state = np.array([names.get(int(c), "decided") for c in outcome])
    expected_decision = np.array(["" if c < 0 else labels[int(c)] for c in outcome])
    stored_state = np.array([r[1] for r in items])
    stored_decision = np.array([r[2] for r in items])
    wrong = (expected_state != stored_state) | (expected_decision != stored_decision)
    states, counts = np.unique(expected_state, return_counts=True)
    return {"stage": stage, "n_items": len(ids), "outcomes": dict(zip(states.tolist(), counts.tolist())),
            "mismatched": ids[wrong].tolist()}
