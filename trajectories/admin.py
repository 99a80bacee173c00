from django.contrib import admin

from trajectories.models import (
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    Trajectory,
    Video,
)


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "created_at"]


@admin.register(SplitGroup)
class SplitGroupAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "split", "locked_at"]

    def get_readonly_fields(self, request, obj=None):
        # A locked group's split never changes (the database refuses it too).
        return ["locked_at", "assignment"] + (["split"] if obj is not None and obj.locked_at else [])


@admin.register(Video)
class VideoAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "source", "split_group", "frame_count", "width", "height", "fps", "codec"]
    readonly_fields = [f.name for f in Video._meta.fields]

    def has_delete_permission(self, request, obj=None):
        return False  # a video's media and records are removed by a service, never row by row


@admin.register(ProposalConfig)
class ProposalConfigAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "version", "backend", "config_hash"]
    readonly_fields = [f.name for f in ProposalConfig._meta.fields]


@admin.register(ProposalRun)
class ProposalRunAdmin(admin.ModelAdmin):
    list_display = ["id", "video", "config", "status", "trajectory_count", "duplicate_count", "created_at"]
    readonly_fields = [f.name for f in ProposalRun._meta.fields]


@admin.register(Trajectory)
class TrajectoryAdmin(admin.ModelAdmin):
    list_display = ["id", "video", "run", "track_id", "category", "n_obs", "first_frame", "last_frame"]
    exclude = ["frames", "boxes", "scores", "appearance"]
    readonly_fields = ["video", "run", "track_id", "category", "n_obs", "first_frame", "last_frame",
                       "temporal_coverage", "longest_run", "median_area", "abrupt_changes", "mean_score"]


@admin.register(DuplicateCandidate)
class DuplicateCandidateAdmin(admin.ModelAdmin):
    list_display = ["id", "video", "trajectory_a", "trajectory_b", "reasons", "mean_iou", "appearance_similarity"]
