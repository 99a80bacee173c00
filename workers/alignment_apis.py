"""REST API of alignment reports: rank candidate frozen text encoders for a snapshot before
training (SCOUT 5.2). Managers create; every staff member reads."""
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import RelationSnapshot
from common.errors import NotFoundError
from common.pagination import Page, paginate
from common.params import flag_field, id_field, query_filters
from common.roles import IsStaffMember, ManagerWritesStaffReads
from workers.alignment import AlignmentReport, alignment_report_create, alignment_report_list

ERROR = OpenApiTypes.OBJECT
CANDIDATES_HELP = ('{name: TextEncoderConfig}, e.g. {"minilm": {}, "clip": {"kind": "clip", "path": "lab-clip"}}: '
                   'the candidate frozen text targets; a model folder is named by a folder entry the operator '
                   'registered (GET /api/backends/), never by a path')


class AlignmentReportOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = AlignmentReport
        fields = ["id", "snapshot", "snapshot_sha256", "candidates", "params", "scores", "rankings", "ranking", "best",
                  "n_pairs", "code_version", "created_by", "created_at"]


class AlignmentReportListApi(APIView):
    permission_classes = [ManagerWritesStaffReads]
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        snapshot = id_field(required=False)

    class InputSerializer(serializers.Serializer):
        snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(),
                                                      help_text="a sealed relation snapshot (its verified matches pair "
                                                                "trajectories with queries)")
        text_encoders = serializers.JSONField(help_text=CANDIDATES_HELP)
        k = serializers.IntegerField(required=False, default=10, min_value=1, help_text="neighbours of mutual k-NN")
        alpha = serializers.FloatField(required=False, default=1.0, min_value=0.0, help_text="ridge penalty")
        n_folds = serializers.IntegerField(required=False, default=5, min_value=2, help_text="ridge R² folds")
        seed = serializers.IntegerField(required=False, default=0, min_value=0, help_text="seeds the folds")
        appearance = serializers.JSONField(required=False, default=dict,
                                           help_text="ImageEncoderConfig of the visual side (handcrafted by default)")
        features = serializers.JSONField(required=False, default=dict, help_text="FeatureConfig of the visual side")
        geometry = flag_field(required=False, default=True, help_text="append g_t to each observation token")
        allow_held_out = flag_field(required=False, default=False,
                                    help_text="a dev or test snapshot anyway (model selection on held-out matches; "
                                              "the report is stamped held-out)")

    @extend_schema(parameters=[FilterSerializer], responses=AlignmentReportOutputSerializer(many=True),
                   summary="Alignment reports, newest first")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return paginate(alignment_report_list(snapshot_id=f.get("snapshot")), AlignmentReportOutputSerializer,
                        request, self)

    @extend_schema(request=InputSerializer, responses={201: AlignmentReportOutputSerializer, 400: ERROR},
                   summary="Rank candidate text encoders for a snapshot (mutual k-NN, CKA, ridge R²) and store it")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        report = alignment_report_create(created_by=request.user, **data.validated_data)
        return Response(AlignmentReportOutputSerializer(report).data, status=status.HTTP_201_CREATED)


class AlignmentReportDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=AlignmentReportOutputSerializer, summary="One alignment report")
    def get(self, request, report_id: int):
        report = AlignmentReport.objects.filter(pk=report_id).first()
        if report is None:
            raise NotFoundError(f"alignment report {report_id} does not exist", code="not_found")
        return Response(AlignmentReportOutputSerializer(report).data)
