"""ProposalRun becomes a ``common.models.QueuedRun``: its job points at ``common.Job`` (state only:
same table), becomes one-to-one, and the run gains ``cancel_requested``, ``retries`` and
``started_at`` (filled from its job)."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from common.jobs.migration_ops import backfill_runs_from_jobs

RUN_STATUSES = [('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed'),
                ('cancelled', 'Cancelled')]


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0001_initial'),
        ('trajectories', '0002_split_lock_trigger'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='proposalrun', name='job',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                            related_name='+', to='common.job'),
                ),
            ],
        ),
        migrations.AlterField(
            model_name='proposalrun', name='job',
            field=models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                       related_name='%(class)s', to='common.job'),
        ),
        migrations.AlterField(
            model_name='proposalrun', name='status',
            field=models.CharField(choices=RUN_STATUSES, db_index=True, default='queued', max_length=16),
        ),
        migrations.AlterField(
            model_name='proposalrun', name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                    related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='proposalrun', name='cancel_requested', field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='proposalrun', name='retries',
            field=models.PositiveIntegerField(default=0, help_text='times a person queued the run again'),
        ),
        migrations.AddField(
            model_name='proposalrun', name='started_at', field=models.DateTimeField(blank=True, null=True),
        ),
        backfill_runs_from_jobs('trajectories', ['ProposalRun'], ['started_at']),
    ]
