"""Reads of audits and releases (DESIGN 2.11).

Blinding lives here: what an auditor is shown of a sample is the record as accepted
(:func:`audit_sample_target`), never the votes, the model's suggestions, the relation's source or
evidence, the sample's stratum or why it was sampled.
"""
from __future__ import annotations

from django.db.models import Count, Q, QuerySet

from annotation.models import Audit, AuditSample, Release
from common.errors import NotFoundError

# The fields of ``AuditSample.recorded`` an auditor sees, per kind (anything else stays hidden).
AUDITOR_FIELDS = {
    "relation": ("query", "text", "predicates", "query_video", "trajectory", "trajectory_video", "label"),
    "query": ("query", "text", "predicates", "video", "pool", "target"),
    "description": ("description", "trajectory", "video", "pool", "content"),
}


def audit_list(*, split: str | None = None) -> QuerySet[Audit]:
    qs = Audit.objects.annotate(n_samples=Count("samples", distinct=True),
                                n_judged=Count("samples", filter=Q(samples__judgment__isnull=False), distinct=True))
    qs = qs.order_by("-created_at", "-id")
    return qs.filter(split=split) if split else qs


def audit_get(*, audit_id: int) -> Audit:
    audit = audit_list().filter(pk=audit_id).first()
    if audit is None:
        raise NotFoundError(f"audit {audit_id} does not exist", code="not_found")
    return audit


def audit_sample_target(sample: AuditSample) -> dict:
    """What the auditor checks: the sample's id and kind and the accepted record's visible fields."""
    recorded = sample.recorded or {}
    return {"sample": sample.pk, "audit": sample.audit_id, "kind": sample.kind,
            "claim_expires_at": sample.claim_expires_at,
            "record": {k: recorded[k] for k in AUDITOR_FIELDS[sample.kind] if k in recorded}}


def release_list(*, name: str | None = None) -> QuerySet[Release]:
    qs = Release.objects.filter(sealed_at__isnull=False).order_by("-created_at", "-id")
    return qs.filter(name=name) if name else qs


def release_get(*, release_id: int) -> Release:
    release = release_list().prefetch_related("files").filter(pk=release_id).first()
    if release is None:
        raise NotFoundError(f"release {release_id} does not exist", code="not_found")
    return release


def audit_sample_get(*, audit: Audit, sample_id: int) -> AuditSample:
    sample = audit.samples.filter(pk=sample_id).first()
    if sample is None:
        raise NotFoundError(f"audit {audit.pk} has no sample {sample_id}", code="not_found")
    return sample


def audit_samples(*, audit: Audit) -> QuerySet[AuditSample]:
    """Every sample of ``audit`` with its stratum, reasons and judgment (for managers)."""
    return audit.samples.select_related("judgment", "judgment__auditor").order_by("position")
