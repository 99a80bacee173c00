"""Evaluation runs store the retrieval pipeline they ran; a trained run is evaluated once per
snapshot and pipeline."""
from django.db import migrations, models
from django.db.models import Q


class Migration(migrations.Migration):

    dependencies = [
        ('workers', '0005_experiments'),
    ]

    operations = [
        migrations.AddField(
            model_name='evaluationrun',
            name='pipeline',
            field=models.JSONField(blank=True, default=dict, help_text='the retrieval pipeline evaluated (models.retrievers.pipeline.RetrievalPipeline as JSON); empty: plain dense retrieval'),
        ),
        migrations.AddField(
            model_name='evaluationrun',
            name='pipeline_sha256',
            field=models.CharField(blank=True, default='', help_text="SHA-256 of the pipeline's canonical JSON; empty without one", max_length=64),
        ),
        migrations.RemoveConstraint(
            model_name='evaluationrun',
            name='evaluation_run_trained_once_per_snapshot',
        ),
        migrations.AddConstraint(
            model_name='evaluationrun',
            constraint=models.UniqueConstraint(condition=Q(kind='trained'), fields=('training_run', 'snapshot', 'pipeline_sha256'), name='evaluation_run_trained_once_per_pipeline'),
        ),
    ]
