from django.db.models import QuerySet

from accounts.roles import Role, user_has_role
from common.errors import NotFoundError
from common.models import Job


def job_list(*, user, kind: str | None = None, status: str | None = None) -> QuerySet[Job]:
    """Managers see every job; everyone else sees the jobs they started."""
    qs = Job.objects.all()
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
