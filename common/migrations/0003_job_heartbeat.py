"""A running job's heartbeat: the last time its worker was heard from (common.jobs.heartbeat)."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0002_job_table'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='heartbeat_at',
            field=models.DateTimeField(blank=True, help_text="the worker's last sign of life while the job ran (common.jobs.heartbeat)", null=True),
        ),
    ]
