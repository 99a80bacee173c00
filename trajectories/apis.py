"""REST API of the trajectories app: validate input, call one service or selector, serialise."""
from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from common.jobs.apis import JobSummaryOutputSerializer
from common.pagination import Page, paginate
from common.params import flag_field, int_param, seed_field, text_field
from common.registry import locations_hidden, refuse_locations
from common.roles import IsManager, IsStaffMember, ManagerPathsSerializer
from common.schema import ERROR, PlainChoiceField
from models.backends.tracking import BACKENDS
from models.backends.tracking.sam3_tracker import MAX_CONCEPT_CHARS
from trajectories import selectors
from trajectories.models import (
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    Trajectory,
    Video,
)
from trajectories.services.duplicates import duplicate_candidate_create_manual
from trajectories.services.ingestion import video_upload_import
from trajectories.services.proposals import proposal_config_create, proposal_run_create
from trajectories.services.splits import split_group_set_split, splits_assign

JPEG = {(200, "image/jpeg"): OpenApiResponse(OpenApiTypes.BINARY, description="JPEG image"),
        422: OpenApiResponse(ERROR, description="the video file cannot be decoded at that frame (decode_failed)")}
MAX_SIZE_PARAM = OpenApiParameter("max_size", int, description="longest side in pixels (downscaled, never upscaled)")


def _jpeg(data: bytes) -> HttpResponse:
    response = HttpResponse(data, content_type="image/jpeg")
    response["Cache-Control"] = "private, max-age=86400"  # frames of a stored video never change
    return response


# -- sources, split groups, videos ---------------------------------------------------------------
class SourceOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Source
        fields = ["id", "name", "description", "created_at"]


class SplitGroupOutputSerializer(serializers.ModelSerializer):
    n_videos = serializers.SerializerMethodField()

    class Meta:
        model = SplitGroup
        fields = ["id", "name", "split", "locked_at", "assignment", "n_videos"]

    def get_n_videos(self, obj) -> int:
        n = getattr(obj, "n_videos", None)
        return obj.videos.count() if n is None else n


class VideoOutputSerializer(serializers.ModelSerializer):
    source = serializers.CharField(source="source.name")
    split_group = serializers.CharField(source="split_group.name")
    split = serializers.CharField(source="split_group.split")

    class Meta:
        model = Video
        fields = ["id", "name", "kind", "source", "split_group", "split", "content_sha256", "size_bytes", "fps",
                  "frame_count", "width", "height", "duration_s", "codec", "created_at"]


class SourceListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    @extend_schema(responses=SourceOutputSerializer(many=True), summary="List source recordings")
    def get(self, request):
        return paginate(selectors.source_list(), SourceOutputSerializer, request, self)


class SplitGroupListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    @extend_schema(responses=SplitGroupOutputSerializer(many=True), summary="List split groups")
    def get(self, request):
        return paginate(selectors.split_group_list(), SplitGroupOutputSerializer, request, self)


class SplitGroupDetailApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        split = serializers.ChoiceField(choices=["train", "dev", "test"])

    @extend_schema(request=InputSerializer, responses={200: SplitGroupOutputSerializer, 409: OpenApiTypes.OBJECT},
                   summary="Set a split group's split (refused with 409 once locked by a proposal run)")
    def patch(self, request, group_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        group = split_group_set_split(group=get_object_or_404(SplitGroup, pk=group_id), split=data.validated_data["split"])
        return Response(SplitGroupOutputSerializer(group).data)


class SplitAssignApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        seed = seed_field()
        ratios = serializers.DictField(child=serializers.FloatField(min_value=0),
                                       default={"train": 0.7, "dev": 0.15, "test": 0.15})
        reassign = flag_field(default=False, help_text="also re-draw assigned groups that are not locked")

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        seed = serializers.IntegerField(min_value=-(2**63), max_value=2**63 - 1)
        ratios = serializers.DictField()
        result = serializers.DictField(help_text="split group name -> split, for the groups assigned now")

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer},
                   summary="Assign splits to split groups (seeded)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        assignment = splits_assign(created_by=request.user, **data.validated_data)
        return Response(self.OutputSerializer(assignment).data, status=status.HTTP_201_CREATED)


class VideoListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page
    parser_classes = [MultiPartParser, FormParser]

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField()
        source = serializers.CharField(max_length=200)
        split_group = serializers.CharField(max_length=200, required=False, help_text="defaults to the source")
        name = serializers.CharField(max_length=255, required=False)
        fps = serializers.FloatField(required=False, min_value=0.01, help_text="override the container's frame rate")

    class UploadOutputSerializer(serializers.Serializer):
        created = serializers.BooleanField(help_text="false: the same content was already imported")
        video = VideoOutputSerializer()

    class QueuedOutputSerializer(serializers.Serializer):
        job = JobSummaryOutputSerializer(help_text="the import job; its result names the video")

    @extend_schema(parameters=[OpenApiParameter("split", str), OpenApiParameter("source", str)],
                   responses=VideoOutputSerializer(many=True), summary="List videos")
    def get(self, request):
        qs = selectors.video_list(split=request.query_params.get("split"), source=request.query_params.get("source"))
        return paginate(qs, VideoOutputSerializer, request, self)

    @extend_schema(request={"multipart/form-data": InputSerializer},
                   responses={201: UploadOutputSerializer, 200: UploadOutputSerializer, 202: QueuedOutputSerializer,
                              400: OpenApiTypes.OBJECT, 413: OpenApiTypes.OBJECT},
                   summary="Upload a video (streamed to disk; corrupt or unsupported files are refused). "
                           "Large files are imported by a worker: 202 with the job to follow.")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        upload = video_upload_import(uploaded_file=data.validated_data.pop("file"), created_by=request.user,
                                     **data.validated_data)
        if upload.job is not None:
            return Response(self.QueuedOutputSerializer({"job": upload.job}).data, status=status.HTTP_202_ACCEPTED)
        result = upload.result
        body = self.UploadOutputSerializer({"created": result.created, "video": result.video}).data
        return Response(body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


class VideoDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=VideoOutputSerializer, summary="One video")
    def get(self, request, video_id: int):
        return Response(VideoOutputSerializer(get_object_or_404(selectors.video_list(), pk=video_id)).data)


class VideoFrameApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(parameters=[MAX_SIZE_PARAM], responses=JPEG, summary="One frame as JPEG (random access)")
    def get(self, request, video_id: int, index: int):
        video = get_object_or_404(Video, pk=video_id)
        return _jpeg(selectors.video_frame_jpeg(video=video, index=index, max_size=int_param(request, "max_size")))


# -- proposal configs and runs ---------------------------------------------------------------------
CONCEPT_HELP = ("the query-conditioned SAM 3 prompt (seed C.1), e.g. 'person with a red umbrella'; "
                "empty: the category prompts (query-independent proposals)")


class ProposalConfigOutputSerializer(ManagerPathsSerializer):
    manager_only = ("checkpoint_path", "model_config_path")
    concept = serializers.CharField(source="tracker_settings.concept", default="", read_only=True,
                                    help_text=CONCEPT_HELP)

    def hidden_from_others(self, data: dict) -> dict:
        """Besides the files' paths, any path a registered tracker's settings brought (SAM 3's
        ``bpe_path``, a detector's model files)."""
        data = super().hidden_from_others(data)
        for name in ("tracker_settings", "detector_settings", "anchor_policy"):
            if name in data:
                data[name] = locations_hidden(data[name])
        return data

    class Meta:
        model = ProposalConfig
        fields = ["id", "name", "version", "backend", "checkpoint_path", "checkpoint_sha256", "model_config_path",
                  "categories", "concept", "anchor_policy", "detector_settings", "tracker_settings", "software",
                  "config_hash", "created_at"]


class ProposalConfigListApi(APIView):
    pagination_class = Page

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=100)
        backend = serializers.CharField(max_length=64, help_text=(
            f"a tracker that needs no files ({', '.join(BACKENDS)}; SAM 2 and SAM 3 without a checkpoint run "
            "random weights) or a tracker the operator registered (GET /api/backends/): checkpoints and model "
            "configs come from the registry, never from a request"))
        categories = serializers.ListField(child=serializers.CharField(max_length=64), min_length=1)
        anchor_policy = serializers.DictField(required=False, default=dict)
        detector_settings = serializers.DictField(required=False, default=dict)
        tracker_settings = serializers.DictField(required=False, default=dict)
        concept = text_field(required=False, max_length=MAX_CONCEPT_CHARS, help_text=(
            "sam3 only: a free-text concept prompted in place of the one category's name, so the run proposes "
            "only objects of that appearance (query-conditioned proposals, seed C.1), e.g. 'person with a red "
            "umbrella'; leave it out for the category prompts"))

    @extend_schema(responses=ProposalConfigOutputSerializer(many=True), summary="List proposal configurations")
    def get(self, request):
        return paginate(selectors.proposal_config_list(), ProposalConfigOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: ProposalConfigOutputSerializer},
                   summary="Create a versioned proposal configuration (identical settings return the existing one)")
    def post(self, request):
        refuse_locations(request.data, field="")  # checkpoint_path, model_config_path, *.bpe_path, ...
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        config = proposal_config_create(created_by=request.user, **data.validated_data)
        return Response(ProposalConfigOutputSerializer(config, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)


class ProposalRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)
    kind = PlainChoiceField(choices=ProposalRun.Kind.choices, read_only=True,
                            help_text="tracked: a tracker ran; imported: tracks or tubes read from a file")
    concept = serializers.CharField(source="config.tracker_settings.concept", default="", read_only=True,
                                    help_text=CONCEPT_HELP)

    class Meta:
        model = ProposalRun
        fields = ["id", "video", "config", "kind", "concept", "status", "trajectory_count", "duplicate_count",
                  "error", "stats", "job", "created_at", "finished_at"]


class ProposalRunListApi(APIView):
    pagination_class = Page

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        video = serializers.PrimaryKeyRelatedField(queryset=Video.objects.all())
        config = serializers.PrimaryKeyRelatedField(queryset=ProposalConfig.objects.all())

    @extend_schema(parameters=[OpenApiParameter("video", int)], responses=ProposalRunOutputSerializer(many=True),
                   summary="List proposal runs")
    def get(self, request):
        qs = selectors.proposal_run_list(video_id=int_param(request, "video"))
        return paginate(qs, ProposalRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: ProposalRunOutputSerializer, 200: ProposalRunOutputSerializer,
                                                       409: OpenApiTypes.OBJECT},
                   summary="Queue a proposal run (the same configuration on the same video is never duplicated)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run, created = proposal_run_create(created_by=request.user, **data.validated_data)
        return Response(ProposalRunOutputSerializer(run).data,
                        status=status.HTTP_202_ACCEPTED if created else status.HTTP_200_OK)


class ProposalRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=ProposalRunOutputSerializer, summary="One proposal run with its job")
    def get(self, request, run_id: int):
        return Response(ProposalRunOutputSerializer(get_object_or_404(selectors.proposal_run_list(), pk=run_id)).data)


# -- trajectories --------------------------------------------------------------------------------
class TrajectoryOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Trajectory
        fields = ["id", "video", "run", "track_id", "category", "n_obs", "first_frame", "last_frame",
                  "temporal_coverage", "longest_run", "median_area", "abrupt_changes", "mean_score"]


class TrajectoryDetailOutputSerializer(TrajectoryOutputSerializer):
    frames = serializers.SerializerMethodField()
    boxes = serializers.SerializerMethodField()
    scores = serializers.SerializerMethodField()

    class Meta(TrajectoryOutputSerializer.Meta):
        fields = [*TrajectoryOutputSerializer.Meta.fields, "frames", "boxes", "scores"]

    def get_frames(self, obj) -> list[int]:
        return obj.frames_array().tolist()

    def get_boxes(self, obj) -> list[list[float]]:
        return obj.boxes_array().round(2).tolist()

    def get_scores(self, obj) -> list[float]:
        return obj.scores_array().round(4).tolist()


class TrajectoryListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    @extend_schema(parameters=[OpenApiParameter("video", int), OpenApiParameter("run", int)],
                   responses=TrajectoryOutputSerializer(many=True), summary="List trajectories (no observations)")
    def get(self, request):
        qs = selectors.trajectory_list(video_id=int_param(request, "video"), run_id=int_param(request, "run"))
        return paginate(qs, TrajectoryOutputSerializer, request, self)


class VideoPoolApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(parameters=[OpenApiParameter("run", int)], responses=TrajectoryDetailOutputSerializer(many=True),
                   summary="All trajectories of a video with their observations")
    def get(self, request, video_id: int):
        get_object_or_404(Video, pk=video_id)
        pool = selectors.video_pool_read(video_id=video_id, run_id=int_param(request, "run"))
        return Response(TrajectoryDetailOutputSerializer(pool, many=True).data)


class TrajectoryDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=TrajectoryDetailOutputSerializer, summary="One trajectory with its observations")
    def get(self, request, trajectory_id: int):
        return Response(TrajectoryDetailOutputSerializer(get_object_or_404(Trajectory, pk=trajectory_id)).data)


class TrajectoryCropListApi(APIView):
    permission_classes = [IsStaffMember]

    class OutputSerializer(serializers.Serializer):
        frame_index = serializers.IntegerField()
        box = serializers.ListField(child=serializers.FloatField())
        crop_url = serializers.CharField()
        marked_url = serializers.CharField()

    @extend_schema(parameters=[OpenApiParameter("n", int, description="how many crops, spread over the track (default 16)")],
                   responses=OutputSerializer(many=True), summary="A trajectory's crops in chronological order")
    def get(self, request, trajectory_id: int):
        trajectory = get_object_or_404(Trajectory, pk=trajectory_id)
        frames = selectors.trajectory_sample_frames(trajectory=trajectory, n=int_param(request, "n", 16))
        base = f"/api/trajectories/{trajectory.pk}"
        items = [{"frame_index": f, "box": trajectory.box_at(f).round(2).tolist(),
                  "crop_url": f"{base}/crops/{f}.jpg", "marked_url": f"{base}/marked/{f}.jpg"} for f in frames]
        return Response(self.OutputSerializer(items, many=True).data)


class TrajectoryCropApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(parameters=[MAX_SIZE_PARAM], responses=JPEG, summary="The crop of a trajectory's box on one frame")
    def get(self, request, trajectory_id: int, index: int):
        trajectory = get_object_or_404(Trajectory.objects.select_related("video"), pk=trajectory_id)
        return _jpeg(selectors.trajectory_crop_jpeg(trajectory=trajectory, index=index, max_size=int_param(request, "max_size")))


class TrajectoryMarkedFrameApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(parameters=[MAX_SIZE_PARAM], responses=JPEG, summary="A full frame with the trajectory's box drawn")
    def get(self, request, trajectory_id: int, index: int):
        trajectory = get_object_or_404(Trajectory.objects.select_related("video"), pk=trajectory_id)
        return _jpeg(selectors.trajectory_marked_frame_jpeg(trajectory=trajectory, index=index,
                                                            max_size=int_param(request, "max_size")))


# -- duplicate candidates ------------------------------------------------------------------------
class DuplicateCandidateOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = DuplicateCandidate
        fields = ["id", "video", "trajectory_a", "trajectory_b", "reasons", "mean_iou", "covisible_frames",
                  "gap_frames", "endpoint_iou", "appearance_similarity", "origin", "created_at"]


class DuplicateCandidateListApi(APIView):
    pagination_class = Page

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        trajectory_a = serializers.PrimaryKeyRelatedField(queryset=Trajectory.objects.all())
        trajectory_b = serializers.PrimaryKeyRelatedField(queryset=Trajectory.objects.all())

    @extend_schema(parameters=[OpenApiParameter("video", int)], responses=DuplicateCandidateOutputSerializer(many=True),
                   summary="List duplicate-pair candidates with the signals that proposed them")
    def get(self, request):
        qs = selectors.duplicate_candidate_list(video_id=int_param(request, "video"))
        return paginate(qs, DuplicateCandidateOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: DuplicateCandidateOutputSerializer},
                   summary="Propose a duplicate pair by hand")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        pair = duplicate_candidate_create_manual(created_by=request.user, **data.validated_data)
        return Response(DuplicateCandidateOutputSerializer(pair).data, status=status.HTTP_201_CREATED)
