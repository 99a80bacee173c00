"""Migration operations for runs that became :class:`common.models.QueuedRun`s: fill the new
run columns from the run's Job (the record that held them before), in the migration that adds them."""
from __future__ import annotations

from django.db import migrations

#: Columns a run can take from its Job: the run's field -> how it is read from the Job.
_FROM_JOB = {
    "status": lambda job: job.status,
    "error": lambda job: job.error.split("\nTraceback (most recent call last):")[0].rstrip()[:10000],
    "started_at": lambda job: job.started_at,
    "finished_at": lambda job: job.finished_at,
}


def backfill_runs_from_jobs(app_label: str, model_names: list[str], fields: list[str]) -> migrations.RunPython:
    """A ``RunPython`` that copies ``fields`` (of ``status``, ``error``, ``started_at``,
    ``finished_at``) from each run's Job onto the run; runs without a Job keep their defaults.
    Reversing it does nothing (the columns go with the reversed ``AddField``)."""
    unknown = sorted(set(fields) - set(_FROM_JOB))
    if unknown:
        raise ValueError(f"cannot back-fill {unknown} from a job; known: {sorted(_FROM_JOB)}")

    def forward(apps, schema_editor):
        for name in model_names:
            model = apps.get_model(app_label, name)
            rows = list(model.objects.filter(job__isnull=False).select_related("job"))
            for run in rows:
                for f in fields:
                    setattr(run, f, _FROM_JOB[f](run.job))
            if rows:
                model.objects.bulk_update(rows, fields, batch_size=500)

    return migrations.RunPython(forward, migrations.RunPython.noop)
