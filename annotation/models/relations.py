"""Relation records (DESIGN 2.6-2.10): verified descriptions and facts, queries, within- and
cross-video relations with ``⊥``, mining, the pseudo-label gate and relation snapshots.

Models propose (a describer run, a generation run, a mining run); people decide through review
work items (``annotation.models.curation.WorkItem``); every record keeps who or what made it.
Labels are integers: ``1`` match, ``0`` mismatch, ``-1`` unknown (``⊥``).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from common.models import QueuedRun

RELATION_LABEL_VALUES = (1, 0, -1)


class ModelRun(QueuedRun):
    """What a model-in-the-loop run used: backend settings, prompt, budget (shared fields); its
    lifecycle is the :class:`common.models.QueuedRun` one."""

    backend = models.JSONField(help_text="backend name and settings (model path or endpoint, never secrets)")
    prompt_version = models.CharField(max_length=64)
    prompt_sha256 = models.CharField(max_length=64)
    budget = models.JSONField(default=dict, help_text="sampling and proposal budget as used")
    stats = models.JSONField(default=dict, blank=True)

    class Meta:
        abstract = True


class DescriptionRun(ModelRun):
    """A describer (VLM) run over frozen pools: one proposal per pool member (DESIGN 2.6)."""

    task_name = "annotation.tasks.description_run_task"
    job_kind = "description_run"

    pools = models.ManyToManyField("annotation.CandidatePool", related_name="description_runs")


class Description(models.Model):
    """The description of one pool member: the model's proposal and where its review stands."""

    class Status(models.TextChoices):
        FAILED = "failed"            # the describer gave no valid output within its budget
        IN_REVIEW = "in_review"
        APPROVED = "approved"        # ``approved_version`` holds D_r^H
        REJECTED = "rejected"
        UNRESOLVED = "unresolved"    # adjudicated without approval: every field stays unknown

    run = models.ForeignKey(DescriptionRun, on_delete=models.PROTECT, related_name="descriptions")
    pool = models.ForeignKey("annotation.CandidatePool", on_delete=models.PROTECT, related_name="descriptions")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="descriptions")
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    failure = models.TextField(blank=True)
    raw_outputs = models.JSONField(default=list, blank=True, help_text="the model's raw text of every attempt")
    attempts = models.PositiveSmallIntegerField(default=0)
    inputs = models.JSONField(default=dict, blank=True, help_text="crop and marked-frame indices shown to the model")
    approved_version = models.ForeignKey("annotation.DescriptionVersion", null=True, blank=True,
                                         on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pool_id", "trajectory_id"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "trajectory"], name="description_once_per_pool_member"),
            models.CheckConstraint(condition=~Q(status="approved") | Q(approved_version__isnull=False),
                                   name="description_approved_has_version"),
        ]


class DescriptionVersion(models.Model):
    """One version of a description's content: the model's, a reviewer's correction, or the
    consolidation of several corrections. Approvals count on exactly one version (its hash)."""

    class Origin(models.TextChoices):
        MODEL = "model"
        CORRECTION = "correction"
        CONSOLIDATED = "consolidated"

    description = models.ForeignKey(Description, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    origin = models.CharField(max_length=16, choices=Origin.choices)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    content = models.JSONField(help_text="models.facts.Description as JSON: appearance, motion, facts")
    content_sha256 = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["description_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["description", "number"], name="description_version_number_unique"),
            models.UniqueConstraint(fields=["description", "content_sha256"], name="description_version_content_unique"),
        ]


class GenerationRun(ModelRun):
    """A query-writer (LLM) run over approved descriptions (DESIGN 2.7)."""

    task_name = "annotation.tasks.generation_run_task"
    job_kind = "generation_run"

    pools = models.ManyToManyField("annotation.CandidatePool", related_name="generation_runs")


class Query(models.Model):
    """A natural query and its required predicates, written from one trajectory's approved facts.

    A revision is a new row whose ``parent`` is the previous wording; the previous one becomes
    ``superseded``. A new pool version marks the old pool's queries ``needs_reverification``.
    """

    class Status(models.TextChoices):
        REJECTED = "rejected"                  # failed a check: ``rejection_reason`` says which
        IN_REVIEW = "in_review"                # its relation row is being verified
        ACCEPTED = "accepted"                  # admitted to the benchmark (DESIGN 2.8)
        SUPERSEDED = "superseded"              # replaced by a revision
        NEEDS_REVERIFICATION = "needs_reverification"  # its pool was replaced by a new version

    pool = models.ForeignKey("annotation.CandidatePool", on_delete=models.PROTECT, related_name="queries")
    video = models.ForeignKey("trajectories.Video", on_delete=models.PROTECT, related_name="queries")
    target = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="queries_written")
    source_version = models.ForeignKey(DescriptionVersion, on_delete=models.PROTECT, related_name="queries",
                                       help_text="the approved description it was written from")
    run = models.ForeignKey(GenerationRun, null=True, blank=True, on_delete=models.PROTECT, related_name="queries")
    text = models.TextField()
    predicates = models.JSONField(help_text="[{name, value, fact_ids}], each citing approved facts")
    revision = models.PositiveIntegerField(default=1)
    parent = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="revised_by")
    status = models.CharField(max_length=24, choices=Status.choices, db_index=True)
    rejection_reason = models.TextField(blank=True)
    raw_output = models.TextField(blank=True)
    ratings = models.JSONField(default=dict, blank=True, help_text="faithfulness and naturalness from the review")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "id"]
        verbose_name_plural = "queries"
        constraints = [
            models.CheckConstraint(condition=~Q(status="rejected") | ~Q(rejection_reason=""),
                                   name="query_rejection_has_reason"),
            models.CheckConstraint(condition=Q(revision=1, parent__isnull=True) | Q(revision__gt=1, parent__isnull=False),
                                   name="query_revisions_chain"),
        ]


class CrossPair(models.Model):
    """A mined cross-video (query, trajectory) pair; mined twice, it is one row with both
    provenances and is reviewed once (DESIGN 2.9)."""

    class Review(models.TextChoices):
        QUEUED = "queued"              # sent to pair review
        NOT_SAMPLED = "not_sampled"    # an easy negative outside the review sample: stays ⊥
        DONE = "done"

    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="cross_pairs")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="cross_pairs")
    stratum = models.CharField(max_length=24, help_text="its highest-priority stratum (models.curation.mining.STRATA_PRIORITY)")
    strata = models.JSONField(default=list)
    provenance = models.JSONField(default=list, help_text="[{run, stratum, similarity, encoder}] per mining")
    similarity = models.FloatField()
    proposal = models.JSONField(default=dict, blank=True,
                                help_text="the LLM's proposal: label, decisive predicates, evidence fact ids")
    review = models.CharField(max_length=16, choices=Review.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["query_id", "trajectory_id"]
        constraints = [models.UniqueConstraint(fields=["query", "trajectory"], name="cross_pair_once")]


class MiningRun(QueuedRun):
    task_name = "annotation.tasks.mining_run_task"
    job_kind = "mining_run"

    split = models.CharField(max_length=8)
    config = models.JSONField(help_text="budgets, seed, encoders, thresholds and strata as used")
    log = models.JSONField(default=dict, blank=True)


class Relation(models.Model):
    """The current verified label of one (query, trajectory) pair, within or across videos."""

    class Source(models.TextChoices):
        HUMAN = "human"                # one reviewer, undisputed
        SECOND_REVIEW = "second_review"  # settled by an independent second review
        ADJUDICATED = "adjudicated"    # a dev/test pair settled by an adjudicator
        POOL = "pool"                  # ⊥ recorded because review left it unresolved
        PSEUDO = "pseudo"              # an automatic easy negative: training only

    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="relations")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="relations")
    label = models.SmallIntegerField()
    source = models.CharField(max_length=16, choices=Source.choices)
    stratum = models.CharField(max_length=24, default="within")
    pseudo = models.BooleanField(default=False)
    evidence = models.JSONField(default=dict, blank=True)
    item = models.ForeignKey("annotation.WorkItem", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    rule = models.ForeignKey("annotation.PseudoLabelRule", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="relations")
    decided_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["query_id", "trajectory_id"]
        constraints = [
            models.UniqueConstraint(fields=["query", "trajectory"], name="relation_once"),
            models.CheckConstraint(condition=Q(label__in=RELATION_LABEL_VALUES), name="relation_label_known"),
            models.CheckConstraint(condition=Q(pseudo=False) | Q(source="pseudo", label=0, rule__isnull=False),
                                   name="relation_pseudo_is_tagged_negative"),
        ]


class RelationJudgment(models.Model):
    """One reviewer's label of one candidate in a relation row (part of their vote; immutable)."""

    vote = models.ForeignKey("annotation.Vote", on_delete=models.PROTECT, related_name="judgments")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="+")
    label = models.SmallIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["vote", "trajectory"], name="judgment_once_per_vote"),
            models.CheckConstraint(condition=Q(label__in=RELATION_LABEL_VALUES), name="judgment_label_known"),
        ]


class PseudoLabelRule(models.Model):
    """A rule for automatic easy negatives, frozen before calibration; the database refuses any
    change to the rule once it is calibrated (DESIGN 2.9)."""

    name = models.CharField(max_length=100, unique=True)
    rule = models.JSONField()
    rule_sha256 = models.CharField(max_length=64)
    declared_bound = models.FloatField(help_text="the largest acceptable error rate, declared in advance")
    calibration = models.JSONField(default=dict, blank=True)
    calibrated_at = models.DateTimeField(null=True, blank=True)
    accepted = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(declared_bound__gt=0) & Q(declared_bound__lt=1),
                                   name="pseudo_rule_bound_in_unit_interval"),
            models.CheckConstraint(condition=Q(accepted=False) | Q(calibrated_at__isnull=False),
                                   name="pseudo_rule_accepted_after_calibration"),
        ]


class RelationSnapshot(models.Model):
    """An immutable, hashed copy of a split's verified relations with its pool versions.

    The rows (this one and its ``SnapshotRelation`` rows) are written in one transaction and then
    sealed (``sealed_at``); the database refuses any change to a sealed snapshot or its relations; the folder at ``path`` holds the same content in the
    ``models.training.snapshot`` format and is checked against ``content_sha256`` when loaded.
    """

    split = models.CharField(max_length=8)
    name = models.CharField(max_length=100, blank=True)
    content_sha256 = models.CharField(max_length=64)
    path = models.CharField(max_length=500)
    pool_versions = models.JSONField(help_text="{video id: pool version}")
    counts = models.JSONField(help_text="by label, source and stratum; zero-negative row and column rates")
    complete = models.BooleanField(help_text="every relation the Traj2T and OCVR galleries need is binary")
    sealed_at = models.DateTimeField(null=True, blank=True, help_text="set when written; the database refuses changes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]


class SnapshotRelation(models.Model):
    snapshot = models.ForeignKey(RelationSnapshot, on_delete=models.PROTECT, related_name="relations")
    query = models.ForeignKey(Query, on_delete=models.PROTECT, related_name="+")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="+")
    label = models.SmallIntegerField()
    source = models.CharField(max_length=16)
    stratum = models.CharField(max_length=24)
    pseudo = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["snapshot", "query", "trajectory"], name="snapshot_relation_once"),
            models.CheckConstraint(condition=Q(label__in=RELATION_LABEL_VALUES), name="snapshot_relation_label_known"),
        ]
