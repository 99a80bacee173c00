"""Job moves to ``common`` (state only: ``common.0001`` took over the table, ``common.0002`` renames
it); training and evaluation runs become ``common.models.QueuedRun``s and gain ``retries`` (and an
evaluation run ``cancel_requested`` and ``started_at``, filled from its job)."""
import django.db.models.deletion
from django.db import migrations, models

from common.jobs.migration_ops import backfill_runs_from_jobs


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0008_runs_queued_run'),
        ('common', '0001_initial'),
        ('trajectories', '0003_proposal_run_queued_run'),
        ('workers', '0002_training_runs'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='trainingrun', name='job',
                    field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                               related_name='%(class)s', to='common.job'),
                ),
                migrations.AlterField(
                    model_name='evaluationrun', name='job',
                    field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                               related_name='%(class)s', to='common.job'),
                ),
                migrations.DeleteModel(name='Job'),
            ],
        ),
        migrations.AddField(
            model_name='trainingrun', name='retries',
            field=models.PositiveIntegerField(default=0, help_text='times a person queued the run again'),
        ),
        migrations.AddField(
            model_name='evaluationrun', name='retries',
            field=models.PositiveIntegerField(default=0, help_text='times a person queued the run again'),
        ),
        migrations.AddField(
            model_name='evaluationrun', name='cancel_requested', field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='evaluationrun', name='started_at', field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='trainingrun', name='config',
            field=models.JSONField(help_text="models.training.trainer.TrainConfig with the model's config under 'model'"),
        ),
        backfill_runs_from_jobs('workers', ['EvaluationRun'], ['started_at']),
    ]
