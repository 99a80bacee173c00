"""Alignment reports: candidate frozen text encoders of a snapshot ranked before training (SCOUT 5.2)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0012_description_dissent'),
        ('workers', '0006_evaluation_pipeline'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AlignmentReport',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('snapshot_sha256', models.CharField(max_length=64)),
                ('candidates', models.JSONField(help_text='{name: TextEncoderConfig} as validated')),
                ('params', models.JSONField(default=dict, help_text="k, alpha, folds, seed, pair count, the visual side, the encoders' names")),
                ('scores', models.JSONField(default=dict, help_text='{candidate: {mutual_knn, cka, ridge_r2}}')),
                ('rankings', models.JSONField(default=dict, help_text='{metric: candidates, most aligned first}')),
                ('ranking', models.JSONField(default=list, help_text='candidates by mutual k-NN, ties by CKA then ridge R²')),
                ('best', models.CharField(help_text='the first of ranking', max_length=200)),
                ('n_pairs', models.PositiveIntegerField()),
                ('code_version', models.JSONField(default=dict, help_text='the software that computed it')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('snapshot', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='alignment_reports', to='annotation.relationsnapshot')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('n_pairs__gte', 2)), name='alignment_report_has_pairs')],
            },
        ),
    ]
