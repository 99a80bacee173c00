"""Recorded dissent: a description correction that lost to plain approvals of another version
(E.2), kept as a record that the database never lets change."""

import django.db.models.deletion
from django.db import migrations, models

from common.db_triggers import immutable_rows, truncate_refused

TRIGGERS = (immutable_rows("annotation_descriptiondissent", name="annotation_dissent",
                           message="recorded dissent is a record and never changes")
            + truncate_refused("annotation_descriptiondissent", name="annotation_dissent",
                               message="recorded dissent is never deleted"))


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0011_seat_events'),
    ]

    operations = [
        migrations.CreateModel(
            name='DescriptionDissent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('approved_version', models.ForeignKey(help_text='the version approved instead', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.descriptionversion')),
                ('correction', models.ForeignKey(help_text='the corrected version the dissenting reviewer approved', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.descriptionversion')),
                ('description', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='dissent', to='annotation.description')),
                ('item', models.ForeignKey(help_text='the review item whose approval the correction lost to', on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.workitem')),
                ('vote', models.OneToOneField(help_text='the usable_after_minor_correction vote that dissented', on_delete=django.db.models.deletion.PROTECT, related_name='dissent', to='annotation.vote')),
            ],
            options={
                'ordering': ['description_id', 'id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('correction', models.F('approved_version')), _negated=True), name='dissent_differs_from_approval')],
            },
        ),
        TRIGGERS.operation(),
    ]
