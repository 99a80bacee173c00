"""Review records: review policy, work items, panel seats (claims with leases) and votes.

A work item is one decision for a panel of distinct annotators: a proposal's usability
(DESIGN 2.3), a duplicate pair's identity (DESIGN 2.4), a description version (2.6), a query's
row of relations against its video's pool (2.8) or a mined cross-video pair (2.9). Annotators claim a seat on an item
(``Assignment``; seats are numbered, so the database itself refuses a panel larger than its size
whatever the concurrency), then cast exactly one ``Vote``. Votes are never edited: corrections
are adjudication votes. The database refuses updates and deletes of votes.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from annotation.curation.labels import BY_STAGE as STAGE_LABELS

# The labels the database accepts in a vote (the ``vote_label_known`` constraint, frozen in the
# migrations). The stages own their labels (``annotation.curation.stages``); a test checks that this
# copy is their union.
ALL_LABELS = ("usable", "unusable", "uncertain", "same", "different", "usable_after_minor_correction", "reviewed",
              "match", "mismatch")


class ReviewPolicy(models.Model):
    """The project's review settings; each work item copies them when it is created."""

    name = models.CharField(max_length=100, unique=True, default="default")
    panel_size = models.PositiveSmallIntegerField(default=3)
    required_votes = models.PositiveSmallIntegerField(default=2)
    lease_seconds = models.PositiveIntegerField(default=600, help_text="how long a claimed item stays reserved")
    open_review_automatically = models.BooleanField(
        default=True, help_text="open usability and duplicate review for every proposal run as it is stored")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(required_votes__gte=1) & Q(required_votes__lte=F("panel_size")),
                                   name="review_policy_required_within_panel"),
            models.CheckConstraint(condition=Q(lease_seconds__gte=10), name="review_policy_lease_min"),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {self.required_votes} of {self.panel_size}"


class WorkItem(models.Model):
    class Stage(models.TextChoices):
        USABILITY = "usability"
        IDENTITY = "identity"
        DESCRIPTION = "description"
        RELATION = "relation"
        PAIR = "pair"

    class State(models.TextChoices):
        OPEN = "open"                # collecting panel votes
        ADJUDICATE = "adjudicate"    # panel complete without a majority
        DECIDED = "decided"          # a decisive label won (see ``decision``)
        UNRESOLVED = "unresolved"    # adjudicated without a majority

    stage = models.CharField(max_length=16, choices=Stage.choices)
    video = models.ForeignKey("trajectories.Video", on_delete=models.PROTECT, related_name="work_items")
    trajectory = models.ForeignKey("trajectories.Trajectory", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="work_items")
    duplicate = models.ForeignKey("trajectories.DuplicateCandidate", null=True, blank=True, on_delete=models.PROTECT,
                                  related_name="work_items")
    description = models.ForeignKey("annotation.DescriptionVersion", null=True, blank=True, on_delete=models.PROTECT,
                                    related_name="work_items")
    query = models.ForeignKey("annotation.Query", null=True, blank=True, on_delete=models.PROTECT,
                              related_name="work_items")
    pair = models.ForeignKey("annotation.CrossPair", null=True, blank=True, on_delete=models.PROTECT,
                             related_name="work_items")
    # Relation and pair items: the model's suggestions shown to reviewers (never deciding), and
    # the candidates sent to an independent second review.
    prelabels = models.JSONField(default=dict, blank=True)
    disputed = models.JSONField(default=list, blank=True)
    panel_size = models.PositiveSmallIntegerField()
    required_votes = models.PositiveSmallIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    decision = models.CharField(max_length=16, blank=True, help_text="the winning label once decided")
    decided_at = models.DateTimeField(null=True, blank=True)
    # Set when a decided identity item is sent back because consolidation found it in a conflict
    # (its `same` would join a confirmed `different` pair): after the next adjudication vote, `decide`
    # over all its votes settles it (no majority: unresolved).
    reopened_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "id"]
        # queue order (video, id) within a stage and state: a claim walks it and stops at the first items it may take
        indexes = [
            models.Index(fields=["stage", "state", "video", "id"], name="work_item_queue_order"),
            # items of one state in queue order (the adjudication queue, the seat board); ordered, so no
            # plan of a claim sorts every open item (the state has no index of its own)
            models.Index(fields=["state", "video", "id"], name="work_item_state_order"),
            # the managers' progress page counts items per stage, video and state: from this index alone,
            # in order, without reading or hashing the rows (frontend.selectors.pipeline_progress)
            models.Index(fields=["stage", "video", "state"], name="work_item_progress"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=(Q(stage="usability", trajectory__isnull=False, duplicate__isnull=True, description__isnull=True,
                             query__isnull=True, pair__isnull=True)
                           | Q(stage="identity", trajectory__isnull=True, duplicate__isnull=False, description__isnull=True,
                               query__isnull=True, pair__isnull=True)
                           | Q(stage="description", trajectory__isnull=False, duplicate__isnull=True,
                               description__isnull=False, query__isnull=True, pair__isnull=True)
                           | Q(stage="relation", trajectory__isnull=True, duplicate__isnull=True, description__isnull=True,
                               query__isnull=False, pair__isnull=True)
                           | Q(stage="pair", trajectory__isnull=True, duplicate__isnull=True, description__isnull=True,
                               query__isnull=True, pair__isnull=False)),
                name="work_item_target_matches_stage"),
            models.UniqueConstraint(fields=["description"], condition=Q(stage="description"),
                                    name="work_item_one_per_description_version"),
            models.UniqueConstraint(fields=["query"], condition=Q(stage="relation"), name="work_item_one_per_query"),
            models.UniqueConstraint(fields=["pair"], condition=Q(stage="pair"), name="work_item_one_per_cross_pair"),
            models.UniqueConstraint(fields=["trajectory"], condition=Q(stage="usability"), name="work_item_one_per_trajectory"),
            models.UniqueConstraint(fields=["duplicate"], condition=Q(stage="identity"), name="work_item_one_per_pair"),
            models.CheckConstraint(condition=Q(required_votes__gte=1) & Q(required_votes__lte=F("panel_size")),
                                   name="work_item_required_within_panel"),
            models.CheckConstraint(condition=Q(state="decided", decision__gt="") | (~Q(state="decided") & Q(decision="")),
                                   name="work_item_decision_iff_decided"),
        ]

    def __str__(self) -> str:
        return f"{self.stage} item {self.pk} ({self.state})"

    @property
    def labels(self) -> tuple[str, ...]:
        """The labels of the item's stage (its declaration in ``annotation.curation.stages``)."""
        return STAGE_LABELS[self.stage].values

    @property
    def decisive(self) -> tuple[str, ...]:
        return STAGE_LABELS[self.stage].decisive


class Assignment(models.Model):
    """A seat on an item's panel, claimed by one annotator under a lease."""

    item = models.ForeignKey(WorkItem, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="assignments")
    seat = models.PositiveSmallIntegerField()
    claimed_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="assignment_once_per_annotator"),
            models.UniqueConstraint(fields=["item", "seat"], name="assignment_seat_unique"),
        ]
        indexes = [
            models.Index(fields=["annotator", "completed_at"], name="assignment_open_by_annotator"),
            # a claim reads the video of the annotator's latest seat first: the top of this index, not a
            # sort of every seat they ever held
            models.Index(fields=["annotator", "-claimed_at", "-id"], name="assignment_latest_by_annotator"),
        ]


class Vote(models.Model):
    """One label by one person on one item; never edited (the database refuses it)."""

    item = models.ForeignKey(WorkItem, on_delete=models.PROTECT, related_name="votes")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="votes")
    label = models.CharField(max_length=32)
    # A description vote ``usable_after_minor_correction`` names the corrected version it approves.
    correction = models.ForeignKey("annotation.DescriptionVersion", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="correcting_votes")
    # Stage-specific ratings, e.g. a relation row's {"faithful": true, "natural": 4}.
    payload = models.JSONField(default=dict, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True, help_text="an adjudicator's reason; optional otherwise")
    time_spent_ms = models.PositiveIntegerField(null=True, blank=True)
    is_adjudication = models.BooleanField(default=False)
    client_request_id = models.UUIDField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["item", "annotator"], name="vote_once_per_annotator"),
            models.UniqueConstraint(fields=["annotator", "client_request_id"], name="vote_request_id_once"),
            models.CheckConstraint(condition=Q(label__in=ALL_LABELS), name="vote_label_known"),
            models.CheckConstraint(condition=Q(is_adjudication=False) | ~Q(comment=""),
                                   name="vote_adjudication_has_reason"),
            models.CheckConstraint(condition=Q(label="usable_after_minor_correction", correction__isnull=False)
                                   | (~Q(label="usable_after_minor_correction") & Q(correction__isnull=True)),
                                   name="vote_correction_iff_minor_correction"),
        ]


class CandidatePool(models.Model):
    """A video's frozen candidate pool (DESIGN 2.5): the retained, consolidated trajectories.

    Built inside one transaction with ``frozen_at`` empty, then frozen; from then on the database
    refuses any change to the pool or its members. A tracking-defect fix makes a new version that
    ``supersedes`` the old one.
    """

    video = models.ForeignKey("trajectories.Video", on_delete=models.PROTECT, related_name="pools")
    version = models.PositiveIntegerField()
    run = models.ForeignKey("trajectories.ProposalRun", on_delete=models.PROTECT, related_name="pools")
    supersedes = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="superseded_by")
    reason = models.TextField(blank=True, help_text="why a new version was made (the tracking defect fixed)")
    n_members = models.PositiveIntegerField(default=0)
    # One row per retained trajectory: source id, group representative, role (representative,
    # fragment, single, or removed when wholly covered), observations kept and removed.
    lineage = models.JSONField(default=list, blank=True)
    content_sha256 = models.CharField(max_length=64, blank=True)
    frozen_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    frozen_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "version"]
        constraints = [
            models.UniqueConstraint(fields=["video", "version"], name="pool_version_unique"),
            models.CheckConstraint(condition=Q(version=1, supersedes__isnull=True) | Q(version__gt=1, supersedes__isnull=False),
                                   name="pool_versions_chain"),
        ]

    def __str__(self) -> str:
        return f"pool of video {self.video_id} v{self.version}"


class PoolMember(models.Model):
    """One trajectory of a pool with its consolidated observations (packed like Trajectory's)."""

    class Role(models.TextChoices):
        REPRESENTATIVE = "representative"  # the best member of a duplicate group, all observations
        FRAGMENT = "fragment"              # a group member's frames the representative lacks
        SINGLE = "single"                  # a retained trajectory without duplicates

    pool = models.ForeignKey(CandidatePool, on_delete=models.PROTECT, related_name="members")
    trajectory = models.ForeignKey("trajectories.Trajectory", on_delete=models.PROTECT, related_name="pool_members")
    role = models.CharField(max_length=16, choices=Role.choices)
    group_representative = models.ForeignKey("trajectories.Trajectory", null=True, blank=True,
                                             on_delete=models.PROTECT, related_name="+")
    n_obs = models.PositiveIntegerField()
    n_removed = models.PositiveIntegerField(default=0, help_text="observations removed as covered by the representative")
    frames = models.BinaryField()   # int32 little-endian [N]
    boxes = models.BinaryField()    # float32 little-endian [N, 4]

    class Meta:
        ordering = ["pool_id", "trajectory_id"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "trajectory"], name="pool_member_once"),
            models.CheckConstraint(condition=Q(n_obs__gte=1), name="pool_member_has_observations"),
        ]


