"""What a stage's agreement figures measure, and the figures of single-review stages.

Every stage says how many people saw each of its agreement units and how the units measured were
selected (:func:`review_design`). Three-vote panels keep their chance-corrected figures.

A single-review stage (relation rows, cross-video pairs: ``ReviewStage.widened_panel``) gives a
unit a second, independent review only when its first label was disputed (⊥, or against the
writer's binary proposal). Its units with two labels are the disputed ones, so agreement among
them is disagreement by construction: no raw agreement, kappa or alpha is computed over them.
Such a stage reports instead (seed 002, E, "pre-adjudication agreement"):

- ``dispute``: of the units whose first review is in (an item awaiting its second review is left
  out), the share that was disputed, with its exact (Clopper–Pearson) 95 % interval; the first
  labels' distribution and what the second reviews said;
- ``audit_agreement``: on the blind audits' *random* samples of accepted relations decided in
  this stage, how often the first label equals the auditor's, with its exact 95 % interval and the
  table of (first label, auditor's label). An auditor's label is the accepted label when the
  verdict is ``correct``; the label an error names (``should_be_match`` 1, ``should_be_mismatch``
  0, ``should_be_unknown`` ⊥); for another error type, "not the accepted label" (a first label
  agrees when it differs from the accepted one).

Units of one row share a query, so the intervals, which treat units as independent, are
optimistic where rows differ much.
"""
from __future__ import annotations

import numpy as np
from django.db.models import IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.fields.json import KT

from annotation.curation.stages.base import AgreementRows, ReviewStage
from annotation.curation.stages.pair import PAIR_LABEL_VALUES
from annotation.models import AuditSample, RelationJudgment, Vote
from models.curation.calibration import clopper_pearson_interval

RELATION_CATEGORIES = ("1", "0", "⊥")        # a relation label 1, 0, -1 as the figures name it
_CATEGORY = {1: 0, 0: 1, -1: 2}
_NAMED_ERROR = {"should_be_match": 0, "should_be_mismatch": 1, "should_be_unknown": 2}  # category the error names
_OTHER = 3                                    # "not the accepted label" (another error type)


def single_review(stage: ReviewStage) -> bool:
    """Whether the stage starts each item with one reviewer and widens only disputed ones."""
    return stage.widened_panel is not None


def review_design(stage: ReviewStage, panel: int) -> dict:
    """How many people saw each unit of the stage and how the units measured were selected."""
    unit = "each candidate of a query's row" if stage.name == "relation" else "each item"
    if single_review(stage):
        return {"kind": "single_review", "unit": unit, "people_per_unit": "1, or 2 where the first label was disputed",
                "measured": "dispute rate over every unit whose first review is in; first labels against the blind "
                            "audits' random samples of accepted relations; no agreement coefficient over the "
                            "second-reviewed (disputed) units"}
    return {"kind": "panel", "unit": unit, "people_per_unit": panel,
            "measured": f"every unit with its full panel of {panel} independent votes (raw agreement, Fleiss' kappa, "
                        "three-vote patterns) and every unit with two panel votes or more (Krippendorff's alpha); "
                        "adjudication votes left out"}


def _interval(successes: int, n: int) -> list[float] | None:
    return list(clopper_pearson_interval(successes, n)) if n else None


def dispute_stats(rows: AgreementRows, categories: tuple[str, ...]) -> dict:
    """Dispute rate of a single-review stage from its agreement rows (in vote order): a unit's
    first panel label is its first review; a unit with a second panel label was disputed."""
    panel = ~rows.is_adjudication                                                          # [V]
    unit, category = rows.unit[panel], rows.category[panel]                                # [Vp]
    n_categories = len(categories)
    if not unit.size:
        return {"n_units": 0, "n_disputed": 0, "rate": None, "ci95": None,
                "first_labels": dict.fromkeys(categories, 0), "second_review_labels": dict.fromkeys(categories, 0)}
    order = np.argsort(unit, kind="stable")                                                # [Vp] by unit, vote order kept
    unit, category = unit[order], category[order]
    starts = np.flatnonzero(np.concatenate([[True], unit[1:] != unit[:-1]]))               # [U] first vote of each unit
    per_unit = np.diff(np.append(starts, unit.size))                                       # [U] panel labels per unit
    disputed = per_unit >= 2                                                               # [U]
    first = category[starts]                                                               # [U]
    second = category[starts[disputed] + 1]                                                # [D]
    n_units, n_disputed = int(starts.size), int(disputed.sum())

    def counts(values: np.ndarray) -> dict[str, int]:
        tally = np.bincount(values[values >= 0], minlength=n_categories)                  # [K]
        return {name: int(n) for name, n in zip(categories, tally.tolist())}

    return {"n_units": n_units, "n_disputed": n_disputed, "rate": n_disputed / n_units,
            "ci95": _interval(n_disputed, n_units), "first_labels": counts(first),
            "second_review_labels": counts(second)}


def _first_label(stage: ReviewStage) -> Subquery:
    """The first panel label of an audited relation's review item, as the stage stores it."""
    if stage.name == "relation":
        return Subquery(RelationJudgment.objects.filter(
            vote__item_id=OuterRef("relation__item_id"), trajectory_id=OuterRef("relation__trajectory_id"),
            vote__is_adjudication=False).order_by("vote__created_at", "vote_id").values("label")[:1],
            output_field=IntegerField())
    return Subquery(Vote.objects.filter(item_id=OuterRef("relation__item_id"), is_adjudication=False)
                    .order_by("created_at", "id").values("label")[:1])


def audit_agreement(*, stage: ReviewStage, samples: QuerySet[AuditSample]) -> dict:
    """First labels of the stage against the auditors' verdicts on the random samples of
    accepted relations among ``samples`` that the stage decided (one statement)."""
    judged = samples.filter(kind="relation", stratum=AuditSample.Stratum.RANDOM, judgment__isnull=False,
                            relation__item__stage=stage.name)
    rows = list(judged.order_by("id").values_list(KT("recorded__label"), "judgment__verdict",
                                                  "judgment__error_type", _first_label(stage)))
    first_values = [r[3] for r in rows]
    if stage.name != "relation":
        first_values = [PAIR_LABEL_VALUES.get(v, -1) if v is not None else None for v in first_values]
    known = np.array([v is not None for v in first_values], bool)                          # [S]
    recorded = np.array([_CATEGORY.get(int(r[0]), 2) for r in rows], np.int64)[known]      # [S']
    first = np.array([_CATEGORY.get(v, 2) for v in first_values if v is not None], np.int64)  # [S']
    verdict = np.array([r[1] == "correct" for r in rows], bool)[known]                     # [S']
    named = np.array([_NAMED_ERROR.get(r[2], _OTHER) for r in rows], np.int64)[known]     # [S']
    audit = np.where(verdict, recorded, named)                                             # [S'] 0..2, or 3: not recorded
    agrees = np.where(audit == _OTHER, first != recorded, first == audit)                  # [S']
    n, n_agree = int(agrees.size), int(agrees.sum())
    table = np.zeros((3, 4), np.int64)                                                     # [first, auditor]
    np.add.at(table, (first, audit), 1)
    auditor_names = (*RELATION_CATEGORIES, "not the accepted label")
    return {"n_judged": n, "n_agree": n_agree, "agreement": n_agree / n if n else None, "ci95": _interval(n_agree, n),
            "table": {f: {a: int(table[i, j]) for j, a in enumerate(auditor_names) if table[i, j]}
                      for i, f in enumerate(RELATION_CATEGORIES)}}
