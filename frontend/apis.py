"""Read endpoints of the web UI (``/api/ui/…``): summaries the screens show that no other app's
API offers. Everything else the UI does goes through the apps' own endpoints."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from common.roles import IsManager, IsStaffMember
from frontend import selectors


class QueueOutputSerializer(serializers.Serializer):
    stage = serializers.CharField()
    kind = serializers.ChoiceField(choices=["review", "adjudication"])
    available = serializers.IntegerField(help_text="items you can take now (counted up to a cap)")
    more = serializers.BooleanField(help_text="true when there are more than `available`")
    in_progress = serializers.IntegerField(allow_null=True, help_text="the item you hold and have not voted on")
    done = serializers.IntegerField(help_text="your votes in this queue")


class QueuesApi(APIView):
    permission_classes = [IsStaffMember]

    class OutputSerializer(serializers.Serializer):
        queues = QueueOutputSerializer(many=True)

    @extend_schema(responses=OutputSerializer, summary="Your queues: work waiting per task type")
    def get(self, request):
        return Response(self.OutputSerializer({"queues": selectors.annotator_queues(user=request.user)}).data)


class ProgressApi(APIView):
    permission_classes = [IsManager]

    class OutputSerializer(serializers.Serializer):
        splits = serializers.ListField(child=serializers.CharField())
        videos = serializers.DictField(child=serializers.IntegerField())
        proposal_runs = serializers.DictField(help_text="split -> status -> runs")
        review = serializers.DictField(help_text="stage -> split -> state -> items")
        pools = serializers.DictField(help_text="split -> {videos, videos_with_pool, pools}")

    @extend_schema(responses=OutputSerializer, summary="Pipeline progress per stage and split")
    def get(self, request):
        return Response(self.OutputSerializer(selectors.pipeline_progress()).data)
