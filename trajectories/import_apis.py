"""REST API of imported tracks and tubes, of tube-match reports and of the clean-truth tubes they keep.

A track import is checked in the request and stored by a job (``trajectories.services.imports``):
``POST /api/track-imports/`` answers 202 with the import and its queued run (poll
``GET /api/track-imports/{id}/`` or its job), 200 with an import of the same file that is queued,
running or done. ``POST /api/track-imports/check/`` reads a file against a video without storing
anything and answers what would refuse it, what would need ``confirm_fit``, and the boxes of its
first frames for the import form's preview.
"""
from __future__ import annotations

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import RequestTooLarge
from common.pagination import Page, paginate
from common.params import flag_field, int_param
from common.roles import IsManager, IsStaffMember
from common.schema import ERROR, PlainChoiceField
from trajectories.models import CleanTruthTube, ProposalRun, TrackImport, TubeMatchReport, Video
from trajectories.selectors import clean_truth_tube_list
from trajectories.services.imports import track_import_create
from trajectories.services.track_files import track_file_check
from trajectories.services.tube_matching import tube_match_report_create

FORM_ALLOWANCE = 1024 * 1024   # a track import's form beyond its file: the fields and a seqinfo.ini


class TrackImportOutputSerializer(serializers.ModelSerializer):
    video = serializers.IntegerField(source="run.video_id")
    run_status = PlainChoiceField(source="run.status", choices=ProposalRun.Status.choices)
    job = serializers.IntegerField(source="run.job_id", allow_null=True, help_text="the job that stores the tracks")
    progress = serializers.FloatField(source="run.job.progress", default=None, allow_null=True,
                                      help_text="the job's progress, 0 to 1")
    message = serializers.CharField(source="run.job.message", default="", help_text="the job's last message")
    error = serializers.CharField(source="run.error", help_text="why the import failed")
    trajectory_count = serializers.IntegerField(source="run.trajectory_count")
    duplicate_count = serializers.IntegerField(source="run.duplicate_count")
    format = PlainChoiceField(choices=TrackImport.Format.choices)
    purpose = PlainChoiceField(choices=TrackImport.Purpose.choices)
    review = PlainChoiceField(choices=TrackImport.Review.choices)

    class Meta:
        model = TrackImport
        fields = ["id", "run", "video", "run_status", "job", "progress", "message", "error", "trajectory_count",
                  "duplicate_count", "format", "purpose", "source", "file_name", "file_sha256", "review",
                  "review_reason", "options", "counts", "captions", "fit_findings", "created_at"]


def _imports():
    return TrackImport.objects.select_related("run", "run__job").defer("data").order_by("-id")


def _refuse_large_body(request) -> None:
    """413 before the body is read when it declares more than a tracks file and its form take."""
    limit = settings.TRAJLAB_TRACK_FILE_MAX_BYTES
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > limit + FORM_ALLOWANCE:
        raise RequestTooLarge(limit=limit)


class TrackFileInputSerializer(serializers.Serializer):
    file = serializers.FileField(allow_empty_file=True,
                                 help_text="gt.txt / tracker output (mot), a JSON tube file (json), CSV (csv), "
                                           "CVAT for video 1.1 XML (cvat) or a Label Studio video JSON export "
                                           "(labelstudio)")
    video = serializers.PrimaryKeyRelatedField(queryset=Video.objects.all())
    format = PlainChoiceField(choices=TrackImport.Format.choices)
    purpose = PlainChoiceField(choices=TrackImport.Purpose.choices, default=TrackImport.Purpose.PROPOSALS)
    gt = flag_field(required=False, allow_null=True, default=None,
                    help_text="mot: ground truth (default: the file is named gt.txt)")
    frame_base = serializers.ChoiceField(choices=[0, 1], default=0, help_text="csv: frame numbering")
    clip = flag_field(default=False, help_text="clip boxes partly outside the frame")
    seqinfo = serializers.FileField(required=False, help_text="mot: the sequence's seqinfo.ini, checked")


class TrackImportListApi(APIView):
    pagination_class = Page
    parser_classes = [MultiPartParser, FormParser]

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(TrackFileInputSerializer):
        source = serializers.CharField(max_length=500, help_text="where the tracks come from")
        review = PlainChoiceField(choices=TrackImport.Review.choices, default=TrackImport.Review.REVIEWED)
        review_reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
        confirm_fit = flag_field(default=False, help_text="import although the fit check found that the file may "
                                                          "belong to another video (its findings are kept)")

    @extend_schema(parameters=[OpenApiParameter("video", int)], responses=TrackImportOutputSerializer(many=True),
                   summary="List imported tracks and tubes")
    def get(self, request):
        qs = _imports()
        video = int_param(request, "video")
        if video is not None:
            qs = qs.filter(run__video_id=video)
        return paginate(qs, TrackImportOutputSerializer, request, self)

    @extend_schema(request={"multipart/form-data": InputSerializer},
                   responses={202: TrackImportOutputSerializer, 200: TrackImportOutputSerializer,
                              400: ERROR, 403: ERROR, 409: ERROR, 413: ERROR},
                   summary="Import existing tracks or annotated tubes onto a video as an imported proposal run: "
                           "the file is checked now (a bad file is refused with its line numbers and nothing is "
                           "stored; 409 fit_unconfirmed when it may belong to another video, unless confirm_fit) "
                           "and a job stores its tracks (202); the same file again answers 200 with that import")
    def post(self, request):
        _refuse_large_body(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        upload, seqinfo = v["file"], v.get("seqinfo")
        if upload.size > settings.TRAJLAB_TRACK_FILE_MAX_BYTES:
            raise RequestTooLarge(limit=settings.TRAJLAB_TRACK_FILE_MAX_BYTES)
        result = track_import_create(
            video=v["video"], data=upload.read(), file_name=upload.name, fmt=v["format"], source=v["source"],
            purpose=v["purpose"], review=v["review"], review_reason=v["review_reason"], gt=v["gt"],
            frame_base=v["frame_base"], clip=v["clip"], seqinfo=seqinfo.read() if seqinfo else None,
            confirm_fit=v["confirm_fit"], created_by=request.user)
        record = _imports().get(run=result.run)
        return Response(TrackImportOutputSerializer(record).data,
                        status=status.HTTP_202_ACCEPTED if result.created else status.HTTP_200_OK)


class TrackImportDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={200: TrackImportOutputSerializer, 404: ERROR},
                   summary="One imported file: its run's status and its job's progress")
    def get(self, request, import_id: int):
        return Response(TrackImportOutputSerializer(get_object_or_404(_imports(), pk=import_id)).data)


class TrackFileProblemSerializer(serializers.Serializer):
    line = serializers.IntegerField(help_text="0: the file as a whole")
    message = serializers.CharField()


class TrackFileFindingSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="boxes_outside or frames_short")
    message = serializers.CharField()


class PreviewBoxSerializer(serializers.Serializer):
    track_id = serializers.IntegerField()
    category = serializers.CharField()
    box = serializers.ListField(child=serializers.FloatField(), min_length=4, max_length=4,
                                help_text="x1, y1, x2, y2 in the file's pixels (may reach past the frame)")


class PreviewFrameSerializer(serializers.Serializer):
    frame = serializers.IntegerField(help_text="the video's 0-based frame index")
    boxes = PreviewBoxSerializer(many=True)


class TrackFileCheckOutputSerializer(serializers.Serializer):
    fits = serializers.BooleanField(help_text="no problem refuses it and no finding needs a confirmation")
    tracks = serializers.IntegerField()
    boxes = serializers.IntegerField()
    first_frame = serializers.IntegerField(help_text="in the file's own numbering")
    last_frame = serializers.IntegerField(help_text="in the file's own numbering")
    box_extent = serializers.ListField(child=serializers.FloatField(), help_text="x1, y1, x2, y2 of all boxes")
    video_width = serializers.IntegerField()
    video_height = serializers.IntegerField()
    video_frames = serializers.IntegerField()
    problems = TrackFileProblemSerializer(many=True, help_text="what refuses the import onto this video")
    findings = TrackFileFindingSerializer(many=True, help_text="what needs confirm_fit")
    preview = PreviewFrameSerializer(many=True, help_text="the first frames with boxes")


class TrackFileCheckApi(APIView):
    permission_classes = [IsManager]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request={"multipart/form-data": TrackFileInputSerializer},
                   responses={200: TrackFileCheckOutputSerializer, 400: ERROR, 403: ERROR, 413: ERROR},
                   summary="Check a tracks file against a video without importing it: what would refuse it, what "
                           "would need confirm_fit, and the boxes of its first frames (a file that does not parse "
                           "is a 400, as its import would be)")
    def post(self, request):
        _refuse_large_body(request)
        data = TrackFileInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        upload, seqinfo, video = v["file"], v.get("seqinfo"), v["video"]
        if upload.size > settings.TRAJLAB_TRACK_FILE_MAX_BYTES:
            raise RequestTooLarge(limit=settings.TRAJLAB_TRACK_FILE_MAX_BYTES)
        checked = track_file_check(video=video, data=upload.read(), file_name=upload.name, fmt=v["format"],
                                   gt=v["gt"], frame_base=v["frame_base"], clip=v["clip"],
                                   seqinfo=seqinfo.read() if seqinfo else None, purpose=v["purpose"])
        return Response(TrackFileCheckOutputSerializer({
            "fits": not checked.problems and not checked.findings, "tracks": len(checked.parsed.tracks),
            "boxes": checked.parsed.n_rows, **checked.extent, "video_width": video.width,
            "video_height": video.height, "video_frames": video.frame_count, "problems": checked.problems,
            "findings": checked.findings, "preview": checked.preview}).data)


class TubeMatchReportOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = TubeMatchReport
        fields = ["id", "video", "tubes_run", "proposals_run", "config", "counts", "report", "created_at"]


class TubeMatchReportListApi(APIView):
    pagination_class = Page

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        tubes_run = serializers.PrimaryKeyRelatedField(queryset=ProposalRun.objects.all(),
                                                       help_text="an imported run of annotated tubes")
        proposals_run = serializers.PrimaryKeyRelatedField(queryset=ProposalRun.objects.all())
        settings = serializers.DictField(required=False, default=dict,
                                         help_text="tau, min_coverage, min_mean_iou, tau_safe (defaults 0.5, 0.5, 0.4, 0.2)")

    @extend_schema(parameters=[OpenApiParameter("video", int)],
                   responses=TubeMatchReportOutputSerializer(many=True),
                   summary="List tube-match reports (matched, ambiguous and unmatched annotated tubes per video)")
    def get(self, request):
        qs = TubeMatchReport.objects.order_by("-id")
        video = int_param(request, "video")
        if video is not None:
            qs = qs.filter(video_id=video)
        return paginate(qs, TubeMatchReportOutputSerializer, request, self)

    @extend_schema(request=InputSerializer,
                   responses={201: TubeMatchReportOutputSerializer, 400: ERROR,
                              403: ERROR, 409: ERROR},
                   summary="Match a run's proposals against the video's annotated tubes (seed D.1) and store the "
                           "report (asked again, it is computed again and replaced)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        report = tube_match_report_create(tubes_run=v["tubes_run"], proposals_run=v["proposals_run"],
                                          config=v["settings"], created_by=request.user)
        return Response(TubeMatchReportOutputSerializer(report).data, status=status.HTTP_201_CREATED)


class TubeMatchReportDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={200: TubeMatchReportOutputSerializer, 404: ERROR},
                   summary="One tube-match report")
    def get(self, request, report_id: int):
        return Response(TubeMatchReportOutputSerializer(get_object_or_404(TubeMatchReport, pk=report_id)).data)


class CleanTruthTubeOutputSerializer(serializers.ModelSerializer):
    tube_track_id = serializers.IntegerField(source="tube.track_id", help_text="the tube's id in its file")
    first_frame = serializers.IntegerField(source="tube.first_frame", help_text="the tube's first annotated frame")
    last_frame = serializers.IntegerField(source="tube.last_frame", help_text="the tube's last annotated frame")
    frames = serializers.SerializerMethodField(help_text="the tube's annotated frame indices")
    boxes = serializers.SerializerMethodField(help_text="the tube's boxes [x1, y1, x2, y2], original pixels")

    class Meta:
        model = CleanTruthTube
        fields = ["id", "report", "video", "tube", "tube_track_id", "trajectory", "caption", "max_iou", "coverage",
                  "mean_iou", "first_frame", "last_frame", "frames", "boxes", "created_at"]

    def get_frames(self, obj) -> list[int]:
        return obj.tube.frames_array().tolist()

    def get_boxes(self, obj) -> list[list[float]]:
        return obj.tube.boxes_array().round(2).tolist()


class CleanTruthTubeListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page

    @extend_schema(parameters=[OpenApiParameter("video", int), OpenApiParameter("report", int),
                               OpenApiParameter("trajectory", int, description="the matched proposal")],
                   responses=CleanTruthTubeOutputSerializer(many=True),
                   summary="List annotated tubes kept as clean ground truth beside the proposals they matched "
                           "(seed D.1; made by tube-match reports, read-only)")
    def get(self, request):
        qs = clean_truth_tube_list(video_id=int_param(request, "video"), report_id=int_param(request, "report"),
                                   trajectory_id=int_param(request, "trajectory"))
        return paginate(qs, CleanTruthTubeOutputSerializer, request, self)
