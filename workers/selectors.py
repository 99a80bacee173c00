from django.db.models import QuerySet

from annotation.models import Description
from common.errors import NotFoundError
from workers.models import EvaluationRun, TrainingRun, TrainingStep


def training_run_list(*, status: str | None = None, model_kind: str | None = None,
                      snapshot_id: int | None = None) -> QuerySet[TrainingRun]:
    """Training runs, newest first (every staff member reads them: they hold no personal data)."""
    qs = TrainingRun.objects.select_related("job")
    if status:
        qs = qs.filter(status=status)
    if model_kind:
        qs = qs.filter(model_kind=model_kind)
    if snapshot_id:
        qs = qs.filter(snapshot_id=snapshot_id)
    return qs


def training_run_get(*, run_id: int) -> TrainingRun:
    run = training_run_list().filter(pk=run_id).first()
    if run is None:
        raise NotFoundError(f"training run {run_id} does not exist", code="not_found")
    return run


def evaluation_run_list(*, kind: str | None = None, training_run_id: int | None = None,
                        snapshot_id: int | None = None) -> QuerySet[EvaluationRun]:
    qs = EvaluationRun.objects.select_related("job")
    if kind:
        qs = qs.filter(kind=kind)
    if training_run_id:
        qs = qs.filter(training_run_id=training_run_id)
    if snapshot_id:
        qs = qs.filter(snapshot_id=snapshot_id)
    return qs


def evaluation_run_get(*, run_id: int) -> EvaluationRun:
    run = evaluation_run_list().filter(pk=run_id).first()
    if run is None:
        raise NotFoundError(f"evaluation run {run_id} does not exist", code="not_found")
    return run


def approved_description_texts(*, trajectory_ids: list[int]) -> dict[int, str]:
    """The approved description (``D_r^H``) of each trajectory that has one, as its appearance and
    motion sentences; the latest approval wins when a trajectory was described in several pools."""

    out: dict[int, str] = {}
    rows = (Description.objects.filter(trajectory_id__in=trajectory_ids, status=Description.Status.APPROVED)
            .select_related("approved_version").order_by("trajectory_id", "approved_version__created_at"))
    for d in rows:
        content = d.approved_version.content or {}
        text = " ".join(str(content.get(key) or "").strip() for key in ("appearance", "motion")).strip()
        if text:
            out[d.trajectory_id] = text
    return out


def training_step_series(*, run: TrainingRun, after: int = 0, limit: int = 5000) -> dict:
    """The per-step series of a run as columns (``{"step": [...], "loss": [...], ...}``) from step
    ``after + 1`` on, at most ``limit`` steps: what a live loss curve polls for."""
    records = list(TrainingStep.objects.filter(run=run, step__gt=after).order_by("step")
                   .values_list("step", "attempt", "record")[:limit])
    keys: list[str] = []
    for _, _, record in records:
        keys += [k for k in record if k not in keys and k != "step"]
    series: dict[str, list] = {"step": [s for s, _, _ in records], "attempt": [a for _, a, _ in records]}
    for key in keys:
        series[key] = [record.get(key) for _, _, record in records]
    return series
