"""Clean-truth tubes beside their matched proposals (seed 002, D.1).

An annotated tube matched to a proposal was kept only inside its report's JSON; each
identity-checked raw positive now gets a row linking the tube (the clean ground truth, its
event-limited boxes) to the proposal (its full tracker extent), with the pair's overlap figures.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('trajectories', '0010_proposal_config_settings_pinned'),
    ]

    operations = [
        migrations.CreateModel(
            name='CleanTruthTube',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('caption', models.TextField(blank=True, help_text="the source's caption of the tube, if any")),
                ('max_iou', models.FloatField(help_text="maxIoU_b(r) over the tube's annotated frames")),
                ('coverage', models.FloatField(help_text='C_tau(r): share of annotated frames with IoU >= tau')),
                ('mean_iou', models.FloatField(help_text="meanIoU_b(r) over the tube's annotated frames")),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('report', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='clean_truth', to='trajectories.tubematchreport')),
                ('trajectory', models.ForeignKey(help_text='the matched proposal (an identity-checked raw positive)', on_delete=django.db.models.deletion.CASCADE, related_name='clean_truth', to='trajectories.trajectory')),
                ('tube', models.ForeignKey(help_text="the annotated tube (a trajectory of the report's tubes run)", on_delete=django.db.models.deletion.PROTECT, related_name='clean_truth_links', to='trajectories.trajectory')),
                ('video', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='trajectories.video')),
            ],
            options={
                'ordering': ['report_id', 'tube_id', 'trajectory_id'],
                'constraints': [models.UniqueConstraint(fields=('report', 'tube', 'trajectory'), name='clean_truth_once_per_pair'), models.CheckConstraint(condition=models.Q(('tube', models.F('trajectory')), _negated=True), name='clean_truth_two_trajectories'), models.CheckConstraint(condition=models.Q(('coverage__gte', 0), ('coverage__lte', 1), ('mean_iou__gte', 0), ('mean_iou__lte', 1), ('max_iou__gt', 0), ('max_iou__lte', 1)), name='clean_truth_overlap_in_range')],
            },
        ),
    ]
