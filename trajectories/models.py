"""Sources, split groups, videos, proposal runs, trajectories and duplicate candidates.

A trajectory stores its observations compactly: the frame indices, boxes and scores are packed
little-endian arrays in one row (``frames`` int32 [N], ``boxes`` float32 [N, 4] xyxy in original
pixels, ``scores`` float32 [N]), not one row per box. The database checks that the packed
lengths agree with ``n_obs`` and that the frame span can hold them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import Exact

from common.models import QueuedRun, RunStatus
from common.storage import store
from models.media.video import content_sha256


class Split(models.TextChoices):
    TRAIN = "train"
    DEV = "dev"
    TEST = "test"


class Source(models.Model):
    """A source recording: the camera/session the clips come from."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class SplitAssignment(models.Model):
    """One run of ``splits_assign``: its seed, ratios and outcome, kept for reproducibility."""

    seed = models.BigIntegerField()
    ratios = models.JSONField()
    result = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)


class SplitGroup(models.Model):
    """Clips that must share a split (duplicates, related clips, derived records)."""

    name = models.CharField(max_length=200, unique=True)
    split = models.CharField(max_length=8, choices=Split.choices, blank=True, default="")
    assignment = models.ForeignKey(SplitAssignment, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="groups")
    # Set when the first proposal run of any of the group's videos is created; from then on the
    # split never changes.
    locked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(split__in=["", "train", "dev", "test"]), name="split_group_split_valid"),
            models.CheckConstraint(condition=Q(locked_at__isnull=True) | ~Q(split=""), name="split_group_locked_has_split"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.split or 'unassigned'})"


class Video(models.Model):
    class Kind(models.TextChoices):
        FILE = "file"
        FRAMES = "frames"

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="videos")
    split_group = models.ForeignKey(SplitGroup, on_delete=models.PROTECT, related_name="videos")
    name = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    path = models.CharField(max_length=500, help_text="relative to MEDIA_ROOT")
    content_sha256 = models.CharField(max_length=64, unique=True)
    size_bytes = models.BigIntegerField()
    fps = models.FloatField()
    frame_count = models.PositiveIntegerField()
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    duration_s = models.FloatField()
    codec = models.CharField(max_length=32)
    seekable = models.BooleanField(default=True, help_text="seeking was checked to land on exact frames")
    # Free-form facts about the media, e.g. {"rendered": true, "ground_truth": "ground_truth/<sha>.gt.json"}
    # for videos the platform rendered itself (the path is relative to MEDIA_ROOT).
    metadata = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(frame_count__gt=0) & Q(width__gt=0) & Q(height__gt=0) & Q(fps__gt=0),
                                   name="video_geometry_positive"),
            models.CheckConstraint(condition=Q(content_sha256__regex=r"^[0-9a-f]{64}$"), name="video_sha256_hex"),
        ]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def split(self) -> str:
        return self.split_group.split

    @property
    def abspath(self) -> Path:
        """A local file (or frame folder) OpenCV can open: ``path`` is a storage key
        (``common.storage``), the file itself under ``MEDIA_ROOT`` on local disk, or the object
        fetched once into this host's read-through cache and checked against ``content_sha256``."""
        return store().local_path(self.path, sha256=self.content_sha256, verify=content_sha256)


class ProposalConfig(models.Model):
    """A versioned, reproducible tracker configuration (DESIGN 2.2).

    ``config_hash`` covers everything that changes the output (backend, checkpoint SHA-256,
    categories, anchor policy, detector and tracker settings, software versions), so the same
    configuration is stored once and re-running it on a video creates nothing new.
    """

    class Backend(models.TextChoices):
        HOG_BYTETRACK = "hog-bytetrack"
        DNN_BYTETRACK = "dnn-bytetrack"
        SAM2 = "sam2"
        SAM3 = "sam3"
        IMPORTED = "imported"   # tracks read from a file (a TrackImport), not run here

    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    backend = models.CharField(max_length=32, choices=Backend.choices)
    checkpoint_path = models.CharField(max_length=500, blank=True)
    checkpoint_sha256 = models.CharField(max_length=64, blank=True)
    model_config_path = models.CharField(max_length=500, blank=True)
    categories = models.JSONField(help_text="category-prompt inventory, e.g. ['person']")
    anchor_policy = models.JSONField(default=dict)
    detector_settings = models.JSONField(default=dict)
    tracker_settings = models.JSONField(default=dict)
    software = models.JSONField(default=dict, help_text="versions of the packages that produce proposals")
    config_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="proposal_config_name_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version} ({self.backend})"


class ProposalRun(QueuedRun):
    """A tracker configuration run on one video (a :class:`common.models.QueuedRun`)."""

    Status = RunStatus
    task_name = "trajectories.tasks.proposal_run_task"
    job_kind = "proposal_run"

    class Kind(models.TextChoices):
        TRACKED = "tracked"     # a tracker ran on the video
        IMPORTED = "imported"   # existing tracks or tubes were read from a file (its TrackImport)

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TRACKED)
    video = models.ForeignKey(Video, on_delete=models.PROTECT, related_name="proposal_runs")
    config = models.ForeignKey(ProposalConfig, on_delete=models.PROTECT, related_name="runs")
    trajectory_count = models.PositiveIntegerField(default=0)
    duplicate_count = models.PositiveIntegerField(default=0)
    stats = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["video", "config"], name="proposal_run_once_per_config")]

    @property
    def source_verified(self) -> bool:
        """An imported run whose source vouches for its tracks: no usability or duplicate review."""
        record = getattr(self, "track_import", None)
        return record is not None and record.review == TrackImport.Review.SOURCE_VERIFIED

    @property
    def annotated_tubes(self) -> bool:
        """An imported run of annotated tubes (D.1): supervision to match proposals against, not
        candidates to review."""
        record = getattr(self, "track_import", None)
        return record is not None and record.purpose == TrackImport.Purpose.TUBES


class TrackImport(models.Model):
    """Where an imported run's tracks came from: the file, its format and SHA-256, and how they are
    reviewed (``reviewed``: the usual usability and duplicate review; ``source_verified``: retained
    as the source gives them, with the reason stored)."""

    class Format(models.TextChoices):
        MOT = "mot"
        JSON = "json"
        CSV = "csv"
        CVAT = "cvat", "CVAT for video 1.1"
        LABELSTUDIO = "labelstudio", "Label Studio video"

    class Review(models.TextChoices):
        REVIEWED = "reviewed"
        SOURCE_VERIFIED = "source_verified"

    class Purpose(models.TextChoices):
        PROPOSALS = "proposals"   # candidate trajectories, reviewed like a tracker's
        TUBES = "tubes"           # annotated tubes (D.1) that proposals are matched against

    run = models.OneToOneField(ProposalRun, on_delete=models.CASCADE, related_name="track_import")
    format = models.CharField(max_length=16, choices=Format.choices)
    purpose = models.CharField(max_length=16, choices=Purpose.choices, default=Purpose.PROPOSALS)
    source = models.CharField(max_length=500, help_text="where the file came from (a sequence, data set or tool)")
    file_name = models.CharField(max_length=255)
    file_sha256 = models.CharField(max_length=64)
    review = models.CharField(max_length=16, choices=Review.choices, default=Review.REVIEWED)
    review_reason = models.TextField(blank=True, help_text="why the source's tracks need no review")
    options = models.JSONField(default=dict, blank=True, help_text="how the file was read (gt, frame_base, clip)")
    counts = models.JSONField(default=dict, blank=True, help_text="rows read, skipped and clipped")
    captions = models.JSONField(default=dict, blank=True, help_text="track id → the source's caption")
    fit_findings = models.JSONField(default=list, blank=True,
                                    help_text="what the fit check found and the importer confirmed (models.tracks_io.fit)")
    # The file itself, from the request that queued the import to the job that stores its tracks
    # (emptied once they are stored; a failed import keeps it for a retry).
    data = models.BinaryField(blank=True, default=b"", editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(condition=Q(file_sha256__regex=r"^[0-9a-f]{64}$"), name="track_import_sha256_hex"),
            models.CheckConstraint(condition=Q(review="reviewed") | ~Q(review_reason=""),
                                   name="track_import_source_verified_has_reason"),
            models.CheckConstraint(condition=Q(format__in=["mot", "json", "csv", "cvat", "labelstudio"]),
                                   name="track_import_format_known"),
        ]


class Trajectory(models.Model):
    run = models.ForeignKey(ProposalRun, on_delete=models.CASCADE, related_name="trajectories")
    video = models.ForeignKey(Video, on_delete=models.PROTECT, related_name="trajectories")
    track_id = models.PositiveIntegerField(help_text="identity within its run")
    category = models.CharField(max_length=64)
    n_obs = models.PositiveIntegerField()
    first_frame = models.PositiveIntegerField()
    last_frame = models.PositiveIntegerField()
    frames = models.BinaryField()   # int32 little-endian [N], strictly increasing
    boxes = models.BinaryField()    # float32 little-endian [N, 4] xyxy, original pixels
    scores = models.BinaryField()   # float32 little-endian [N]
    appearance = models.BinaryField(blank=True, default=b"")  # float32 descriptor, may be empty
    # Quality signals (DESIGN 2.2): they assist review and never auto-reject.
    temporal_coverage = models.FloatField(help_text="observations / frames in the span")
    longest_run = models.PositiveIntegerField()
    median_area = models.FloatField()
    abrupt_changes = models.PositiveIntegerField()
    mean_score = models.FloatField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "run_id", "track_id"]
        indexes = [models.Index(fields=["video", "run"], name="trajectory_video_run")]
        constraints = [
            models.UniqueConstraint(fields=["run", "track_id"], name="trajectory_track_unique_in_run"),
            models.CheckConstraint(condition=Q(n_obs__gte=1), name="trajectory_has_observations"),
            models.CheckConstraint(condition=Q(first_frame__lte=F("last_frame")), name="trajectory_span_ordered"),
            models.CheckConstraint(condition=Q(n_obs__lte=F("last_frame") - F("first_frame") + 1),
                                   name="trajectory_span_holds_observations"),
            models.CheckConstraint(condition=Q(temporal_coverage__gt=0) & Q(temporal_coverage__lte=1),
                                   name="trajectory_coverage_unit"),
            models.CheckConstraint(condition=Exact(Length("frames"), F("n_obs") * 4), name="trajectory_frames_packed"),
            models.CheckConstraint(condition=Exact(Length("boxes"), F("n_obs") * 16), name="trajectory_boxes_packed"),
            models.CheckConstraint(condition=Exact(Length("scores"), F("n_obs") * 4), name="trajectory_scores_packed"),
        ]

    # -- unpacked views ------------------------------------------------------------------------
    def frames_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.frames), dtype="<i4")

    def boxes_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.boxes), dtype="<f4").reshape(-1, 4)

    def scores_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.scores), dtype="<f4")

    def appearance_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.appearance), dtype="<f4")

    def box_at(self, frame_index: int) -> np.ndarray | None:
        frames = self.frames_array()
        i = int(np.searchsorted(frames, frame_index))
        if i < len(frames) and frames[i] == frame_index:
            return self.boxes_array()[i]
        return None


class DuplicateCandidate(models.Model):
    """A pair of trajectories of one video proposed for identity review, with its signals."""

    class Origin(models.TextChoices):
        AUTOMATIC = "automatic"
        MANUAL = "manual"

    video = models.ForeignKey(Video, on_delete=models.PROTECT, related_name="duplicate_candidates")
    trajectory_a = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="+")
    trajectory_b = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="+")
    reasons = models.JSONField(help_text="which signals proposed the pair: overlap, adjacent, appearance")
    mean_iou = models.FloatField(null=True, blank=True)
    covisible_frames = models.PositiveIntegerField(default=0)
    gap_frames = models.IntegerField(null=True, blank=True)
    endpoint_iou = models.FloatField(null=True, blank=True)
    appearance_similarity = models.FloatField(null=True, blank=True)
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.AUTOMATIC)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory_a", "trajectory_b"], name="duplicate_pair_unique"),
            models.CheckConstraint(condition=Q(trajectory_a__lt=F("trajectory_b")), name="duplicate_pair_ordered"),
        ]


class TubeMatchReport(models.Model):
    """Proposals of one run matched against one video's annotated tubes (seed D.1): per tube
    ``matched`` / ``ambiguous`` / ``unmatched``, its identity-checked raw positives and low-overlap
    negative candidates, with the overlap figures of every pair (``models.curation.tube_matching``)."""

    video = models.ForeignKey(Video, on_delete=models.PROTECT, related_name="tube_match_reports")
    tubes_run = models.ForeignKey(ProposalRun, on_delete=models.CASCADE, related_name="tube_reports_as_tubes")
    proposals_run = models.ForeignKey(ProposalRun, on_delete=models.CASCADE, related_name="tube_reports")
    config = models.JSONField(help_text="tau, min_coverage, min_mean_iou, tau_safe")
    counts = models.JSONField(help_text="tubes matched, ambiguous and unmatched")
    report = models.JSONField(help_text="per tube outcome and per pair overlap")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["video_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["tubes_run", "proposals_run"], name="tube_match_report_once_per_runs"),
            models.CheckConstraint(condition=~Q(tubes_run=F("proposals_run")), name="tube_match_report_two_runs"),
        ]


class CleanTruthTube(models.Model):
    """An annotated tube kept as the clean ground truth beside a proposal it matched (seed D.1).

    The tube's own observations (its trajectory in the tubes run, limited to the annotated event)
    are the clean record; the proposal keeps its full tracker extent. One row per identity-checked
    raw positive of a :class:`TubeMatchReport`, with the pair's overlap figures; the rows follow
    their report (replaced with it when the matching is computed again), and neither trajectory is
    ever changed by them.
    """

    report = models.ForeignKey(TubeMatchReport, on_delete=models.CASCADE, related_name="clean_truth")
    video = models.ForeignKey(Video, on_delete=models.PROTECT, related_name="+")
    tube = models.ForeignKey(Trajectory, on_delete=models.PROTECT, related_name="clean_truth_links",
                             help_text="the annotated tube (a trajectory of the report's tubes run)")
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="clean_truth",
                                   help_text="the matched proposal (an identity-checked raw positive)")
    caption = models.TextField(blank=True, help_text="the source's caption of the tube, if any")
    max_iou = models.FloatField(help_text="maxIoU_b(r) over the tube's annotated frames")
    coverage = models.FloatField(help_text="C_tau(r): share of annotated frames with IoU >= tau")
    mean_iou = models.FloatField(help_text="meanIoU_b(r) over the tube's annotated frames")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["report_id", "tube_id", "trajectory_id"]
        constraints = [
            models.UniqueConstraint(fields=["report", "tube", "trajectory"], name="clean_truth_once_per_pair"),
            models.CheckConstraint(condition=~Q(tube=F("trajectory")), name="clean_truth_two_trajectories"),
            models.CheckConstraint(condition=Q(coverage__gte=0) & Q(coverage__lte=1) & Q(mean_iou__gte=0)
                                   & Q(mean_iou__lte=1) & Q(max_iou__gt=0) & Q(max_iou__lte=1),
                                   name="clean_truth_overlap_in_range"),
        ]
