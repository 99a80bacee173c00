"""Job moves from ``workers`` to ``common`` with its data: a state-only create on the existing
``workers_job`` table (``workers.0003`` deletes it from the workers state once every foreign key is
repointed; ``common.0002`` renames the table to ``common_job``)."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('workers', '0002_training_runs'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Job',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(db_index=True, max_length=64)),
                        ('status', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], db_index=True, default='queued', max_length=16)),
                        ('progress', models.FloatField(default=0.0)),
                        ('message', models.CharField(blank=True, max_length=500)),
                        ('log_tail', models.TextField(blank=True)),
                        ('error', models.TextField(blank=True)),
                        ('params', models.JSONField(blank=True, default=dict)),
                        ('result', models.JSONField(blank=True, default=dict)),
                        ('queue', models.CharField(default='cpu', max_length=32)),
                        ('attempts', models.PositiveIntegerField(default=0)),
                        ('worker', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'ordering': ['-created_at', '-id'],
                        'db_table': 'workers_job',
                        'constraints': [models.CheckConstraint(condition=models.Q(('progress__gte', 0.0), ('progress__lte', 1.0)), name='job_progress_in_unit_interval')],
                    },
                ),
            ],
        ),
    ]
