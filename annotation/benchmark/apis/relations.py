"""REST API of relations, mining runs, mined cross-video pairs and completeness (DESIGN 2.8-2.9)."""
from __future__ import annotations

from functools import partial

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark import selectors
from annotation.benchmark.apis.common import (
    ERROR,
    MAX_COMPLETENESS_PAIRS,
    BlindableOutputMixin,
    ManagerWritesApi,
    _reader,
)
from annotation.benchmark.services.mining import (
    SPLITS,
    completeness_report,
    completion_pairs_queue,
    mining_run_create,
)
from annotation.models import (
    CrossPair,
    MiningRun,
    Relation,
)
from common.jobs.apis import JobSummaryOutputSerializer
from common.pagination import Page, paginate
from common.params import flag_field, id_field, query_filters
from common.roles import IsManager, IsStaffMember
from common.schema import PlainChoiceField


# -- relations ---------------------------------------------------------------------------------------
class RelationOutputSerializer(BlindableOutputMixin, serializers.ModelSerializer):
    """A verified relation; an auditor reads it without its source, stratum, review item and
    evidence (the pre-label and the reviews)."""

    blind_record = "relation"

    class Meta:
        model = Relation
        fields = ["id", "query", "trajectory", "label", "source", "stratum", "pseudo", "rule", "item", "decided_at",
                  "evidence"]
        extra_kwargs = {name: {"required": False} for name in ("source", "stratum", "item", "evidence")}


class RelationListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        query = id_field(required=False)
        trajectory = id_field(required=False)
        label = serializers.ChoiceField(choices=[1, 0, -1], required=False, help_text="1, 0 or -1 (⊥)")
        stratum = serializers.CharField(required=False, max_length=24)
        pseudo = flag_field(required=False, allow_null=True, default=None)
        split = serializers.ChoiceField(choices=SPLITS, required=False)
        video = id_field(required=False, help_text="the query's or the trajectory's video")

    @extend_schema(parameters=[FilterSerializer],
                   responses={200: RelationOutputSerializer(many=True), 400: ERROR, 403: ERROR},
                   summary="Verified relations (within and across videos; ⊥ included); auditors read them without "
                           "source, stratum, review item and evidence, and may not filter by stratum")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        selectors.hidden_filters_refuse(viewer=request.user, record="relation", filters=f)
        qs = selectors.relation_list(viewer=request.user, query_id=f.get("query"),
                                     trajectory_id=f.get("trajectory"),
                                     label=f.get("label"), stratum=f.get("stratum"), pseudo=f.get("pseudo"),
                                     split=f.get("split"), video_id=f.get("video"))
        return paginate(qs, partial(RelationOutputSerializer, context=_reader(request)), request, self)


# -- mining and completeness -------------------------------------------------------------------------
class MiningRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)

    class Meta:
        model = MiningRun
        fields = ["id", "status", "split", "config", "log", "job", "created_by", "created_at"]


class MiningRunListApi(ManagerWritesApi):
    pagination_class = Page

    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)
        config = serializers.DictField(required=False, allow_null=True,
                                       help_text="budgets, seed and thresholds (models.curation.mining.MiningConfig) and "
                                                 "easy_review_rate")
        writer = serializers.DictField(required=False, allow_null=True,
                                       help_text='the writer that proposes pair labels, e.g. {"name": "template"}')

    @extend_schema(responses=MiningRunOutputSerializer(many=True), summary="Cross-video mining runs")
    def get(self, request):
        return paginate(selectors.mining_run_list(), MiningRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: MiningRunOutputSerializer, 400: ERROR},
                   summary="Mine cross-video pairs of a split into strata (queued; follow the job)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = mining_run_create(created_by=request.user, **data.validated_data)
        return Response(MiningRunOutputSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class MiningRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=MiningRunOutputSerializer, summary="One mining run: its config, log and job")
    def get(self, request, run_id: int):
        return Response(MiningRunOutputSerializer(selectors.mining_run_get(run_id=run_id)).data)


class CrossPairOutputSerializer(BlindableOutputMixin, serializers.ModelSerializer):
    """A mined pair; an auditor reads it without its strata, provenance, similarity and the
    writer's proposal."""

    blind_record = "cross_pair"
    label = serializers.IntegerField(allow_null=True, help_text="the final label; null while not reviewed")
    stratum = serializers.CharField(source="visible_stratum", allow_null=True, required=False,
                                    help_text="its highest-priority stratum; null for a reader seated on its family")
    strata = serializers.JSONField(source="visible_strata", allow_null=True, required=False,
                                   help_text="every stratum it was mined into; null for a reader seated on its family")
    provenance = serializers.JSONField(source="visible_provenance", allow_null=True, required=False,
                                       help_text="[{run, stratum, similarity, encoder, ...}] per mining; null for a "
                                                 "reader seated on its family")
    similarity = serializers.FloatField(source="visible_similarity", allow_null=True, required=False,
                                        help_text="the mining similarity; null for a reader seated on its family")
    proposal = serializers.JSONField(source="visible_proposal", allow_null=True, required=False,
                                     help_text="the writer's proposal; null while the pair waits for its second "
                                               "review (not shown to auditors)")

    class Meta:
        model = CrossPair
        fields = ["id", "query", "trajectory", "stratum", "strata", "provenance", "similarity", "review", "label",
                  "created_at", "proposal"]


class CrossPairListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page


    class FilterSerializer(serializers.Serializer):
        query = id_field(required=False)
        trajectory = id_field(required=False)
        stratum = serializers.CharField(required=False, max_length=24)
        review = serializers.ChoiceField(choices=CrossPair.Review.choices, required=False)

    @extend_schema(parameters=[FilterSerializer],
                   responses={200: CrossPairOutputSerializer(many=True), 400: ERROR, 403: ERROR},
                   summary="Mined cross-video pairs: stratum, provenance, review and final label (auditors read "
                           "them without strata, provenance, similarity and the writer's proposal, and may not "
                           "filter by stratum)")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        selectors.hidden_filters_refuse(viewer=request.user, record="cross_pair", filters=f)
        qs = selectors.cross_pair_list(viewer=request.user, query_id=f.get("query"), stratum=f.get("stratum"),
                                       review=f.get("review"),
                                       trajectory_id=f.get("trajectory"))
        return paginate(qs, partial(CrossPairOutputSerializer, context=_reader(request)), request, self)


class CompletenessOutputSerializer(serializers.Serializer):
    split = serializers.CharField()
    queries = serializers.IntegerField(help_text="admitted queries of the split's benchmark videos")
    trajectories = serializers.IntegerField(help_text="members of those videos' current pools")
    needed = serializers.IntegerField(help_text="queries × trajectories: what Traj2T and OCVR score")
    binary = serializers.IntegerField()
    missing = serializers.IntegerField()
    missing_by_kind = serializers.DictField(child=serializers.IntegerField(),
                                            help_text="within_video and cross_video")
    complete = serializers.BooleanField()
    missing_pairs = serializers.ListField(child=serializers.ListField(child=serializers.IntegerField()),
                                          help_text="[query, trajectory] pairs without a binary label, up to limit")


class CompletenessApi(APIView):
    permission_classes = [IsStaffMember]

    class FilterSerializer(serializers.Serializer):
        split = serializers.ChoiceField(choices=SPLITS)
        limit = serializers.IntegerField(required=False, min_value=0, max_value=MAX_COMPLETENESS_PAIRS, default=200,
                                         help_text="how many missing pairs to list")

    @extend_schema(parameters=[FilterSerializer], responses=CompletenessOutputSerializer,
                   summary="Which relations the split's Traj2T and OCVR galleries need and which are not binary yet")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return Response(CompletenessOutputSerializer(completeness_report(**f)).data)


class CompletenessQueueApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)

    class OutputSerializer(serializers.Serializer):
        split = serializers.CharField()
        queued = serializers.IntegerField(help_text="cross-video pairs sent to pair review")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer, 400: ERROR},
                   summary="Send every cross-video pair the split still misses to pair review (completion stratum)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        split = data.validated_data["split"]
        return Response(self.OutputSerializer({"split": split, "queued": completion_pairs_queue(split=split)}).data)


