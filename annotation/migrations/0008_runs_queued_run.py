"""Describer, query-writer and mining runs become ``common.models.QueuedRun``s: their job points at
``common.Job`` (state only: same table) and becomes one-to-one, and each run gains its own status,
error, timestamps, cancel flag and retry count, filled from its job."""
import django.db.models.deletion
from django.db import migrations, models

from common.jobs.migration_ops import backfill_runs_from_jobs

RUN_STATUSES = [('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'),
                ('cancelled', 'Cancelled')]
RUNS = ['descriptionrun', 'generationrun', 'miningrun']


def _state_repoint(name):
    return migrations.AlterField(
        model_name=name, name='job',
        field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                related_name='+', to='common.job'))


def _queued_run_fields(name):
    return [
        migrations.AlterField(
            model_name=name, name='job',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                       related_name='%(class)s', to='common.job'),
        ),
        migrations.AddField(
            model_name=name, name='status',
            field=models.CharField(choices=RUN_STATUSES, db_index=True, default='queued', max_length=16),
        ),
        migrations.AddField(model_name=name, name='error', field=models.TextField(blank=True)),
        migrations.AddField(model_name=name, name='cancel_requested', field=models.BooleanField(default=False)),
        migrations.AddField(
            model_name=name, name='retries',
            field=models.PositiveIntegerField(default=0, help_text='times a person queued the run again'),
        ),
        migrations.AddField(model_name=name, name='started_at', field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(model_name=name, name='finished_at', field=models.DateTimeField(blank=True, null=True)),
    ]


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0007_release_immutability'),
        ('common', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(database_operations=[],
                                            state_operations=[_state_repoint(name) for name in RUNS]),
        *[op for name in RUNS for op in _queued_run_fields(name)],
        migrations.AlterField(
            model_name='crosspair', name='stratum',
            field=models.CharField(help_text='its highest-priority stratum (models.curation.mining.STRATA_PRIORITY)',
                                   max_length=24),
        ),
        backfill_runs_from_jobs('annotation', ['DescriptionRun', 'GenerationRun', 'MiningRun'],
                                ['status', 'error', 'started_at', 'finished_at']),
    ]
