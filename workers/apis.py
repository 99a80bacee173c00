from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import IsStaffMember
from common.pagination import paginate
from workers.models import Job
from workers.selectors import job_list


class JobOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Job
        fields = ["id", "kind", "status", "progress", "message", "log_tail", "error", "params", "result",
                  "queue", "attempts", "worker", "created_at", "started_at", "finished_at", "updated_at"]


class JobSummaryOutputSerializer(serializers.ModelSerializer):
    """What anyone who may see a record learns of its job: no logs, errors or parameters."""

    class Meta:
        model = Job
        fields = ["id", "status", "progress", "message", "queue", "updated_at"]


class JobListApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(
        parameters=[OpenApiParameter("kind", str), OpenApiParameter("status", str)],
        responses=JobOutputSerializer(many=True), summary="List jobs",
    )
    def get(self, request):
        qs = job_list(user=request.user, kind=request.query_params.get("kind"), status=request.query_params.get("status"))
        return paginate(qs, JobOutputSerializer, request, self)


class JobDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=JobOutputSerializer, summary="One job with its progress and log tail")
    def get(self, request, job_id: int):
        job = get_object_or_404(job_list(user=request.user), pk=job_id)
        return Response(JobOutputSerializer(job).data)
