"""Audit and release records (DESIGN 2.11).

An **audit** re-checks accepted records of one split: a seeded random sample of the accepted
population (its error rate estimates the residual errors of the whole population) and, reported
apart, a sample of difficult cases (disputed, adjudicated, low agreement). Auditors claim samples
one at a time and record a verdict (``correct`` or ``error`` with its type); they are never shown
model suggestions, votes or why a record was sampled. A judgment is never edited or deleted (the
database refuses it).

A **release** is an immutable, versioned folder of a set of splits (manifests, linked records,
construction configuration, audit statistics, a dataset card, Croissant metadata, MOT files and a
SHA-256 manifest of every file). Its row and its file rows are written in one transaction with
``sealed_at`` set; from then on the database refuses any change to them and any new file row.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

AUDIT_KINDS = ("relation", "query", "description")
AUDIT_VERDICTS = ("correct", "error")
# The residual-error types an auditor may record, per kind of record.
AUDIT_ERROR_TYPES: dict[str, tuple[str, ...]] = {
    "relation": ("should_be_match", "should_be_mismatch", "should_be_unknown", "tracking_error", "other"),
    "query": ("predicate_unsupported", "fused_intervals", "ambiguous_target", "unfaithful_wording", "tracking_error",
              "other"),
    "description": ("wrong_fact", "missing_fact", "wrong_appearance", "wrong_motion", "tracking_error", "other"),
}
ALL_ERROR_TYPES = tuple(dict.fromkeys(t for types in AUDIT_ERROR_TYPES.values() for t in types))
DIFFICULTY_REASONS = ("disputed", "adjudicated", "low_agreement")


class Audit(models.Model):
    """One audit of a split: how it was sampled and from what population."""

    split = models.CharField(max_length=8)
    kinds = models.JSONField(help_text="record kinds sampled: relation, query, description")
    n_random = models.PositiveIntegerField(help_text="random accepted records asked for, per kind")
    n_difficult = models.PositiveIntegerField(help_text="difficult cases asked for, per kind")
    seed = models.BigIntegerField()
    # {kind: {"accepted": N, "difficult": M, "difficult_by_reason": {...}}} when it was sampled.
    population = models.JSONField(default=dict)
    lease_seconds = models.PositiveIntegerField(default=900, help_text="how long a claimed sample stays reserved")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(split__in=["train", "dev", "test"]), name="audit_split_known"),
            models.CheckConstraint(condition=Q(lease_seconds__gte=10), name="audit_lease_min"),
        ]

    def __str__(self) -> str:
        return f"audit {self.pk} of {self.split}"


class AuditSample(models.Model):
    """One sampled record. Exactly one of ``relation``, ``query`` and ``description`` is set,
    matching ``kind``; ``recorded`` is the record as accepted when it was sampled (what the auditor
    checks), ``reasons`` why a difficult case is difficult (never shown to auditors)."""

    class Stratum(models.TextChoices):
        RANDOM = "random"          # uniform over the accepted population
        DIFFICULT = "difficult"    # disputed, adjudicated or low agreement

    audit = models.ForeignKey(Audit, on_delete=models.PROTECT, related_name="samples")
    position = models.PositiveIntegerField(help_text="the order auditors are offered the samples in")
    stratum = models.CharField(max_length=16, choices=Stratum.choices)
    kind = models.CharField(max_length=16)
    relation = models.ForeignKey("annotation.Relation", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="+")
    query = models.ForeignKey("annotation.Query", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    description = models.ForeignKey("annotation.Description", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="+")
    recorded = models.JSONField(help_text="the accepted record as it was when sampled")
    reasons = models.JSONField(default=list, blank=True)
    items = models.JSONField(default=list, blank=True, help_text="the work items behind the record: whoever voted "
                                                                 "on one of them does not audit it")
    claimed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    claim_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["audit_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["audit", "position"], name="audit_sample_position_unique"),
            models.CheckConstraint(
                condition=(Q(kind="relation", relation__isnull=False, query__isnull=True, description__isnull=True)
                           | Q(kind="query", relation__isnull=True, query__isnull=False, description__isnull=True)
                           | Q(kind="description", relation__isnull=True, query__isnull=True,
                               description__isnull=False)),
                name="audit_sample_target_matches_kind"),
            models.UniqueConstraint(fields=["audit", "relation"], condition=Q(kind="relation"),
                                    name="audit_sample_relation_once"),
            models.UniqueConstraint(fields=["audit", "query"], condition=Q(kind="query"), name="audit_sample_query_once"),
            models.UniqueConstraint(fields=["audit", "description"], condition=Q(kind="description"),
                                    name="audit_sample_description_once"),
        ]


class AuditJudgment(models.Model):
    """An auditor's verdict on one sample; never edited or deleted (the database refuses it)."""

    sample = models.OneToOneField(AuditSample, on_delete=models.PROTECT, related_name="judgment")
    auditor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="audit_judgments")
    verdict = models.CharField(max_length=16)
    error_type = models.CharField(max_length=32, blank=True)
    note = models.TextField(blank=True)
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["sample_id"]
        constraints = [
            models.CheckConstraint(condition=Q(verdict__in=AUDIT_VERDICTS), name="audit_judgment_verdict_known"),
            models.CheckConstraint(condition=Q(verdict="correct", error_type="")
                                   | Q(verdict="error", error_type__in=ALL_ERROR_TYPES),
                                   name="audit_judgment_error_has_type"),
        ]


class Release(models.Model):
    """A published, immutable release of a set of splits (see the module docstring).

    ``manifest_sha256`` is the SHA-256 of the release's ``SHA256SUMS`` file, which lists the
    SHA-256 of every other file: one hash names the whole content. ``parent_ref`` keeps the
    parent's name, version and hash even where the parent row does not exist (an imported release).
    """

    class Origin(models.TextChoices):
        EXPORTED = "exported"      # built from this instance's records
        IMPORTED = "imported"      # read from a release folder into this instance

    name = models.CharField(max_length=100)
    version = models.CharField(max_length=32)
    description = models.TextField(blank=True)
    license = models.CharField(max_length=200)
    splits = models.JSONField(help_text="the splits released, e.g. [\"dev\", \"test\"]")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    parent_ref = models.JSONField(default=dict, blank=True, help_text="{name, version, manifest_sha256} of the parent")
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.EXPORTED)
    media_included = models.BooleanField(default=False, help_text="the video files are part of the release")
    path = models.CharField(max_length=500)
    manifest_sha256 = models.CharField(max_length=64)
    counts = models.JSONField(default=dict, help_text="rows per table")
    config = models.JSONField(default=dict, help_text="the construction configuration: prompts, checkpoints, "
                                                     "budgets, software versions")
    stats = models.JSONField(default=dict, help_text="audit statistics as published")
    unfinished_audits = models.JSONField(
        null=True, blank=True, help_text="audits of the released splits with samples still unjudged when it was "
                                         "published anyway: [{id, split, n_samples, n_judged}] (null: none)")
    changes = models.JSONField(default=dict, blank=True, help_text="added, removed and changed records against the "
                                                                   "parent, per table")
    sealed_at = models.DateTimeField(null=True, blank=True, help_text="set when written; the database refuses changes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["name", "version"], name="release_version_unique"),
            models.CheckConstraint(condition=Q(manifest_sha256__regex=r"^[0-9a-f]{64}$"),
                                   name="release_manifest_sha256_hex"),
        ]

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


class ReleaseFile(models.Model):
    """One file of a release with its SHA-256 (the same as in the release's SHA256SUMS)."""

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="files")
    path = models.CharField(max_length=500, help_text="relative to the release folder")
    sha256 = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    rows = models.BigIntegerField(null=True, blank=True, help_text="records, for tables")

    class Meta:
        ordering = ["release_id", "path"]
        constraints = [
            models.UniqueConstraint(fields=["release", "path"], name="release_file_once"),
            models.CheckConstraint(condition=Q(sha256__regex=r"^[0-9a-f]{64}$"), name="release_file_sha256_hex"),
        ]


class ReviewerPseudonym(models.Model):
    """The name a person carries in every release: given the first time a release names them
    (a free number drawn at random, ``annotation.releases.services.pseudonyms``) and never changed, so two
    releases of the same records name the same people the same way. Never edited or deleted (the
    database refuses it)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    number = models.PositiveIntegerField(unique=True, help_text="the pseudonym is reviewer-<number, 4 digits>")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["number"]
        constraints = [models.CheckConstraint(condition=Q(number__gte=1), name="reviewer_pseudonym_number_positive")]

    @property
    def pseudonym(self) -> str:
        return pseudonym_of(self.number)


def pseudonym_of(number: int) -> str:
    """``reviewer-0001`` for 1: the one spelling of a pseudonym (four digits at least)."""
    return f"reviewer-{number:04d}"
