# Stamps on evaluation figures (train-split, incomplete), set for the runs already there.

from django.db import migrations, models


def _stamps(snapshot, training_snapshot_id):
    stamps = []
    if snapshot.split == "train" or snapshot.pk == training_snapshot_id:
        stamps.append("train-split")
    if snapshot.split in ("dev", "test") and not snapshot.complete:
        stamps.append("incomplete")
    return stamps


def stamp_existing(apps, schema_editor):
    TrainingRun = apps.get_model("workers", "TrainingRun")
    EvaluationRun = apps.get_model("workers", "EvaluationRun")
    for run in TrainingRun.objects.select_related("snapshot", "eval_snapshot").iterator():
        stamps = _stamps(run.eval_snapshot or run.snapshot, run.snapshot_id)
        if stamps:
            TrainingRun.objects.filter(pk=run.pk).update(eval_stamps=stamps)
    for run in EvaluationRun.objects.select_related("snapshot", "training_run").iterator():
        stamps = _stamps(run.snapshot, run.training_run.snapshot_id if run.training_run_id else None)
        if stamps:
            EvaluationRun.objects.filter(pk=run.pk).update(stamps=stamps)


class Migration(migrations.Migration):

    dependencies = [
        ('workers', '0003_job_to_common'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='stamps',
            field=models.JSONField(blank=True, default=list, help_text='train-split (evaluated on training data), incomplete (a dev/test snapshot with non-binary gallery relations); empty: a clean held-out evaluation'),
        ),
        migrations.AddField(
            model_name='trainingrun',
            name='eval_stamps',
            field=models.JSONField(blank=True, default=list, help_text="what the final evaluation's figures must be read with: train-split (evaluated on training data), incomplete (a dev/test snapshot with non-binary gallery relations)"),
        ),
        migrations.RunPython(stamp_existing, migrations.RunPython.noop),
    ]
