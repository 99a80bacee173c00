"""Audits (DESIGN 2.11): re-checking accepted records of a split, blinded.

Populations, per kind of record, in one split's benchmark (the current frozen pools of its
benchmark videos):

- ``relation``: the verified binary relations (``1`` or ``0``, pseudo-labels excluded) of the
  admitted queries against the split's pool members, within and across videos;
- ``query``: the admitted queries with their predicates;
- ``description``: the approved descriptions (``D_r^H``).

An audit draws, per kind and with one seed, ``n_random`` records uniformly from the accepted
population (their error rate estimates the residual error rate of the whole population) and
``n_difficult`` more from the *difficult* records not drawn already, reported apart:

- ``disputed``: a relation settled by an independent second review (or sent to one), a query whose
  row had disputed candidates, a description approved only after corrections;
- ``adjudicated``: an adjudication vote decided one of the record's review items;
- ``low_agreement``: the votes on the record disagreed (a candidate's labels in a row, a pair's
  labels, a description's panel labels).

The samples are offered in one shuffled order, so an auditor cannot tell the strata apart.
Auditors see the record as accepted (a relation's query, predicates, trajectory and label; a
query's text, predicates and target; a description's approved content) and nothing else: no
model suggestion, no vote, no source, no reason it was sampled. Nobody audits a record they voted
on. Each sample gets one verdict, ``correct`` or ``error`` with an error type of its kind
(``annotation.models.releases.AUDIT_ERROR_TYPES``); judgments are immutable.
"""
from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.benchmark.services.mining import SPLITS, split_members
from annotation.models import (
    Audit,
    AuditJudgment,
    AuditSample,
    Description,
    DescriptionVersion,
    Query,
    Relation,
    RelationJudgment,
    Vote,
    WorkItem,
)
from annotation.models.releases import AUDIT_ERROR_TYPES, AUDIT_KINDS, AUDIT_VERDICTS
from common.errors import ApplicationError, ConflictError, NotFoundError
from common.params import LEASE_SECONDS_MAX, SEED_MAX
from common.roles import Role, user_has_role
from models.curation.calibration import clopper_pearson_interval, clopper_pearson_upper

MAX_SAMPLE = 10_000        # records per kind and stratum one audit may ask for
CONFIDENCE = 0.95


# -- populations -----------------------------------------------------------------------------------
def _contested_items() -> tuple[set[int], set[int]]:
    """Ids of review items with an adjudication vote, and of pair items whose votes disagree."""
    adjudicated = set(Vote.objects.filter(is_adjudication=True).values_list("item_id", flat=True).distinct())
    split_pairs = set(Vote.objects.filter(item__stage=WorkItem.Stage.PAIR, is_adjudication=False).values("item_id")
                      .annotate(n=Count("label", distinct=True)).filter(n__gt=1).values_list("item_id", flat=True))
    return adjudicated, split_pairs


def relation_population(split: str) -> list[dict]:
    """The split's accepted relations, each with the reasons it counts as difficult."""
    queries, members = split_members(split)
    q_ids = [q.pk for q in queries]
    t_ids = [m.trajectory_id for m in members]
    rows = list(Relation.objects.filter(query_id__in=q_ids, trajectory_id__in=t_ids, label__in=(0, 1), pseudo=False)
                .order_by("id").values_list("id", "query_id", "trajectory_id", "source", "item_id"))
    item_ids = {r[4] for r in rows if r[4] is not None}
    items = {pk: (stage, set(int(t) for t in disputed or []))
             for pk, stage, disputed in WorkItem.objects.filter(pk__in=item_ids).values_list("pk", "stage", "disputed")}
    adjudicated, split_pairs = _contested_items()
    # candidates of a relation row whose reviewers labelled them differently
    split_cells = set(RelationJudgment.objects.filter(vote__item_id__in=item_ids, vote__is_adjudication=False)
                      .values("vote__item_id", "trajectory_id").annotate(n=Count("label", distinct=True))
                      .filter(n__gt=1).values_list("vote__item_id", "trajectory_id"))
    out = []
    for pk, _query, t, source, item in rows:
        stage, disputed = items.get(item, ("", set()))
        reasons = []
        if source == Relation.Source.SECOND_REVIEW or t in disputed or (stage == WorkItem.Stage.PAIR and disputed):
            reasons.append("disputed")
        if item in adjudicated:
            reasons.append("adjudicated")
        if (item, t) in split_cells or item in split_pairs:
            reasons.append("low_agreement")
        out.append({"id": pk, "items": [item] if item is not None else [], "reasons": reasons})
    return out


def query_population(split: str) -> list[dict]:
    """The split's admitted queries, each with the reasons it counts as difficult."""
    queries, _ = split_members(split)
    rows = WorkItem.objects.filter(stage=WorkItem.Stage.RELATION, query__in=[q.pk for q in queries])
    item_of = {q: (pk, bool(disputed)) for q, pk, disputed in rows.values_list("query_id", "pk", "disputed")}
    adjudicated, _ = _contested_items()
    split_rows = set(RelationJudgment.objects.filter(vote__item_id__in=[i for i, _ in item_of.values()],
                                                     vote__is_adjudication=False)
                     .values("vote__item_id", "trajectory_id").annotate(n=Count("label", distinct=True))
                     .filter(n__gt=1).values_list("vote__item_id", flat=True))
    out = []
    for q in queries:
        item, disputed = item_of.get(q.pk, (None, False))
        reasons = []
        if disputed:
            reasons.append("disputed")
        if item in adjudicated:
            reasons.append("adjudicated")
        if item in split_rows:
            reasons.append("low_agreement")
        out.append({"id": q.pk, "items": [item] if item is not None else [], "reasons": reasons})
    return out


def description_population(split: str) -> list[dict]:
    """Approved descriptions of the split's benchmark pools (the members' ``D_r^H``)."""
    _, members = split_members(split)
    pools = {m.pool_id for m in members}
    rows = list(Description.objects.filter(pool_id__in=pools, status=Description.Status.APPROVED)
                .order_by("id").values_list("id", "approved_version__origin"))
    ids = [r[0] for r in rows]
    items_of: dict[int, list[int]] = {}
    for item, desc in WorkItem.objects.filter(stage=WorkItem.Stage.DESCRIPTION, description__description_id__in=ids) \
            .order_by("id").values_list("pk", "description__description_id"):
        items_of.setdefault(desc, []).append(item)
    all_items = [i for items in items_of.values() for i in items]
    adjudicated, _ = _contested_items()
    split_panels = set(Vote.objects.filter(item_id__in=all_items, is_adjudication=False).values("item_id")
                       .annotate(n=Count("label", distinct=True)).filter(n__gt=1).values_list("item_id", flat=True))
    out = []
    for pk, origin in rows:
        items = items_of.get(pk, [])
        reasons = []
        if origin != DescriptionVersion.Origin.MODEL:
            reasons.append("disputed")
        if any(i in adjudicated for i in items):
            reasons.append("adjudicated")
        if any(i in split_panels for i in items):
            reasons.append("low_agreement")
        out.append({"id": pk, "items": items, "reasons": reasons})
    return out


POPULATIONS = {"relation": relation_population, "query": query_population, "description": description_population}


def _recorded(kind: str, ids: list[int]) -> dict[int, dict]:
    """What an auditor checks, per record: the record as accepted, nothing about how it was made."""
    if kind == "relation":
        rows = Relation.objects.filter(pk__in=ids).select_related("query", "trajectory")
        return {r.pk: {"query": r.query_id, "text": r.query.text, "predicates": r.query.predicates,
                       "query_video": r.query.video_id, "trajectory": r.trajectory_id,
                       "trajectory_video": r.trajectory.video_id, "label": r.label} for r in rows}
    if kind == "query":
        return {q.pk: {"query": q.pk, "text": q.text, "predicates": q.predicates, "video": q.video_id,
                       "pool": q.pool_id, "target": q.target_id} for q in Query.objects.filter(pk__in=ids)}
    rows = Description.objects.filter(pk__in=ids).select_related("approved_version", "pool")
    return {d.pk: {"description": d.pk, "trajectory": d.trajectory_id, "video": d.pool.video_id, "pool": d.pool_id,
                   "content": d.approved_version.content} for d in rows}


# -- creating an audit -----------------------------------------------------------------------------
def audit_create(*, split: str, n_random: int, n_difficult: int, seed: int = 0, kinds: list[str] | None = None,
                 lease_seconds: int = 900, created_by=None) -> Audit:
    """Sample an audit of ``split`` (see the module docstring). Refused: an unknown split or kind,
    sizes outside ``0..MAX_SAMPLE``, and a split with nothing accepted to audit (409). The same
    records, seed and sizes give the same samples in the same order."""
    if split not in SPLITS:
        raise ApplicationError(f"split must be one of {SPLITS}", code="invalid_split")
    kinds = list(dict.fromkeys(kinds or AUDIT_KINDS))
    unknown = [k for k in kinds if k not in AUDIT_KINDS]
    if unknown or not kinds:
        raise ApplicationError(f"unknown record kind(s) {unknown}; use {list(AUDIT_KINDS)}", code="invalid_kind")
    for name, value in (("n_random", n_random), ("n_difficult", n_difficult)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SAMPLE:
            raise ApplicationError(f"{name} must be an integer in 0..{MAX_SAMPLE}", code="invalid_size")
    if n_random + n_difficult == 0:
        raise ApplicationError("an audit needs n_random or n_difficult above zero", code="invalid_size")
    for name, value, low, high, code in (("lease_seconds", lease_seconds, 10, LEASE_SECONDS_MAX, "invalid_lease"),
                                         ("seed", seed, 0, SEED_MAX, "invalid_seed")):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ApplicationError(f"{name} must be an integer in {low}..{high}", code=code)
    rng = np.random.default_rng([int(seed) & (2**63 - 1), 7])
    population: dict[str, dict] = {}
    drawn: list[tuple[str, str, dict]] = []          # (kind, stratum, record)
    for kind in kinds:
        records = POPULATIONS[kind](split)
        difficult = [r for r in records if r["reasons"]]
        population[kind] = {"accepted": len(records), "difficult": len(difficult),
                            "difficult_by_reason": dict(sorted(Counter(x for r in difficult for x in r["reasons"])
                                                               .items()))}
        chosen = rng.choice(len(records), size=min(n_random, len(records)), replace=False) if records else []
        picked = {records[i]["id"] for i in chosen}
        drawn += [(kind, AuditSample.Stratum.RANDOM, records[i]) for i in sorted(chosen)]
        rest = [r for r in difficult if r["id"] not in picked]
        hard = rng.choice(len(rest), size=min(n_difficult, len(rest)), replace=False) if rest else []
        drawn += [(kind, AuditSample.Stratum.DIFFICULT, rest[i]) for i in sorted(hard)]
    if not drawn:
        raise ConflictError(f"the {split} split has no accepted {', '.join(kinds)} records to audit",
                            code="nothing_to_audit", extra={"population": population})
    order = rng.permutation(len(drawn))
    recorded = {kind: _recorded(kind, [r["id"] for k, _, r in drawn if k == kind]) for kind in kinds}
    with transaction.atomic():
        audit = Audit.objects.create(split=split, kinds=kinds, n_random=n_random, n_difficult=n_difficult, seed=seed,
                                     population=population, lease_seconds=lease_seconds, created_by=created_by)
        AuditSample.objects.bulk_create([
            AuditSample(audit=audit, position=position, stratum=stratum, kind=kind,
                        **{f"{kind}_id": record["id"]},
                        recorded=recorded[kind][record["id"]], reasons=record["reasons"],
                        items=record["items"])
            for position, (kind, stratum, record) in zip(np.argsort(order).tolist(), drawn)])
    return audit


# -- auditing --------------------------------------------------------------------------------------
def _require_auditor(user) -> None:
    if not user_has_role(user, Role.AUDITOR):
        raise ApplicationError("only auditors audit records", code="not_an_auditor", status_code=403)


def _voted_items(auditor, audit: Audit) -> set[int]:
    items = {i for row in audit.samples.values_list("items", flat=True) for i in row}
    return set(Vote.objects.filter(annotator=auditor, item_id__in=items).values_list("item_id", flat=True))


def audit_sample_claim_next(*, audit: Audit, auditor) -> AuditSample | None:
    """Claim the next unjudged sample of ``audit`` for ``auditor`` (``None`` when none is left).

    The auditor's unexpired claim comes back first. Otherwise the first sample in the audit's
    order that nobody else holds (an expired claim is free again) and that is not about an item the
    auditor voted on. Candidate rows are locked with ``FOR UPDATE SKIP LOCKED`` where the database
    has it, so two auditors never get the same sample.
    """
    _require_auditor(auditor)
    now = timezone.now()
    mine = audit.samples.filter(claimed_by=auditor, claim_expires_at__gt=now, judgment__isnull=True).first()
    if mine is not None:
        return mine
    excluded = _voted_items(auditor, audit)
    free = Q(judgment__isnull=True) & (Q(claimed_by__isnull=True) | Q(claim_expires_at__lte=now)
                                      | Q(claimed_by=auditor))
    candidates = audit.samples.filter(free).order_by("position").values_list("pk", "items")
    for pk, items in candidates.iterator(chunk_size=200):
        if excluded.intersection(items):
            continue
        with transaction.atomic():
            rows = AuditSample.objects.filter(free, pk=pk)
            if connection.features.has_select_for_update_skip_locked:
                rows = rows.select_for_update(skip_locked=True, of=("self",))
            sample = rows.first()
            if sample is None:
                continue                              # taken or judged meanwhile
            sample.claimed_by = auditor
            sample.claim_expires_at = now + timedelta(seconds=audit.lease_seconds)
            sample.save(update_fields=["claimed_by", "claim_expires_at"])
            return sample
    return None


def audit_judgment_record(*, sample: AuditSample, auditor, verdict: str, error_type: str = "", note: str = "",
                          time_spent_ms: int | None = None) -> AuditJudgment:
    """Record ``auditor``'s verdict on a sample they claimed (an expired claim nobody took since
    still counts). Refused: a sample not claimed by the auditor or judged already (409), a verdict
    or error type that does not fit the sample's kind (400). Locks the sample row while writing."""
    _require_auditor(auditor)
    if verdict not in AUDIT_VERDICTS:
        raise ApplicationError(f"verdict must be one of {list(AUDIT_VERDICTS)}", code="invalid_verdict")
    allowed = AUDIT_ERROR_TYPES[sample.kind]
    if verdict == "error" and error_type not in allowed:
        raise ApplicationError(f"an error on a {sample.kind} needs an error_type, one of {list(allowed)}",
                               code="invalid_error_type")
    if verdict == "correct" and error_type:
        raise ApplicationError("a correct record has no error_type", code="invalid_error_type")
    if time_spent_ms is not None and time_spent_ms < 0:
        raise ApplicationError("time_spent_ms must be >= 0", code="invalid_time")
    with transaction.atomic():
        locked = AuditSample.objects.select_for_update().get(pk=sample.pk)
        if AuditJudgment.objects.filter(sample=locked).exists():
            raise ConflictError(f"audit sample {sample.pk} has its verdict already; verdicts are never changed",
                                code="already_judged")
        if locked.claimed_by_id != auditor.pk:
            raise ConflictError(f"audit sample {sample.pk} is not claimed by you; claim it with next first",
                                code="not_claimed")
        try:
            with transaction.atomic():
                return AuditJudgment.objects.create(sample=locked, auditor=auditor, verdict=verdict,
                                                    error_type=error_type, note=note, time_spent_ms=time_spent_ms)
        except IntegrityError:
            raise ConflictError(f"audit sample {sample.pk} has its verdict already", code="already_judged") from None


def audit_sample_for_auditor(*, audit: Audit, sample_id: int, auditor) -> AuditSample:
    """A sample of ``audit`` the auditor holds (404 otherwise: it is not theirs to see)."""
    _require_auditor(auditor)
    sample = audit.samples.filter(pk=sample_id, claimed_by=auditor).first()
    if sample is None:
        raise NotFoundError(f"you hold no claim on sample {sample_id} of audit {audit.pk}", code="not_found")
    return sample


# -- statistics ------------------------------------------------------------------------------------
def _stratum_stats(judgments: list[tuple[str, str, list[str]]], n_sampled: int) -> dict:
    n = len(judgments)
    errors = sum(1 for verdict, _, _ in judgments if verdict == "error")
    low, high = clopper_pearson_interval(errors, n)
    by_reason: dict[str, dict] = {}
    for verdict, _, reasons in judgments:
        for reason in reasons:
            row = by_reason.setdefault(reason, {"judged": 0, "errors": 0})
            row["judged"] += 1
            row["errors"] += verdict == "error"
    return {"sampled": n_sampled, "judged": n, "errors": errors, "error_rate": errors / n if n else None,
            "ci95": [low, high], "upper95": clopper_pearson_upper(errors, n, CONFIDENCE),
            "errors_by_type": dict(sorted(Counter(t for v, t, _ in judgments if v == "error").items())),
            "by_reason": dict(sorted(by_reason.items()))}


def audit_stats(*, audit: Audit) -> dict:
    """Per kind: the random stratum's error rate with its exact 95% interval and one-sided upper
    bound, the residual errors it implies for the whole accepted population, errors by type; the
    difficult stratum reported apart (also by difficulty reason)."""
    rows = list(audit.samples.order_by("position").values_list("kind", "stratum", "reasons", "judgment__verdict",
                                                                "judgment__error_type"))
    by_kind: dict[str, dict] = {}
    for kind in audit.kinds:
        out = {}
        for stratum in AuditSample.Stratum.values:
            mine = [r for r in rows if r[0] == kind and r[1] == stratum]
            judged = [(r[3], r[4], r[2]) for r in mine if r[3] is not None]
            out[stratum] = _stratum_stats(judged, len(mine))
        accepted = audit.population.get(kind, {}).get("accepted", 0)
        random = out[AuditSample.Stratum.RANDOM]
        random["population"] = accepted
        random["estimated_residual_errors"] = (random["error_rate"] * accepted if random["error_rate"] is not None
                                               else None)
        out[AuditSample.Stratum.DIFFICULT]["population"] = audit.population.get(kind, {}).get("difficult", 0)
        by_kind[kind] = out
    return {"audit": audit.pk, "split": audit.split, "seed": audit.seed, "kinds": list(audit.kinds),
            "samples": len(rows), "judged": sum(1 for r in rows if r[3] is not None), "by_kind": by_kind}
