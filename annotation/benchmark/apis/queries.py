"""REST API of query-writer runs, queries and their revisions (DESIGN 2.7-2.8)."""
from __future__ import annotations

from functools import partial

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark import selectors
from annotation.benchmark.apis.common import (
    ERROR,
    BlindableOutputMixin,
    ManagerWritesApi,
    _reader,
)
from annotation.benchmark.apis.descriptions import (
    GenerationRunOutputSerializer,
    ModelRunInputSerializer,
)
from annotation.benchmark.services.mining import (
    SPLITS,
)
from annotation.benchmark.services.queries import generation_run_create, query_revise
from annotation.curation.stages.base import PredicateSerializer
from annotation.models import (
    Query,
)
from common.pagination import Page, paginate
from common.params import id_field, query_filters
from common.roles import IsManager, IsStaffMember
from common.schema import PlainChoiceField


# -- query-writer runs and queries -----------------------------------------------------------------
class GenerationRunListApi(ManagerWritesApi):
    pagination_class = Page

    class InputSerializer(ModelRunInputSerializer):
        pass

    @extend_schema(responses=GenerationRunOutputSerializer(many=True), summary="Query-writer (LLM) runs")
    def get(self, request):
        return paginate(selectors.generation_run_list(), GenerationRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: GenerationRunOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Write queries from the approved descriptions of frozen pools (queued; follow the job); "
                           "each accepted proposal opens its relation row for review")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = generation_run_create(created_by=request.user, **data.validated_data)
        return Response(GenerationRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class GenerationRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=GenerationRunOutputSerializer, summary="One query-writer run with its job")
    def get(self, request, run_id: int):
        return Response(GenerationRunOutputSerializer(selectors.generation_run_get(run_id=run_id)).data)


class QueryOutputSerializer(BlindableOutputMixin, serializers.ModelSerializer):
    blind_record = "query"
    predicates = PredicateSerializer(many=True)
    status = PlainChoiceField(choices=Query.Status.choices, read_only=True)
    ratings = serializers.JSONField(source="visible_ratings", allow_null=True, required=False,
                                    help_text="the first reviewer's faithfulness and naturalness (not shown to "
                                              "auditors; null while the reader sits on a row of the query's family)")

    class Meta:
        model = Query
        fields = ["id", "pool", "video", "target", "source_version", "run", "text", "predicates", "revision", "parent",
                  "status", "rejection_reason", "ratings", "created_by", "created_at"]


class RowEntryOutputSerializer(BlindableOutputMixin, serializers.Serializer):
    blind_record = "row_entry"
    trajectory = serializers.IntegerField()
    label = serializers.IntegerField(allow_null=True, help_text="1, 0 or -1 (⊥); null while not reviewed")
    source = serializers.CharField(allow_null=True, required=False, help_text="not shown to auditors")
    evidence = serializers.JSONField(allow_null=True, required=False,
                                     help_text="pre-label and reviews (not shown to auditors)")


class QueryDetailOutputSerializer(QueryOutputSerializer):
    row = RowEntryOutputSerializer(many=True, help_text="the relation row against the query's complete pool")
    revised_by = serializers.IntegerField(source="revised_by_id", allow_null=True,
                                          help_text="the revision that superseded it")
    raw_output = serializers.CharField(source="visible_raw_output", allow_null=True, allow_blank=True,
                                       help_text="the writer's raw text (managers only)")

    class Meta(QueryOutputSerializer.Meta):
        fields = [*QueryOutputSerializer.Meta.fields, "row", "revised_by", "raw_output"]


class QueryListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        video = id_field(required=False)
        pool = id_field(required=False)
        status = serializers.ChoiceField(choices=Query.Status.choices, required=False)
        split = serializers.ChoiceField(choices=SPLITS, required=False)
        q = serializers.CharField(required=False, max_length=200, help_text="words of the query's text")

    @extend_schema(parameters=[FilterSerializer], responses=QueryOutputSerializer(many=True),
                   summary="Queries with their predicates and status")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = selectors.query_list(viewer=request.user, video_id=f.get("video"), status=f.get("status"), split=f.get("split"),
                                  pool_id=f.get("pool"), text=f.get("q"))
        return paginate(qs, partial(QueryOutputSerializer, context=_reader(request)), request, self)


class QueryDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=QueryDetailOutputSerializer, summary="One query with its within-video relation row")
    def get(self, request, query_id: int):
        query = selectors.query_detail(query_id=query_id, viewer=request.user)
        return Response(QueryDetailOutputSerializer(query, context=_reader(request)).data)


class QueryReviseApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=500)
        predicates = PredicateSerializer(many=True, allow_empty=False)

    @extend_schema(request=InputSerializer, responses={201: QueryOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Revise a query's wording or predicates: a new revision, verified against the pool again")
    def post(self, request, query_id: int):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        revision = query_revise(query=selectors.query_get(query_id=query_id, viewer=request.user),
                                revised_by=request.user, **data.validated_data)
        revision = selectors.query_get(query_id=revision.pk, viewer=request.user)
        return Response(QueryOutputSerializer(revision).data, status=status.HTTP_201_CREATED)


