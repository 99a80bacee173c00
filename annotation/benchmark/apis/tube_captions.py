"""Proposing annotated-tube captions as descriptions of the matched pool members (issue 14, item 2)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.benchmark.services.tube_captions import tube_captions_propose
from annotation.models import CandidatePool
from common.roles import IsManager
from common.schema import ERROR
from trajectories.models import TubeMatchReport


class TubeCaptionsProposeApi(APIView):
    permission_classes = [IsManager]

    class InputSerializer(serializers.Serializer):
        pool = serializers.PrimaryKeyRelatedField(queryset=CandidatePool.objects.all(),
                                                  help_text="the frozen pool of the report's video")

    class OutputSerializer(serializers.Serializer):
        run = serializers.IntegerField(help_text="the description run that records the proposals")
        proposed = serializers.IntegerField(help_text="descriptions proposed (each opens a review item)")
        kept_existing = serializers.IntegerField(help_text="matched members that already had a description")
        not_in_pool = serializers.IntegerField(help_text="raw positives that are not members of the pool")

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
                   summary="Propose the captions of a report's matched tubes as descriptions of their raw "
                           "positives in a frozen pool (model-side proposals that reviewers approve or correct)")
    def post(self, request, report_id: int):
        report = get_object_or_404(TubeMatchReport, pk=report_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        counts = tube_captions_propose(report=report, pool=data.validated_data["pool"], created_by=request.user)
        return Response(self.OutputSerializer(counts).data, status=status.HTTP_201_CREATED)
