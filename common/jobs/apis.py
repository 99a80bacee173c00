"""The job endpoints: list and read jobs; cancel or retry the run of a job, whatever its kind."""
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from common.errors import ConflictError
from common.jobs.runs import job_run, run_cancel, run_retry
from common.jobs.selectors import job_list, job_runs
from common.jobs.sweep import jobs_sweep
from common.models import Job
from common.pagination import Page, paginate
from common.roles import IsManager, IsStaffMember

ERROR = OpenApiTypes.OBJECT  # {code, message, extra}


class JobRunRefSerializer(serializers.Serializer):
    """The run whose current job this is: what a cancel or a retry acts on."""

    kind = serializers.CharField(help_text="the run's model, e.g. proposalrun, trainingrun, miningrun")
    id = serializers.IntegerField()
    status = serializers.CharField(help_text="queued, running, succeeded, failed or cancelled")
    cancel_requested = serializers.BooleanField()


class JobOutputSerializer(serializers.ModelSerializer):
    queue_position = serializers.IntegerField(
        allow_null=True, read_only=True, default=None,
        help_text="queued: 1 + the queued jobs of its queue ahead of it; otherwise null")
    run = serializers.SerializerMethodField(help_text="the run behind the job (cancel and retry act on it); null for "
                                                      "a job without one, such as a video import")

    class Meta:
        model = Job
        fields = ["id", "kind", "status", "cancelled", "progress", "message", "log_tail", "error", "params", "result",
                  "queue", "queue_position", "attempts", "worker", "run", "retried_as", "created_at", "started_at",
                  "finished_at", "updated_at", "heartbeat_at"]

    @extend_schema_field(JobRunRefSerializer(allow_null=True))
    def get_run(self, job: Job) -> dict | None:
        runs = self.context.get("runs")
        if runs is None:
            runs = job_runs(jobs=[job])
        return runs.get(job.pk)


class JobSummaryOutputSerializer(serializers.ModelSerializer):
    """What anyone who may see a record learns of its job: no logs, errors or parameters."""

    class Meta:
        model = Job
        fields = ["id", "status", "progress", "message", "queue", "updated_at"]


class JobRunOutputSerializer(serializers.Serializer):
    """The run behind a job after a cancel or a retry."""

    kind = serializers.CharField(help_text="the run's model, e.g. proposalrun, trainingrun, miningrun")
    id = serializers.IntegerField()
    status = serializers.CharField(help_text="queued, running, succeeded, failed or cancelled")
    cancel_requested = serializers.BooleanField()
    retries = serializers.IntegerField()
    error = serializers.CharField()
    job = JobOutputSerializer(allow_null=True)


def _run_data(run) -> dict:
    return {"kind": run._meta.model_name, "id": run.pk, "status": run.status,
            "cancel_requested": run.cancel_requested, "retries": run.retries, "error": run.error, "job": run.job}


class JobListApi(APIView):
    permission_classes = [IsStaffMember]
    pagination_class = Page

    @extend_schema(
        parameters=[OpenApiParameter("kind", str), OpenApiParameter("status", str)],
        responses=JobOutputSerializer(many=True),
        summary="List jobs (a running job whose worker stopped beating is ended first: common.jobs.sweep)",
    )
    def get(self, request):
        jobs_sweep()  # the web's sweep: the list tells the truth even when every worker is gone
        qs = job_list(user=request.user, kind=request.query_params.get("kind"), status=request.query_params.get("status"))
        def page_of(jobs, many):
            return JobOutputSerializer(jobs, many=many, context={"runs": job_runs(jobs=jobs)})

        return paginate(qs, page_of, request, self)


class JobDetailApi(APIView):
    permission_classes = [IsStaffMember]

    @extend_schema(responses=JobOutputSerializer, summary="One job with its progress and log tail")
    def get(self, request, job_id: int):
        job = get_object_or_404(job_list(user=request.user), pk=job_id)
        return Response(JobOutputSerializer(job).data)


def _job_run_or_409(request, job_id: int):
    job = get_object_or_404(Job, pk=job_id)
    run = job_run(job=job)
    if run is None:
        raise ConflictError(f"job {job.pk} ({job.kind}) is not the current job of a run", code="job_has_no_run")
    return run


class JobCancelApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={200: JobRunOutputSerializer, 404: ERROR, 409: ERROR},
                   summary="Cancel the run of a job (a queued run at once, a running one at its next progress report)")
    def post(self, request, job_id: int):
        run = run_cancel(run=_job_run_or_409(request, job_id), by=request.user)
        return Response(JobRunOutputSerializer(_run_data(run)).data)


class JobRetryApi(APIView):
    permission_classes = [IsManager]

    @extend_schema(request=None, responses={202: JobRunOutputSerializer, 404: ERROR, 409: ERROR},
                   summary="Queue the failed or cancelled run of a job again (same run, a new job)")
    def post(self, request, job_id: int):
        run = run_retry(run=_job_run_or_409(request, job_id), by=request.user)
        return Response(JobRunOutputSerializer(_run_data(run)).data, status=status.HTTP_202_ACCEPTED)
