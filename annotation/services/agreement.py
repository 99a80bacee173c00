"""Agreement statistics of the stored votes, per stage and split (DESIGN 2.3, issue 3 item 7).

The votes are read as columns (one query, no per-item Python) and handed to the vectorised
``models.agreement.agreement_report``; rater ids are mapped back to usernames at the end.
"""
from __future__ import annotations

import numpy as np
from django.contrib.auth import get_user_model
from django.db.models import Case, Count, FloatField, IntegerField, Value, When
from django.db.models.functions import Cast, Coalesce

from annotation.models import IDENTITY_LABELS, USABILITY_LABELS, Vote, WorkItem
from common.errors import ApplicationError
from models.agreement import agreement_report

STAGE_LABELS = {WorkItem.Stage.USABILITY: USABILITY_LABELS, WorkItem.Stage.IDENTITY: IDENTITY_LABELS}


def vote_columns(*, stage: str, split: str | None = None) -> dict[str, np.ndarray]:
    """The stage's votes as parallel arrays: item, rater, label index, adjudication flag, seconds."""
    if stage not in STAGE_LABELS:
        raise ApplicationError(f"unknown stage {stage!r}; use {list(STAGE_LABELS)}", code="invalid_stage")
    votes = Vote.objects.filter(item__stage=stage)
    if split:
        votes = votes.filter(item__video__split_group__split=split)
    labels = STAGE_LABELS[stage]
    # Labels become indices and missing times NaN in the database, so the rows arrive as numbers
    # and turn into one float array without a Python step per vote.
    label_index = Case(*[When(label=name, then=Value(i)) for i, name in enumerate(labels)],
                       output_field=IntegerField())
    seconds = Coalesce(Cast("time_spent_ms", FloatField()) / 1000.0, Value(float("nan")), output_field=FloatField())
    rows = list(votes.order_by().values_list("item_id", "annotator_id", label_index, Cast("is_adjudication", IntegerField()),
                                             seconds))
    table = np.array(rows, dtype=np.float64).reshape(-1, 5)                    # [V, 5]
    return {
        "item": table[:, 0].astype(np.int64),
        "rater": table[:, 1].astype(np.int64),
        "label": table[:, 2].astype(np.int64),
        "is_adjudication": table[:, 3].astype(bool),
        "time_spent": table[:, 4],
    }


def agreement_stats(*, stage: str, split: str | None = None) -> dict:
    """Agreement report of one stage (optionally one split) with per-annotator rows by username."""
    columns = vote_columns(stage=stage, split=split)
    labels = STAGE_LABELS[stage]
    panel = int(WorkItem.objects.filter(stage=stage).values_list("panel_size", flat=True).first() or 3)
    _, item_index = np.unique(columns["item"], return_inverse=True)
    report = agreement_report(item_index, columns["rater"], columns["label"], columns["is_adjudication"],
                              len(labels), labels=list(labels), time_spent=columns["time_spent"], panel=panel)
    names = dict(get_user_model().objects.filter(pk__in=np.unique(columns["rater"]).tolist())
                 .values_list("pk", "username"))
    report["per_rater"] = {names.get(int(k), str(k)): v for k, v in report["per_rater"].items()}
    report["vote_distributions"].pop("combinations", None)  # tuple keys; "detail" says the same in text
    report.update(stage=stage, split=split or "all")
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

    Items reopened by a consolidation conflict follow their adjudication, not the panel rule, and
    are left out. Returns counts per outcome and the ids of items whose stored state disagrees.
    """
    from annotation.rules import ADJUDICATE_CODE, PENDING_CODE, UNRESOLVED_CODE, decide_counts

    if stage not in STAGE_LABELS:
        raise ApplicationError(f"unknown stage {stage!r}; use {list(STAGE_LABELS)}", code="invalid_stage")
    labels = STAGE_LABELS[stage]
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
    decisive = np.array([label in WorkItem(stage=stage).decisive for label in labels])
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
