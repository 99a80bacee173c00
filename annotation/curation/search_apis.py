"""The managers' item search: review items by stage, state, video, split, annotator, decision and
text (``annotation.curation.item_search``)."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from accounts.roles import IsManager
from annotation.benchmark.services.mining import SPLITS
from annotation.curation.item_search import work_item_search
from annotation.models import WorkItem
from common.pagination import Page, paginate
from common.params import id_field, query_filters

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
