from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import RelationSnapshot
from common.jobs.apis import JobSummaryOutputSerializer
from common.pagination import Page, paginate
from common.params import flag_field, id_field, int_param, query_filters
from common.roles import IsManager, IsStaffMember, ManagerPathsSerializer, ManagerWritesStaffReads
from common.schema import PlainChoiceField
from workers.evaluation import evaluation_run_create
from workers.models import EvaluationRun, RunStatus, TrainingRun
from workers.search import MODES, search
from workers.selectors import (
    evaluation_run_get,
    evaluation_run_list,
    training_run_get,
    training_run_list,
    training_step_series,
)
from workers.training import training_run_cancel, training_run_create

# -- training runs, evaluation runs, search ------------------------------------------------------------
PIPELINE_HELP = ('a retrieval pipeline (models.retrievers.pipeline.RetrievalPipeline), e.g. {"retrievers": '
                 '["dense", "rewrite"], "fusion": "dual_view", "top_k": 100, "shortlist": 10, "reranker": '
                 '"pairwise", "comparator": {"kind": "scorer", "backend": "heuristic"}}; an unknown stage or '
                 'weights that do not sum to 1 are a 400.')
ERROR = OpenApiTypes.OBJECT  # {code, message, extra}
RUN_STATUSES = ", ".join(RunStatus.values)


class ManagerWritesApi(APIView):
    """Managers write (POST); every staff member reads."""

    permission_classes = [ManagerWritesStaffReads]


STAMPS_HELP = ("how the figures must be read: train-split (evaluated on training data), incomplete (a dev/test "
               "snapshot with non-binary gallery relations); empty: a clean held-out evaluation")
ALLOW_TRAIN_SPLIT_HELP = ("evaluate on training data anyway (a train-split snapshot or the training snapshot itself); "
                          "the figures are stamped train-split")
ALLOW_INCOMPLETE_HELP = "evaluate on an incomplete dev/test snapshot anyway; the figures are stamped incomplete"


class TrainingRunOutputSerializer(ManagerPathsSerializer):
    manager_only = ("out_dir", "checkpoint_key")
    status = serializers.CharField(help_text=f"One of: {RUN_STATUSES}.")
    job = JobSummaryOutputSerializer(allow_null=True)
    progress = serializers.SerializerMethodField(help_text="steps done / steps in all")
    evaluation = serializers.SerializerMethodField(help_text="the run's final evaluation run, once it has one")
    eval_stamps = serializers.ListField(child=serializers.CharField(), read_only=True, help_text=STAMPS_HELP)

    class Meta:
        model = TrainingRun
        fields = ["id", "snapshot", "eval_snapshot", "model_kind", "config", "launch", "status", "progress",
                  "steps_total", "steps_done", "resumes", "cancel_requested", "result", "metrics", "eval_stamps",
                  "defaults_version",
                  "evaluation", "checkpoint_key", "checkpoint_step", "checkpoint_sha256",
                  "error", "out_dir", "job", "created_by", "created_at", "started_at", "finished_at", "updated_at"]

    def get_progress(self, run: TrainingRun) -> float:
        return run.steps_done / run.steps_total if run.steps_total else 0.0

    def get_evaluation(self, run: TrainingRun) -> int | None:
        if run.status != RunStatus.SUCCEEDED:
            return None
        ev = run.evaluations.filter(kind=EvaluationRun.Kind.TRAINED, pipeline_sha256="",
                                    snapshot_id=run.eval_snapshot_id or run.snapshot_id).first()
        return ev.pk if ev else None


class TrainingRunDetailOutputSerializer(TrainingRunOutputSerializer):
    series = serializers.SerializerMethodField(
        help_text="per-step columns from step after+1: step, attempt, loss, its parts, lr, positives, negatives, "
                  "cross_video_positives, cross_video_negatives, zero_neg_row_rate, zero_neg_col_rate, ...")

    class Meta(TrainingRunOutputSerializer.Meta):
        fields = [*TrainingRunOutputSerializer.Meta.fields, "series"]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_series(self, run: TrainingRun) -> dict:
        return training_step_series(run=run, after=self.context.get("after", 0))


class TrainingRunListApi(ManagerWritesApi):
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        status = serializers.CharField(required=False, max_length=16)
        model_kind = serializers.CharField(required=False, max_length=32)
        snapshot = id_field(required=False)

    class InputSerializer(serializers.Serializer):
        snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(),
                                                      help_text="a sealed relation snapshot to train on")
        model_kind = serializers.CharField(max_length=32, help_text="vtrajembed, scout or actpair")
        config = serializers.JSONField(required=False, default=dict,
                                       help_text="TrainConfig keys (steps, batch_size, lr, seed, checkpoint_every, "
                                                 "batching, model, ...) plus nproc_per_node and launcher; steps, "
                                                 "warmup_steps and checkpoint_every at most 10000000, batch_size at "
                                                 "most 65536, seed in 0..4294967295")
        eval_snapshot = serializers.PrimaryKeyRelatedField(
            queryset=RelationSnapshot.objects.all(), required=False, allow_null=True,
            help_text="evaluated at the end (a dev or test snapshot); default: the training snapshot, which needs "
                      "allow_train_split")
        allow_train_split = flag_field(required=False, default=False, help_text=ALLOW_TRAIN_SPLIT_HELP)
        allow_incomplete = flag_field(required=False, default=False, help_text=ALLOW_INCOMPLETE_HELP)

    @extend_schema(parameters=[FilterSerializer], responses=TrainingRunOutputSerializer(many=True),
                   summary="Training runs, newest first")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = training_run_list(status=f.get("status"), model_kind=f.get("model_kind"), snapshot_id=f.get("snapshot"))
        return paginate(qs, TrainingRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer, responses={202: TrainingRunOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Train a retriever on a sealed snapshot (queued on the gpu queue; follow the run)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run = training_run_create(created_by=request.user, **data.validated_data)
        return Response(TrainingRunOutputSerializer(run, context={"request": request}).data,
                        status=status.HTTP_202_ACCEPTED)


class TrainingRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(parameters=[OpenApiParameter("after", int, description="only steps after this one (live curves)")],
                   responses=TrainingRunDetailOutputSerializer,
                   summary="One training run: status, progress, config, per-step series and final metrics")
    def get(self, request, run_id: int):
        after = int_param(request, "after", 0)
        run = training_run_get(run_id=run_id)
        return Response(TrainingRunDetailOutputSerializer(run, context={"after": max(after, 0), "request": request}).data)


class TrainingRunCancelApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={200: TrainingRunOutputSerializer, 409: ERROR},
                   summary="Cancel a training run (a running one stops after a checkpoint)")
    def post(self, request, run_id: int):
        run = training_run_cancel(run=training_run_get(run_id=run_id), user=request.user)
        return Response(TrainingRunOutputSerializer(run, context={"request": request}).data)


class EvaluationRunOutputSerializer(serializers.ModelSerializer):
    kind = serializers.CharField(help_text="One of: trained, untrained, random.")
    status = serializers.CharField(help_text=f"One of: {RUN_STATUSES}.")
    job = JobSummaryOutputSerializer(allow_null=True)
    stamps = serializers.ListField(child=serializers.CharField(), read_only=True, help_text=STAMPS_HELP)

    class Meta:
        model = EvaluationRun
        fields = ["id", "kind", "training_run", "snapshot", "model_kind", "config", "pipeline", "pipeline_sha256",
                  "status", "metrics", "stamps", "defaults_version", "error",
                  "job", "created_by", "created_at", "finished_at", "updated_at"]


class EvaluationRunListApi(ManagerWritesApi):
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        kind = serializers.CharField(required=False, max_length=16)
        training_run = id_field(required=False)
        snapshot = id_field(required=False)

    class InputSerializer(serializers.Serializer):
        snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(),
                                                      help_text="a sealed relation snapshot to evaluate on")
        kind = serializers.CharField(required=False, default="trained", max_length=16,
                                     help_text="trained (a succeeded training run), untrained (a model kind's initial "
                                               "weights) or random (the exact random baseline)")
        training_run = serializers.PrimaryKeyRelatedField(queryset=TrainingRun.objects.all(), required=False,
                                                          allow_null=True)
        model_kind = serializers.CharField(required=False, allow_blank=True, max_length=32,
                                           help_text="untrained: vtrajembed, scout or actpair")
        config = serializers.JSONField(required=False, default=dict, help_text='untrained: {"model": {...}, "seed": 0}')
        allow_train_split = flag_field(required=False, default=False, help_text=ALLOW_TRAIN_SPLIT_HELP)
        allow_incomplete = flag_field(required=False, default=False, help_text=ALLOW_INCOMPLETE_HELP)
        pipeline = serializers.JSONField(required=False, default=None, allow_null=True, help_text=PIPELINE_HELP)

    @extend_schema(parameters=[FilterSerializer], responses=EvaluationRunOutputSerializer(many=True),
                   summary="Evaluation runs, newest first")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = evaluation_run_list(kind=f.get("kind"), training_run_id=f.get("training_run"),
                                 snapshot_id=f.get("snapshot"))
        return paginate(qs, EvaluationRunOutputSerializer, request, self)

    @extend_schema(request=InputSerializer,
                   responses={200: EvaluationRunOutputSerializer, 201: EvaluationRunOutputSerializer,
                              202: EvaluationRunOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Evaluate a succeeded training run, an untrained model or the random baseline on a "
                           "snapshot (202 queued; 201 computed at once; 200 the existing evaluation)")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run, created = evaluation_run_create(created_by=request.user, **data.validated_data)
        code = status.HTTP_200_OK if not created else (
            status.HTTP_201_CREATED if run.status == RunStatus.SUCCEEDED else status.HTTP_202_ACCEPTED)
        return Response(EvaluationRunOutputSerializer(run).data, status=code)


class EvaluationRunDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=EvaluationRunOutputSerializer, summary="One evaluation run with its metrics")
    def get(self, request, run_id: int):
        return Response(EvaluationRunOutputSerializer(evaluation_run_get(run_id=run_id)).data)


class SearchHitSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    trajectory = serializers.IntegerField(help_text="trajectory id (video level: the video's best trajectory)")
    video = serializers.IntegerField()
    score = serializers.FloatField(help_text="cosine similarity, or the CombSUM score when runs are fused")
    description = serializers.CharField(required=False, help_text="what the reranker compared (rerank only)")
    description_source = PlainChoiceField(choices=("describer", "approved"), required=False,
                                          help_text="describer: the describer's reading of the trajectory's pixels; "
                                                    "approved: its approved description (catalogue mode only).")


class SearchOutputSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    snapshot = serializers.IntegerField()
    level = serializers.CharField()
    k = serializers.IntegerField()
    text = serializers.CharField()
    mode = PlainChoiceField(choices=MODES, help_text="retrieval (model-side inputs only) or catalogue.")
    fused_runs = serializers.ListField(child=serializers.IntegerField())
    score = serializers.CharField(help_text="cosine or combsum")
    reranked = serializers.BooleanField()
    comparator_calls = serializers.IntegerField(help_text="pivot-promote comparisons made by the reranker")
    pipeline = serializers.JSONField(help_text="the retrieval pipeline that ran, every default filled in")
    report = serializers.JSONField(help_text="the pipeline's report: comparator and scorer requests, invalid "
                                             "answers, rewrite requests, stage timings (seconds)")
    results = SearchHitSerializer(many=True)
    timing_ms = serializers.DictField(child=serializers.FloatField(), help_text="load, encode, search, rerank, total")


class SearchApi(APIView):
    permission_classes = [IsStaffMember]

    class InputSerializer(serializers.Serializer):
        run = serializers.PrimaryKeyRelatedField(queryset=TrainingRun.objects.all(),
                                                 help_text="a succeeded training run")
        snapshot = serializers.PrimaryKeyRelatedField(queryset=RelationSnapshot.objects.all(), required=False,
                                                      allow_null=True,
                                                      help_text="default: the run's evaluation snapshot")
        text = serializers.CharField(max_length=1000)
        k = serializers.IntegerField(required=False, default=10, min_value=1, max_value=1000)
        level = serializers.CharField(required=False, default="trajectory", help_text="trajectory or video")
        fuse_with = serializers.ListField(child=serializers.PrimaryKeyRelatedField(queryset=TrainingRun.objects.all()),
                                          required=False, default=list,
                                          help_text="other succeeded runs fused with CombSUM")
        rerank = flag_field(required=False, default=False,
                            help_text="pivot-promote the top 10 with the run's trained pairwise head (an ActPair run "
                                      "trained with pairwise.enabled), otherwise by the similarity of the describer's "
                                      "descriptions (read from the trajectories' pixels) to the text.")
        pipeline = serializers.JSONField(required=False, default=None, allow_null=True,
                                         help_text=PIPELINE_HELP + " Instead of fuse_with and rerank.")
        mode = PlainChoiceField(choices=MODES, required=False, default="retrieval",
                                help_text="retrieval (default): every stage reads model-side inputs only (pixels, "
                                          "boxes, model outputs, the text), as evaluation does. catalogue: browse "
                                          "the approved catalogue: the top 10 are always reranked by the "
                                          "trajectories' approved human descriptions; for people, never for "
                                          "evaluation.")

    @extend_schema(request=InputSerializer, responses={200: SearchOutputSerializer, 400: ERROR, 409: ERROR},
                   summary="Rank a snapshot's trajectories or videos for a text with a trained retriever",
                   description="The default mode is leak-free: nothing people approved (descriptions, "
                               "facts, predicates, votes, relation labels) reaches the ranking. mode=catalogue "
                               "browses the approved descriptions instead and is never used by evaluation.")
    def post(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(SearchOutputSerializer(search(**data.validated_data)).data)
