"""REST API of describer runs and descriptions (DESIGN 2.6)."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark import selectors
from annotation.benchmark.apis.common import (
    ERROR,
    BlindableOutputMixin,
    FactOutputSerializer,
    ManagerWritesApi,
    _reader,
)
from annotation.benchmark.services.descriptions import description_run_create
from annotation.models import (
    CandidatePool,
    Description,
    DescriptionRun,
    DescriptionVersion,
    GenerationRun,
)
from common.jobs.apis import JobSummaryOutputSerializer
from common.pagination import Page, paginate
from common.params import id_field, query_filters
from common.roles import IsStaffMember
from common.schema import PlainChoiceField


# -- describer runs and descriptions ---------------------------------------------------------------
class DescriptionRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)

    class Meta:
        model = DescriptionRun
        fields = ["id", "status", "pools", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "job",
                  "created_by", "created_at"]


class GenerationRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)

    class Meta:
        model = GenerationRun
        fields = DescriptionRunOutputSerializer.Meta.fields


class ModelRunInputSerializer(serializers.Serializer):
    pools = serializers.PrimaryKeyRelatedField(many=True, queryset=CandidatePool.objects.all(),
                                               help_text="frozen candidate pools")
    backend = serializers.DictField(required=False, allow_null=True,
                                    help_text='backend name and settings, e.g. {"name": "heuristic"}')
    budget = serializers.DictField(required=False, allow_null=True, help_text="sampling or proposal budget")


class DescriptionRunListApi(ManagerWritesApi):
    pagination_class = Page

    class InputSerializer(ModelRunInputSerializer):
        pass

    @extend_schema(responses=DescriptionRunOutputSerializer(many=True), summary="Describer (VLM) runs")
    def get(self, request):
        return paginate(selectors.description_run_list(), DescriptionRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: DescriptionRunOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Describe every member of frozen pools (queued; follow the job); each description "
                           "opens a review item")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = description_run_create(created_by=request.user, **data.validated_data)
        return Response(DescriptionRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class DescriptionRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=DescriptionRunOutputSerializer, summary="One describer run with its job")
    def get(self, request, run_id: int):
        return Response(DescriptionRunOutputSerializer(selectors.description_run_get(run_id=run_id)).data)


class DescriptionOutputSerializer(serializers.ModelSerializer):
    video = serializers.IntegerField(source="pool.video_id")
    status = PlainChoiceField(choices=Description.Status.choices, read_only=True)

    class Meta:
        model = Description
        fields = ["id", "run", "pool", "video", "trajectory", "status", "attempts", "failure", "approved_version",
                  "created_at"]


class DescriptionVersionOutputSerializer(BlindableOutputMixin, serializers.ModelSerializer):
    blind_record = "description_version"
    origin = PlainChoiceField(choices=DescriptionVersion.Origin.choices, required=False,
                              help_text="who made it: the describer, a reviewer, or the consolidation of corrections "
                                        "(not shown to auditors, nor are number, parent and created_by)")

    class Meta:
        model = DescriptionVersion
        fields = ["id", "number", "origin", "parent", "content", "content_sha256", "created_by", "created_at"]
        extra_kwargs = {"number": {"required": False}, "parent": {"required": False},
                        "created_by": {"required": False}}


class DissentDifferenceSerializer(serializers.Serializer):
    field = serializers.CharField(help_text="appearance, motion, or a fact by id (and name)")
    approved = serializers.CharField(allow_null=True, help_text="the approved value (null: not in it)")
    corrected = serializers.CharField(allow_null=True, help_text="the dissenting correction's value (null: removed)")


class DissentOutputSerializer(serializers.Serializer):
    """A minor correction that lost to the approvals of another version (E.2), read-only."""

    id = serializers.IntegerField()
    description = serializers.IntegerField()
    trajectory = serializers.IntegerField()
    item = serializers.IntegerField(help_text="the review item that approved the other version")
    correction = serializers.IntegerField(help_text="the corrected version the dissenting reviewer approved")
    approved_version = serializers.IntegerField()
    reasons = serializers.ListField(child=serializers.CharField(), help_text="the dissenting reviewer's reasons")
    differences = DissentDifferenceSerializer(many=True)
    created_at = serializers.DateTimeField()


class DescriptionDetailOutputSerializer(DescriptionOutputSerializer):
    versions = DescriptionVersionOutputSerializer(many=True, source="visible_versions",
                                                  help_text="annotators see no other reviewer's corrections; "
                                                            "auditors see the approved version alone")
    facts = FactOutputSerializer(many=True, help_text="D_r^H: the approved version's known facts (empty unless "
                                                      "approved)")
    raw_outputs = serializers.ListField(child=serializers.CharField(allow_blank=True), source="visible_raw_outputs",
                                        allow_null=True, help_text="the describer's raw text per attempt "
                                                                   "(managers only)")

    dissent = DissentOutputSerializer(many=True, source="visible_dissent", allow_null=True,
                                      help_text="recorded dissent: corrections that lost to the approvals of another "
                                                "version (adjudicators, managers, and auditors outside a claimed audit "
                                                "sample of it; null for others)")

    class Meta(DescriptionOutputSerializer.Meta):
        fields = [*DescriptionOutputSerializer.Meta.fields, "inputs", "versions", "facts", "raw_outputs", "dissent"]


class DescriptionListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        pool = id_field(required=False)
        video = id_field(required=False)
        trajectory = id_field(required=False)
        status = serializers.ChoiceField(choices=Description.Status.choices, required=False)

    @extend_schema(parameters=[FilterSerializer], responses=DescriptionOutputSerializer(many=True),
                   summary="Descriptions of pool members and where their review stands")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = selectors.description_list(pool_id=f.get("pool"), status=f.get("status"),
                                        trajectory_id=f.get("trajectory"), video_id=f.get("video"))
        return paginate(qs, DescriptionOutputSerializer, request, self)


class DescriptionDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses={200: DescriptionDetailOutputSerializer, 403: ERROR, 404: ERROR},
                   summary="One description: its versions, status, approved facts with their evidence, and its "
                           "recorded dissent")
    def get(self, request, description_id: int):
        description = selectors.description_get(description_id=description_id, viewer=request.user)
        return Response(DescriptionDetailOutputSerializer(description, context=_reader(request)).data)


