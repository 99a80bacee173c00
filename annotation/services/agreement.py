"""Agreement statistics of the stored votes, per stage and split (DESIGN 2.3, issue 3 item 7).

The votes are read as columns (one query, no per-item Python) and handed to the vectorised
``models.agreement.agreement_report``; rater ids are mapped back to usernames at the end.
"""
from __future__ import annotations

import numpy as np
from django.contrib.auth import get_user_model

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
    rows = list(votes.order_by().values_list("item_id", "annotator_id", "label", "is_adjudication", "time_spent_ms"))
    labels = STAGE_LABELS[stage]
    index = {label: i for i, label in enumerate(labels)}
    n = len(rows)
    columns = {
        "item": np.fromiter((r[0] for r in rows), np.int64, n),
        "rater": np.fromiter((r[1] for r in rows), np.int64, n),
        "label": np.fromiter((index[r[2]] for r in rows), np.int64, n),
        "is_adjudication": np.fromiter((r[3] for r in rows), bool, n),
        "time_spent": np.fromiter((np.nan if r[4] is None else r[4] / 1000.0 for r in rows), np.float64, n),
    }
    return columns


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
