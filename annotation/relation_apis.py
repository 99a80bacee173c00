"""REST API of descriptions, queries, relations, mining and snapshots (DESIGN 2.6-2.10).

Managers start describer, query-writer and mining runs (202 with the run and its job), revise
queries, queue completion pairs and take snapshots; every staff member reads. Annotators vote
through the review endpoints of ``annotation.apis``; the serializers of what they are shown for
the description, relation and pair stages live here. What each reader may see is decided by
``annotation.relation_selectors``: a reader whose only role is auditor gets every record without
the fields ``HIDDEN_FROM_AUDITORS`` names (declared optional in the schema for that reason).
Snapshots are immutable: there is no endpoint that edits one.
"""
from __future__ import annotations

from functools import partial

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import IsManager, IsStaffMember, ManagerWritesStaffReads
from annotation import relation_selectors as selectors
from annotation.models import (
    CandidatePool,
    CrossPair,
    Description,
    DescriptionRun,
    DescriptionVersion,
    GenerationRun,
    MiningRun,
    PseudoLabelRule,
    Query,
    Relation,
    RelationSnapshot,
)
from annotation.services.descriptions import description_run_create
from annotation.services.mining import (
    SPLITS,
    completeness_report,
    completion_pairs_queue,
    mining_run_create,
)
from annotation.services.pseudolabels import (
    pseudo_labels_apply,
    pseudo_rule_calibrate,
    pseudo_rule_declare,
)
from annotation.services.queries import generation_run_create, query_revise
from annotation.services.snapshots import relation_snapshot_create
from common.pagination import paginate
from common.params import query_filters
from common.schema import PlainChoiceField
from models.facts import ATTRIBUTES, EVENTS
from workers.apis import JobSummaryOutputSerializer

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}
MAX_COMPLETENESS_PAIRS = 10_000


class BlindableOutputMixin:
    """An output serializer that leaves out, when its context says the reader is blind
    (``{"blind": True}``), the fields ``relation_selectors.HIDDEN_FROM_AUDITORS[blind_record]``
    names. Nested serializers read the root's context, so one flag blinds a whole answer. Every
    such field is declared ``required=False`` so that the published schema allows its absence."""

    blind_record = ""

    def get_fields(self):
        fields = super().get_fields()
        if self.context.get("blind"):
            for name in selectors.HIDDEN_FROM_AUDITORS[self.blind_record]:
                fields.pop(name, None)
        return fields


def _reader(request) -> dict:
    """The serializer context of ``request``'s reader: whether they read blind, as an auditor."""
    return {"blind": selectors.reads_blind(request.user)}


class ManagerWritesApi(APIView):
    """Managers write (POST); every staff member reads."""

    permission_classes = [ManagerWritesStaffReads]


# -- shared pieces ---------------------------------------------------------------------------------
class PredicateSerializer(serializers.Serializer):
    name = serializers.ChoiceField(choices=list(ATTRIBUTES + EVENTS), help_text="a fact name")
    value = serializers.CharField(max_length=100, help_text="the value the query requires")
    fact_ids = serializers.ListField(child=serializers.CharField(max_length=32), min_length=1,
                                     help_text="the approved facts of the source description that support it")


class FactOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    name = serializers.CharField()
    value = serializers.CharField(allow_blank=True)
    start_frame = serializers.IntegerField()
    end_frame = serializers.IntegerField(help_text="half-open interval [start_frame, end_frame)")
    evidence_frames = serializers.ListField(child=serializers.IntegerField())
    scope = serializers.CharField()
    known = serializers.BooleanField()


class ModelProposalSerializer(serializers.Serializer):
    """A writer's suggestion for one (query, trajectory) pair; it never decides."""

    label = serializers.IntegerField(help_text="1 match, 0 mismatch, -1 unknown (⊥)")
    predicates = serializers.ListField(child=serializers.JSONField(), help_text="decisive predicates")
    evidence = serializers.ListField(child=serializers.JSONField(), help_text="evidence fact ids")


# -- what a reviewer is shown (used by annotation.apis.TargetSerializer) --------------------------
class DescriptionTargetSerializer(serializers.Serializer):
    description = serializers.IntegerField()
    version = serializers.IntegerField(help_text="vote on exactly this version")
    number = serializers.IntegerField()
    origin = serializers.CharField(help_text="model, or consolidated for a second round")
    content = serializers.JSONField(help_text="appearance, motion and facts (models.facts.Description)")
    content_sha256 = serializers.CharField()
    inputs = serializers.JSONField(help_text="the crop and marked-frame indices the describer was shown")


class RowCandidateSerializer(serializers.Serializer):
    trajectory = serializers.IntegerField()
    prelabel = ModelProposalSerializer(allow_null=True)


class RelationRowTargetSerializer(serializers.Serializer):
    query = serializers.IntegerField()
    text = serializers.CharField()
    predicates = PredicateSerializer(many=True)
    pool = serializers.IntegerField()
    review_round = serializers.IntegerField(help_text="1: label every candidate; 2: only the disputed ones")
    rate_query = serializers.BooleanField(help_text="the vote's payload must rate it: faithful, natural 1-5")
    candidates = RowCandidateSerializer(many=True)


class PairTargetSerializer(serializers.Serializer):
    pair = serializers.IntegerField()
    query = serializers.IntegerField()
    text = serializers.CharField()
    predicates = PredicateSerializer(many=True)
    query_video = serializers.IntegerField()
    trajectory = serializers.IntegerField()
    trajectory_video = serializers.IntegerField()
    proposal = ModelProposalSerializer(allow_null=True)


# -- describer runs and descriptions ---------------------------------------------------------------
class DescriptionRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)

    class Meta:
        model = DescriptionRun
        fields = ["id", "pools", "backend", "prompt_version", "prompt_sha256", "budget", "stats", "job",
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


class DescriptionDetailOutputSerializer(DescriptionOutputSerializer):
    versions = DescriptionVersionOutputSerializer(many=True, source="visible_versions",
                                                  help_text="annotators see no other reviewer's corrections; "
                                                            "auditors see the approved version alone")
    facts = FactOutputSerializer(many=True, help_text="D_r^H: the approved version's known facts (empty unless "
                                                      "approved)")
    raw_outputs = serializers.ListField(child=serializers.CharField(allow_blank=True), source="visible_raw_outputs",
                                        allow_null=True, help_text="the describer's raw text per attempt "
                                                                   "(managers only)")

    class Meta(DescriptionOutputSerializer.Meta):
        fields = [*DescriptionOutputSerializer.Meta.fields, "inputs", "versions", "facts", "raw_outputs"]


class DescriptionListApi(APIView):
    permission_classes = [IsStaffMember]

    class FilterSerializer(serializers.Serializer):
        pool = serializers.IntegerField(required=False)
        video = serializers.IntegerField(required=False)
        trajectory = serializers.IntegerField(required=False)
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

    @extend_schema(responses=DescriptionDetailOutputSerializer,
                   summary="One description: its versions, status and approved facts with their evidence")
    def get(self, request, description_id: int):
        description = selectors.description_get(description_id=description_id, viewer=request.user)
        return Response(DescriptionDetailOutputSerializer(description, context=_reader(request)).data)


# -- query-writer runs and queries -----------------------------------------------------------------
class GenerationRunListApi(ManagerWritesApi):
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

    class Meta:
        model = Query
        fields = ["id", "pool", "video", "target", "source_version", "run", "text", "predicates", "revision", "parent",
                  "status", "rejection_reason", "ratings", "created_by", "created_at"]
        extra_kwargs = {"ratings": {"required": False, "help_text": "the first reviewer's faithfulness and "
                                                                    "naturalness (not shown to auditors)"}}


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

    class FilterSerializer(serializers.Serializer):
        video = serializers.IntegerField(required=False)
        pool = serializers.IntegerField(required=False)
        status = serializers.ChoiceField(choices=Query.Status.choices, required=False)
        split = serializers.ChoiceField(choices=SPLITS, required=False)

    @extend_schema(parameters=[FilterSerializer], responses=QueryOutputSerializer(many=True),
                   summary="Queries with their predicates and status")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = selectors.query_list(video_id=f.get("video"), status=f.get("status"), split=f.get("split"),
                                  pool_id=f.get("pool"))
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
        revision = query_revise(query=selectors.query_get(query_id=query_id), revised_by=request.user, **data.validated_data)
        return Response(QueryOutputSerializer(revision).data, status=status.HTTP_201_CREATED)


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

    class FilterSerializer(serializers.Serializer):
        query = serializers.IntegerField(required=False)
        trajectory = serializers.IntegerField(required=False)
        label = serializers.ChoiceField(choices=[1, 0, -1], required=False, help_text="1, 0 or -1 (⊥)")
        stratum = serializers.CharField(required=False, max_length=24)
        pseudo = serializers.BooleanField(required=False, allow_null=True, default=None)
        split = serializers.ChoiceField(choices=SPLITS, required=False)

    @extend_schema(parameters=[FilterSerializer],
                   responses={200: RelationOutputSerializer(many=True), 400: ERROR, 403: ERROR},
                   summary="Verified relations (within and across videos; ⊥ included); auditors read them without "
                           "source, stratum, review item and evidence, and may not filter by stratum")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        selectors.hidden_filters_refuse(viewer=request.user, record="relation", filters=f)
        qs = selectors.relation_list(query_id=f.get("query"), trajectory_id=f.get("trajectory"),
                                     label=f.get("label"), stratum=f.get("stratum"), pseudo=f.get("pseudo"),
                                     split=f.get("split"))
        return paginate(qs, partial(RelationOutputSerializer, context=_reader(request)), request, self)


# -- mining and completeness -------------------------------------------------------------------------
class MiningRunOutputSerializer(serializers.ModelSerializer):
    job = JobSummaryOutputSerializer(allow_null=True)

    class Meta:
        model = MiningRun
        fields = ["id", "split", "config", "log", "job", "created_by", "created_at"]


class MiningRunListApi(ManagerWritesApi):
    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)
        config = serializers.DictField(required=False, allow_null=True,
                                       help_text="budgets, seed and thresholds (models.mining.MiningConfig) and "
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
    proposal = serializers.JSONField(source="visible_proposal", allow_null=True, required=False,
                                     help_text="the writer's proposal; null while the pair waits for its second "
                                               "review (not shown to auditors)")

    class Meta:
        model = CrossPair
        fields = ["id", "query", "trajectory", "stratum", "strata", "provenance", "similarity", "review", "label",
                  "created_at", "proposal"]
        extra_kwargs = {name: {"required": False} for name in ("stratum", "strata", "provenance", "similarity")}


class CrossPairListApi(APIView):
    permission_classes = [IsStaffMember]

    class FilterSerializer(serializers.Serializer):
        query = serializers.IntegerField(required=False)
        trajectory = serializers.IntegerField(required=False)
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
        qs = selectors.cross_pair_list(query_id=f.get("query"), stratum=f.get("stratum"), review=f.get("review"),
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


# -- pseudo-label rules ------------------------------------------------------------------------------
class PseudoRuleOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = PseudoLabelRule
        fields = ["id", "name", "rule", "rule_sha256", "declared_bound", "calibration", "calibrated_at", "accepted",
                  "created_by", "created_at"]


class PseudoRuleListApi(ManagerWritesApi):
    class InputSerializer(serializers.Serializer):
        rule = serializers.DictField(help_text="models.calibration.EasyNegativeRule: name, s_max, encoder, "
                                               "min_contradicted, strata, event_absence")
        declared_bound = serializers.FloatField(help_text="the largest acceptable error rate, declared before the "
                                                          "audit, in (0, 1)")

    @extend_schema(responses=PseudoRuleOutputSerializer(many=True), summary="Pseudo-label rules for easy negatives")
    def get(self, request):
        return paginate(selectors.pseudo_rule_list(), PseudoRuleOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: PseudoRuleOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Freeze a pseudo-label rule with its declared error bound (rules are never changed)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        rule = pseudo_rule_declare(created_by=request.user, **data.validated_data)
        return Response(PseudoRuleOutputSerializer(rule).data, status=status.HTTP_201_CREATED)


class PseudoRuleDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=PseudoRuleOutputSerializer, summary="One pseudo-label rule with its calibration")
    def get(self, request, rule_id: int):
        return Response(PseudoRuleOutputSerializer(selectors.pseudo_rule_get(rule_id=rule_id)).data)


class PseudoRuleCalibrateApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={200: PseudoRuleOutputSerializer, 409: ERROR},
                   summary="Audit the rule on the dev split's reviewed pairs, once: accepted only if the one-sided "
                           "95% Clopper-Pearson upper bound of its error rate is within the declared bound")
    def post(self, request, rule_id: int):
        rule = pseudo_rule_calibrate(rule_row=selectors.pseudo_rule_get(rule_id=rule_id))
        return Response(PseudoRuleOutputSerializer(rule).data)


class PseudoRuleApplyApi(APIView):
    permission_classes = [IsManager]

    class OutputSerializer(serializers.Serializer):
        considered = serializers.IntegerField(help_text="unreviewed mined train pairs")
        labelled = serializers.IntegerField(help_text="new pseudo-negatives (training only)")
        coverage = serializers.FloatField(required=False)
        calibration_coverage = serializers.FloatField(required=False)
        coverage_drift = serializers.FloatField(required=False)

    @extend_schema(request=None, responses={200: OutputSerializer, 409: ERROR},
                   summary="Label the train split's unreviewed mined pairs that an accepted rule selects as tagged "
                           "pseudo-negatives (idempotent)")
    def post(self, request, rule_id: int):
        counts = pseudo_labels_apply(rule_row=selectors.pseudo_rule_get(rule_id=rule_id))
        return Response(self.OutputSerializer(counts).data)


# -- snapshots -----------------------------------------------------------------------------------------
class SnapshotOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = RelationSnapshot
        fields = ["id", "split", "name", "content_sha256", "path", "pool_versions", "counts", "complete",
                  "sealed_at", "created_by", "created_at"]


class SnapshotDetailOutputSerializer(SnapshotOutputSerializer):
    n_relations = serializers.IntegerField()

    class Meta(SnapshotOutputSerializer.Meta):
        fields = [*SnapshotOutputSerializer.Meta.fields, "n_relations"]


class SnapshotListApi(ManagerWritesApi):
    class FilterSerializer(serializers.Serializer):
        split = serializers.ChoiceField(choices=SPLITS, required=False)

    class InputSerializer(serializers.Serializer):
        split = PlainChoiceField(choices=SPLITS)
        name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
        allow_incomplete = serializers.BooleanField(required=False, default=False,
                                                    help_text="take a dev/test snapshot that misses binary relations "
                                                              "(it is marked incomplete)")

    @extend_schema(parameters=[FilterSerializer], responses=SnapshotOutputSerializer(many=True),
                   summary="Relation snapshots (immutable)")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        return paginate(selectors.snapshot_list(split=f.get("split")), SnapshotOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={201: SnapshotOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Take an immutable, hashed snapshot of a split's verified relations (409 "
                           "incomplete_split with the completeness report when a dev/test split misses some)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        snapshot = relation_snapshot_create(created_by=request.user, **data.validated_data)
        return Response(SnapshotOutputSerializer(snapshot).data, status=status.HTTP_201_CREATED)


class SnapshotDetailApi(APIView):
    """Read only: a snapshot is never edited (PUT, PATCH and DELETE answer 405)."""

    permission_classes = [IsStaffMember]

    @extend_schema(responses=SnapshotDetailOutputSerializer,
                   summary="One snapshot: counts, pool versions, hash, folder and completeness")
    def get(self, request, snapshot_id: int):
        return Response(SnapshotDetailOutputSerializer(selectors.snapshot_get(snapshot_id=snapshot_id)).data)
