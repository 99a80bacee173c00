"""The pseudo-label gate for automatic easy negatives (DESIGN 2.9), on stored records.

1. ``pseudo_rule_declare``: a manager freezes a rule (``models.curation.calibration.EasyNegativeRule``) and
   declares the largest acceptable error rate before any audit.
2. ``pseudo_calibration_sample_queue``: the rule runs on the dev split's mined pairs, and a
   uniform sample of the selected pairs that nobody has reviewed yet goes to pair review *blind*:
   no reviewer on those items is shown the writer's proposal.
3. ``pseudo_rule_calibrate``: the selected pairs are audited against the verified relations people
   gave them, **blinded labels only** (E.3.2: independent human calibration): a pair counts when
   the vote that decided its label was cast without the proposal in view (an item opened blind,
   an independent second review, an adjudication of a widened item; ``annotation.curation.stages
   .pair.decided_blind``, recorded as ``evidence["blind"]``). A ``0`` is correct, a ``1`` an
   error, ``⊥`` uncertain, which counts as an error. Pairs labelled with the proposal in view, and
   pairs without a label, are left out and counted. Second reviews happen where the first
   reviewer disputed the proposal, so they can only make the estimate more cautious. Too few
   blinded pairs for the declared bound: refused (409 ``audit_too_small``). Otherwise the rule is
   accepted only if the one-sided 95% Clopper–Pearson upper bound of its error rate is at most
   the declared bound. Calibration happens once; from then on the database refuses any change to
   the rule.
4. ``pseudo_labels_apply``: an accepted rule labels the train split's mined pairs that nobody
   reviewed as ``0``, tagged ``pseudo`` with the rule and the contradicted predicates as evidence.
   They are training signal only: dev and test snapshots leave them out.

A rule reads only pairs whose stored similarity was produced by the rule's ``encoder``: the encoder
the mining run that stored the pair recorded in its first provenance row
(:func:`similarity_encoder`). Pairs of another encoder, or with none recorded, are neither
audited nor labelled (a threshold on one encoder's similarity means nothing on another's).
"""
from __future__ import annotations

import numpy as np
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.benchmark.services.descriptions import approved_facts
from annotation.curation.stages import pair as pair_stage
from annotation.models import CrossPair, Description, PseudoLabelRule, Relation, WorkItem
from common.errors import ApplicationError, ConflictError
from models.curation.calibration import (
    Calibration,
    EasyNegativeRule,
    apply_rule,
    calibrate,
    min_audit_size,
    rule_select,
    sample_for_audit,
)

MAX_CALIBRATION_SAMPLE = 10_000      # blind pair items one call opens at the most

# models.curation.calibration (and the FAISS miner it imports) loads on first use, not with the web routes.


def pseudo_rule_declare(*, rule: dict, declared_bound: float, created_by=None) -> PseudoLabelRule:
    """Freeze a rule and its declared error bound (400 ``invalid_rule``; 409 on a taken name)."""

    try:
        frozen = EasyNegativeRule.from_dict(rule)
    except (TypeError, ValueError) as exc:
        raise ApplicationError(f"invalid pseudo-label rule: {exc}", code="invalid_rule") from None
    if isinstance(declared_bound, bool) or not isinstance(declared_bound, int | float) or not 0 < declared_bound < 1:
        raise ApplicationError("declared_bound must be an error rate in (0, 1)", code="invalid_rule")
    try:
        with transaction.atomic():
            return PseudoLabelRule.objects.create(name=frozen.name, rule=frozen.to_dict(), rule_sha256=frozen.rule_hash(),
                                                  declared_bound=float(declared_bound), created_by=created_by)
    except IntegrityError:
        raise ConflictError(f"a rule named {frozen.name!r} exists; rules are never changed, declare a new name",
                            code="rule_exists") from None


def _pairs_of(split: str):
    return list(CrossPair.objects.filter(query__video__split_group__split=split).select_related("query")
                .order_by("query_id", "trajectory_id"))


def _facts(trajectory_ids) -> dict[int, list]:
    out: dict[int, list] = {}
    for d in Description.objects.filter(trajectory_id__in=set(trajectory_ids), status=Description.Status.APPROVED
                                        ).select_related("approved_version"):
        out[d.trajectory_id] = approved_facts(d)
    return out


def similarity_encoder(pair: CrossPair) -> str:
    """The encoder of the pair's stored similarity: the first provenance row's (the mining run that
    stored the pair); "" when none is recorded."""
    first = pair.provenance[0] if pair.provenance and isinstance(pair.provenance[0], dict) else {}
    return str(first.get("encoder") or "")


def _same_encoder(rule: EasyNegativeRule, pairs) -> tuple[list, int]:
    """The pairs whose similarity the rule's encoder produced, and how many others were left out."""
    kept = [p for p in pairs if similarity_encoder(p) == rule.encoder]
    return kept, len(pairs) - len(kept)


def _columns(pairs):
    return dict(query_ids=np.array([p.query_id for p in pairs], np.int64),
                trajectory_ids=np.array([p.trajectory_id for p in pairs], np.int64),
                similarity=np.array([p.similarity for p in pairs], np.float64),
                strata=np.array([p.stratum if p.stratum != "completion" else "random" for p in pairs]),
                query_predicates={p.query_id: p.query.predicates for p in pairs},
                trajectory_facts=_facts(p.trajectory_id for p in pairs))


def _frozen(rule_row: PseudoLabelRule):

    rule = EasyNegativeRule.from_dict(rule_row.rule)
    if rule.rule_hash() != rule_row.rule_sha256:
        raise ConflictError(f"rule {rule_row.name!r} no longer matches the hash it was declared with",
                            code="rule_changed")
    return rule


def _selected_dev_pairs(rule: EasyNegativeRule) -> tuple[list, list, int]:
    """(the dev pairs of the rule's encoder, those the rule selects, how many dev pairs another
    encoder scored)."""
    pairs, other_encoder = _same_encoder(rule, _pairs_of("dev"))
    chosen = rule_select(rule, **_columns(pairs)) if pairs else np.zeros(0, bool)
    return pairs, [pairs[i] for i in np.flatnonzero(chosen)], other_encoder


def _human_relations(pairs) -> dict[tuple[int, int], Relation]:
    return {(r.query_id, r.trajectory_id): r for r in Relation.objects.filter(
        query_id__in={p.query_id for p in pairs}, pseudo=False)}


def relation_blinded(relation: Relation) -> bool:
    """Whether a pair's verified label was decided by people not shown the writer's proposal (as
    pair review recorded it when the item closed; a label without that record is not blinded)."""
    return (relation.evidence or {}).get("blind") is True


def pseudo_calibration_sample_queue(*, rule_row: PseudoLabelRule, size: int | None = None,
                                    seed: int = 0) -> dict:
    """Open blind pair review (no proposal shown to anyone) for ``size`` dev pairs (default: the
    smallest audit that can accept the declared bound) drawn uniformly from those the rule selects
    that have no review item and no verified label yet. Refused: a calibrated rule (409
    ``rule_calibrated``), a size outside 1..``MAX_CALIBRATION_SAMPLE`` (400 ``invalid_size``), a
    negative seed (400 ``invalid_seed``).
    Locks the rule row, so two calls do not open the same pairs twice."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                             or not 1 <= size <= MAX_CALIBRATION_SAMPLE):
        raise ApplicationError(f"size must be an integer in 1..{MAX_CALIBRATION_SAMPLE}", code="invalid_size")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ApplicationError("seed must be a non-negative integer", code="invalid_seed")
    with transaction.atomic():
        rule_row = PseudoLabelRule.objects.select_for_update().get(pk=rule_row.pk)
        if rule_row.calibrated_at is not None:
            raise ConflictError(f"rule {rule_row.name!r} is calibrated; its sample is closed", code="rule_calibrated")
        rule = _frozen(rule_row)
        pairs, selected, other_encoder = _selected_dev_pairs(rule)
        needed = min_audit_size(rule_row.declared_bound)
        reviewing = set(WorkItem.objects.filter(stage=WorkItem.Stage.PAIR, pair__in=[p.pk for p in selected])
                        .values_list("pair_id", flat=True))
        labelled = _human_relations(selected)
        eligible = [p for p in selected if p.pk not in reviewing and (p.query_id, p.trajectory_id) not in labelled]
        picked = [eligible[i] for i in sample_for_audit(len(eligible), needed if size is None else size, seed)]
        WorkItem.objects.bulk_create([WorkItem(
            stage=WorkItem.Stage.PAIR, video_id=p.query.video_id, pair=p, panel_size=pair_stage.STAGE.panel,
            required_votes=pair_stage.STAGE.required, prelabels={"blind": True, "calibration_rule": rule_row.pk})
            for p in picked])
        CrossPair.objects.filter(pk__in=[p.pk for p in picked]).update(review=CrossPair.Review.QUEUED)
    blinded = sum(relation_blinded(r) for r in labelled.values())
    return {"considered": len(pairs), "selected": len(selected), "eligible": len(eligible), "queued": len(picked),
            "blinded": blinded, "needed": needed, "other_encoder": other_encoder}


def pseudo_rule_calibrate(*, rule_row: PseudoLabelRule) -> PseudoLabelRule:
    """Audit the rule on the blinded labels of the dev pairs it selects and accept or refuse it,
    once. Refused: a rule calibrated before (409 ``rule_calibrated``), too few blinded pairs for the
    declared bound (409 ``audit_too_small``, with the counts). Locks the rule row."""

    with transaction.atomic():
        rule_row = PseudoLabelRule.objects.select_for_update().get(pk=rule_row.pk)
        if rule_row.calibrated_at is not None:
            raise ConflictError(f"rule {rule_row.name!r} was calibrated on {rule_row.calibrated_at:%Y-%m-%d}; "
                                "declare a new rule to calibrate again", code="rule_calibrated")
        rule = _frozen(rule_row)
        pairs, selected, other_encoder = _selected_dev_pairs(rule)
        verified = _human_relations(selected)
        outcomes, not_blinded, unreviewed = [], 0, 0
        for p in selected:
            relation = verified.get((p.query_id, p.trajectory_id))
            if relation is None:
                unreviewed += 1
            elif not relation_blinded(relation):
                not_blinded += 1                     # the reviewer saw the proposal: not an independent audit
            else:
                outcomes.append("correct" if relation.label == 0 else "error" if relation.label == 1 else "uncertain")
        needed = min_audit_size(rule_row.declared_bound)
        if len(outcomes) < needed:
            skipped = (f"; {other_encoder} dev pairs have a similarity of another encoder than the rule's "
                       f"{rule.encoder!r} and were not read") if other_encoder else ""
            raise ConflictError(
                f"the rule selects {len(selected)} dev pairs, of which {len(outcomes)} carry a blinded label "
                f"({not_blinded} were labelled with the proposal in view, {unreviewed} are not labelled{skipped}); "
                f"a bound of {rule_row.declared_bound:g} needs at least {needed} blinded pairs: queue a blinded "
                "calibration sample and review it", code="audit_too_small",
                extra={"selected": len(selected), "blinded": len(outcomes), "not_blinded": not_blinded,
                       "unreviewed": unreviewed, "needed": needed})
        calibration = calibrate(rule, outcomes, rule_row.declared_bound, n_considered=len(pairs),
                                n_selected=len(selected), blinded=True, n_not_blinded=not_blinded,
                                n_unreviewed=unreviewed)
        rule_row.calibration = calibration.to_dict()
        rule_row.accepted = calibration.accepted
        rule_row.calibrated_at = timezone.now()
        rule_row.save(update_fields=["calibration", "accepted", "calibrated_at"])
    return rule_row


def pseudo_labels_apply(*, rule_row: PseudoLabelRule) -> dict:
    """Label the train split's unreviewed mined pairs that the accepted rule selects (idempotent:
    pairs with any relation already are left alone). Refused: an uncalibrated or refused rule
    (409 ``rule_not_accepted``), a rule that changed after calibration (409 ``rule_changed``), a
    calibration that was not blinded (409 ``calibration_not_blinded``)."""
    if rule_row.calibrated_at is None or not rule_row.accepted:
        raise ConflictError(f"rule {rule_row.name!r} is not calibrated and accepted; it labels nothing",
                            code="rule_not_accepted", extra={"calibration": rule_row.calibration})

    rule = _frozen(rule_row)
    calibration = Calibration.from_dict(rule_row.calibration)
    if not calibration.blinded:
        raise ConflictError(f"rule {rule_row.name!r} was calibrated on labels given with the model's proposal in "
                            "view; declare a new rule and calibrate it on a blinded sample",
                            code="calibration_not_blinded")
    pairs, other_encoder = _same_encoder(
        rule, [p for p in _pairs_of("train") if p.review == CrossPair.Review.NOT_SAMPLED])
    if not pairs:
        return {"considered": 0, "labelled": 0, "other_encoder": other_encoder}
    try:
        result = apply_rule(rule, calibration, **_columns(pairs))
    except ValueError as exc:
        raise ConflictError(str(exc), code="rule_changed") from None
    existing = set(Relation.objects.filter(query_id__in={p.query_id for p in pairs})
                   .values_list("query_id", "trajectory_id"))
    fresh = [label for label in result.labels if (label.query_id, label.trajectory_id) not in existing]
    before = Relation.objects.filter(rule=rule_row, pseudo=True).count()
    with transaction.atomic():   # a pair reviewed or labelled meanwhile keeps what it has
        Relation.objects.bulk_create(ignore_conflicts=True, objs=[Relation(
            query_id=label.query_id, trajectory_id=label.trajectory_id, label=0, source=Relation.Source.PSEUDO,
            stratum=label.stratum, pseudo=True, rule=rule_row,
            evidence={"contradicted": list(label.contradicted), "similarity": label.similarity,
                      "rule_sha256": label.rule_hash}) for label in fresh])
        labelled = Relation.objects.filter(rule=rule_row, pseudo=True).count() - before
    return {"considered": result.n_considered, "labelled": labelled, "other_encoder": other_encoder,
            "coverage": result.coverage,
            "calibration_coverage": result.calibration_coverage, "coverage_drift": result.coverage_drift}
