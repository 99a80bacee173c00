"""Recording a model-in-the-loop run over frozen pools: its settings, its job, its queued task."""
from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from annotation.benchmark.backends import RunSettings
from annotation.models import CandidatePool
from common.errors import ApplicationError, ConflictError
from common.jobs.services import job_create


def frozen_pools_check(pools: list[CandidatePool], *, purpose: str) -> None:
    """Refuse an empty list (400 ``no_pools``), a pool that is not frozen (409 ``pool_not_frozen``) or
    one a newer version replaced (409 ``pool_superseded``)."""
    if not pools:
        raise ApplicationError("name at least one frozen pool", code="no_pools")
    unfrozen = [p.pk for p in pools if p.frozen_at is None]
    if unfrozen:
        raise ConflictError(f"pools {unfrozen} are not frozen; {purpose} frozen pools only", code="pool_not_frozen")
    replaced = list(CandidatePool.objects.filter(pk__in=[p.pk for p in pools], superseded_by__isnull=False)
                    .values_list("pk", flat=True))
    if replaced:
        raise ConflictError(f"pools {replaced} were replaced by newer versions; use the current ones",
                            code="pool_superseded")


def model_run_record(*, model, kind: str, pools: list[CandidatePool], settings: RunSettings, created_by,
                     task: Callable[[], object] | None):
    """Create the run row and its ``kind`` job in one transaction; queue ``task().delay(run.pk)``
    after commit when ``task`` is given (it returns the Celery task, imported late)."""
    with transaction.atomic():
        job = job_create(kind=kind, params={"pools": [p.pk for p in pools]}, created_by=created_by)
        run = model.objects.create(backend=settings.backend, prompt_version=settings.prompt_version,
                                   prompt_sha256=settings.prompt_sha256, budget=settings.budget, job=job,
                                   created_by=created_by)
        run.pools.set(pools)
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if task is not None:
            transaction.on_commit(lambda: task().delay(run.pk))
    return run
