"""A job says that its run was cancelled, and which job queued that run again (a retry)."""
from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0003_job_heartbeat'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='cancelled',
            field=models.BooleanField(default=False, help_text='it ended because its run was cancelled (its status is failed: a job has no cancelled state)'),
        ),
        migrations.AddField(
            model_name='job',
            name='retried_as',
            field=models.ForeignKey(blank=True, help_text='the job that queued the same run again once this one had ended (a retry)', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='common.job'),
        ),
    ]
