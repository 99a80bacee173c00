"""REST API of imported tracks and tubes and of tube-match reports (issue 14, items 1 and 2)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import IsManager, IsStaffMember
from common.errors import RequestTooLarge
from common.pagination import Page, paginate
from common.params import flag_field, int_param
from common.schema import ERROR, PlainChoiceField
from trajectories.models import ProposalRun, TrackImport, TubeMatchReport, Video
from trajectories.services.imports import MAX_TRACK_FILE_BYTES, track_import
from trajectories.services.tube_matching import tube_match_report_create


class TrackImportOutputSerializer(serializers.ModelSerializer):
    video = serializers.IntegerField(source="run.video_id")
    run_status = PlainChoiceField(source="run.status", choices=ProposalRun.Status.choices)
    trajectory_count = serializers.IntegerField(source="run.trajectory_count")
    duplicate_count = serializers.IntegerField(source="run.duplicate_count")
    format = PlainChoiceField(choices=TrackImport.Format.choices)
    purpose = PlainChoiceField(choices=TrackImport.Purpose.choices)
    review = PlainChoiceField(choices=TrackImport.Review.choices)

    class Meta:
        model = TrackImport
        fields = ["id", "run", "video", "run_status", "trajectory_count", "duplicate_count", "format", "purpose",
                  "source", "file_name", "file_sha256", "review", "review_reason", "options", "counts", "captions",
                  "created_at"]


class TrackImportListApi(APIView):
    pagination_class = Page
    parser_classes = [MultiPartParser, FormParser]

    def get_permissions(self):
        return [IsManager()] if self.request.method == "POST" else [IsStaffMember()]

    class InputSerializer(serializers.Serializer):
        file = serializers.FileField(help_text="gt.txt / tracker output (mot), a JSON tube file (json) or CSV (csv)")
        video = serializers.PrimaryKeyRelatedField(queryset=Video.objects.all())
        format = PlainChoiceField(choices=TrackImport.Format.choices)
        source = serializers.CharField(max_length=500, help_text="where the tracks come from")
        purpose = PlainChoiceField(choices=TrackImport.Purpose.choices, default=TrackImport.Purpose.PROPOSALS)
        review = PlainChoiceField(choices=TrackImport.Review.choices, default=TrackImport.Review.REVIEWED)
        review_reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)
        gt = flag_field(required=False, allow_null=True, default=None,
                                      help_text="mot: ground truth (default: the file is named gt.txt)")
        frame_base = serializers.ChoiceField(choices=[0, 1], default=0, help_text="csv: frame numbering")
        clip = flag_field(default=False, help_text="clip boxes partly outside the frame")
        seqinfo = serializers.FileField(required=False, help_text="mot: the sequence's seqinfo.ini, checked")

    @extend_schema(parameters=[OpenApiParameter("video", int)], responses=TrackImportOutputSerializer(many=True),
                   summary="List imported tracks and tubes")
    def get(self, request):
        qs = TrackImport.objects.select_related("run").order_by("-id")
        video = int_param(request, "video")
        if video is not None:
            qs = qs.filter(run__video_id=video)
        return paginate(qs, TrackImportOutputSerializer, request, self)

    @extend_schema(request={"multipart/form-data": InputSerializer},
                   responses={201: TrackImportOutputSerializer, 200: TrackImportOutputSerializer,
                              400: ERROR, 403: ERROR, 409: ERROR,
                              413: ERROR},
                   summary="Import existing tracks or annotated tubes onto a video as an imported proposal run "
                           "(a bad file is refused with its line numbers and nothing is stored; the same file "
                           "again answers 200 with the existing import)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        upload, seqinfo = v["file"], v.get("seqinfo")
        if upload.size > MAX_TRACK_FILE_BYTES:
            raise RequestTooLarge(limit=MAX_TRACK_FILE_BYTES)
        result = track_import(
            video=v["video"], data=upload.read(), file_name=upload.name, fmt=v["format"], source=v["source"],
            purpose=v["purpose"], review=v["review"], review_reason=v["review_reason"], gt=v["gt"],
            frame_base=v["frame_base"], clip=v["clip"], seqinfo=seqinfo.read() if seqinfo else None,
            created_by=request.user)
        return Response(TrackImportOutputSerializer(result.run.track_import).data,
                        status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK)


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
