"""Recording a model-in-the-loop run over frozen pools: its settings, its job, its queued task."""
from __future__ import annotations

from collections.abc import Callable

from django.db import transaction

from annotation.benchmark.backends import RunSettings
from annotation.models import CandidatePool
from common.errors import ApplicationError, ConflictError
from common.jobs.runs import RunOutcome, run_enqueue, run_execute
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
                     queue: bool):
    """Create the run row and its ``kind`` job in one transaction; with ``queue``, its task is sent
    after commit (``common.jobs.runs.run_enqueue``)."""
    with transaction.atomic():
        job = job_create(kind=kind, params={"pools": [p.pk for p in pools]}, created_by=created_by)
        run = model.objects.create(backend=settings.backend, prompt_version=settings.prompt_version,
                                   prompt_sha256=settings.prompt_sha256, budget=settings.budget, job=job,
                                   created_by=created_by)
        run.pools.set(pools)
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if queue:
            run_enqueue(run=run)
    return run


def model_run_execute(*, run, execute: Callable[..., dict], echo=None) -> tuple[object, dict]:
    """Run a describer, query-writer or mining run's service ``execute(run=, reporter=)`` through
    the run lifecycle (``common.jobs.runs.run_execute``), in a task or inline; returns the run as it
    ended and the counts the service reported (empty when it did not finish)."""
    counts: dict = {}

    def body(run, reporter) -> RunOutcome:
        counts.update(execute(run=run, reporter=reporter))
        return RunOutcome(result=counts, message=", ".join(f"{k} {v}" for k, v in counts.items()
                                                           if isinstance(v, int))[:500] or "done")

    return run_execute(run, body, echo=echo), counts
