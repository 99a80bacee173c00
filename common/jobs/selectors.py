from django.db.models import Case, Count, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce

from common.errors import NotFoundError
from common.jobs.runs import queued_run_models
from common.models import Job
from common.roles import Role, user_has_role


def _queued_before(field: str = "id") -> Subquery:
    """Queued jobs of the same queue created before this one (by id), counted in the database."""
    ahead = (Job.objects.filter(status=Job.Status.QUEUED, queue=OuterRef("queue"), id__lt=OuterRef(field))
             .order_by().values("queue").annotate(n=Count("id")).values("n"))
    return Subquery(ahead, output_field=IntegerField())


def job_list(*, user, kind: str | None = None, status: str | None = None) -> QuerySet[Job]:
    """Managers see every job; everyone else sees the jobs they started. Each job carries
    ``queue_position``: for a queued job, 1 + the queued jobs of its queue created before it (the
    order the broker hands them out in); None otherwise."""
    qs = Job.objects.annotate(queue_position=Case(
        When(status=Job.Status.QUEUED, then=Coalesce(_queued_before(), Value(0)) + 1),
        default=None, output_field=IntegerField()))
    if not user_has_role(user, Role.MANAGER):
        qs = qs.filter(created_by=user)
    if kind:
        qs = qs.filter(kind=kind)
    if status:
        qs = qs.filter(status=status)
    return qs


def job_get(*, user, job_id: int) -> Job:
    job = job_list(user=user).filter(pk=job_id).first()
    if job is None:
        raise NotFoundError(f"job {job_id} does not exist", code="not_found")
    return job


def job_runs(*, jobs) -> dict[int, dict]:
    """{job id: {kind, id, status, cancel_requested}} of the runs whose current job is one of
    ``jobs`` (one query per run kind); a job without a run (a video import) is absent."""
    ids = [j.pk for j in jobs]
    out: dict[int, dict] = {}
    for model in queued_run_models():
        for pk, job, status, cancel in model.objects.filter(job_id__in=ids).values_list(
                "pk", "job_id", "status", "cancel_requested"):
            out[job] = {"kind": model._meta.model_name, "id": pk, "status": status, "cancel_requested": cancel}
    return out
