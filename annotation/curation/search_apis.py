"""The managers' reads of review: the item search by stage, state, video, split, annotator, decision
and text (``annotation.curation.item_search``), one item opened from it, and each proposal run's
review readiness."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark.services.mining import SPLITS
from annotation.curation.apis import TargetSerializer
from annotation.curation.item_search import work_item_search
from annotation.curation.selectors import run_review_readiness, work_item_for_manager
from annotation.models import WorkItem
from common.pagination import Page, paginate
from common.params import id_field, query_filters
from common.roles import IsManager
from trajectories.selectors import proposal_run_list

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}


class WorkItemFoundSerializer(serializers.ModelSerializer):
    split = serializers.CharField(source="video.split_group.split", help_text="the video's split")
    video_name = serializers.CharField(source="video.name")
    n_votes = serializers.IntegerField(help_text="votes cast so far, adjudication included")
    text = serializers.SerializerMethodField(help_text="the query's text (relation and pair items), else empty")

    class Meta:
        model = WorkItem
        fields = ["id", "stage", "state", "decision", "video", "video_name", "split", "trajectory", "query", "pair",
                  "n_votes", "panel_size", "text", "created_at", "decided_at"]

    def get_text(self, item: WorkItem) -> str:
        query = item.query or (item.pair.query if item.pair_id else None)
        return query.text if query is not None else ""


class WorkItemSearchApi(APIView):
    permission_classes = [IsManager]
    pagination_class = Page

    class FilterSerializer(serializers.Serializer):
        stage = serializers.ChoiceField(choices=WorkItem.Stage.choices, required=False)
        state = serializers.ChoiceField(choices=WorkItem.State.choices, required=False)
        video = id_field(required=False)
        split = serializers.ChoiceField(choices=SPLITS, required=False)
        annotator = serializers.CharField(required=False, max_length=150, help_text="a username: items they voted on")
        label = serializers.CharField(required=False, max_length=32, help_text="the decision, e.g. usable, same, 1")
        q = serializers.CharField(required=False, max_length=200,
                                  help_text="an item id, or words of its query's text or its video's name")

    @extend_schema(parameters=[FilterSerializer], responses={200: WorkItemFoundSerializer(many=True), 400: ERROR},
                   summary="Find review items (managers): by stage, state, video, split, annotator, decision, text")
    def get(self, request):
        f = query_filters(self.FilterSerializer, request)
        qs = work_item_search(stage=f.get("stage"), state=f.get("state"), video_id=f.get("video"),
                              split=f.get("split"), annotator=f.get("annotator"), label=f.get("label"), text=f.get("q"))
        return paginate(qs, WorkItemFoundSerializer, request, self)


class WorkItemOverviewSerializer(WorkItemFoundSerializer):
    """A found item opened on its own: its labels and what it shows its reviewers, still without
    anybody's vote."""

    labels = serializers.ListField(child=serializers.CharField())
    target = TargetSerializer(source="*")

    class Meta(WorkItemFoundSerializer.Meta):
        fields = [*WorkItemFoundSerializer.Meta.fields, "labels", "target"]


class WorkItemOverviewApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(responses={200: WorkItemOverviewSerializer, 403: ERROR, 404: ERROR},
                   summary="One review item (managers): its stage, state, decision, number of votes and target, "
                           "no one's label")
    def get(self, request, item_id: int):
        return Response(WorkItemOverviewSerializer(work_item_for_manager(item_id=item_id, viewer=request.user)).data)


class RunReadinessSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    items = serializers.IntegerField(help_text="its usability and duplicate review items")
    open = serializers.IntegerField(help_text="items still collecting panel votes")
    adjudicate = serializers.IntegerField(help_text="items waiting for an adjudicator")
    decided = serializers.IntegerField()
    unresolved = serializers.IntegerField(help_text="adjudicated without a majority (decided as far as a freeze goes)")
    ready = serializers.BooleanField(help_text="review is done: items exist and none is open or in adjudication, "
                                               "so its pool may be frozen")


class RunReadinessApi(APIView):
    permission_classes = [IsManager]
    pagination_class = Page

    @extend_schema(responses={200: RunReadinessSerializer(many=True), 400: ERROR, 403: ERROR},
                   summary="Each proposal run's review readiness (managers), in the proposal runs list's order: "
                           "items open, in adjudication, decided, and whether its pool may be frozen")
    def get(self, request):
        def readiness(runs, many=True, **_):
            rows = run_review_readiness(run_ids=[r.pk for r in runs])
            return RunReadinessSerializer([rows[r.pk] for r in runs], many=many)

        return paginate(proposal_run_list().select_related(None).only("id"), readiness, request, self)
