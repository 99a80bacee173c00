"""Stable reviewer pseudonyms (a stored mapping, never edited or deleted) and the record of a
release published while an audit of its splits was unfinished."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from common.db_triggers import immutable_rows

TRIGGERS = immutable_rows("annotation_reviewerpseudonym", name="annotation_reviewer_pseudonym",
                          message="reviewer pseudonyms never change")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0009_truncate_refused'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='release',
            name='unfinished_audits',
            field=models.JSONField(blank=True, help_text='audits of the released splits with samples still unjudged when it was published anyway: [{id, split, n_samples, n_judged}] (null: none)', null=True),
        ),
        migrations.CreateModel(
            name='ReviewerPseudonym',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.PositiveIntegerField(help_text='the pseudonym is reviewer-<number, 4 digits>', unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('user', models.OneToOneField(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['number'],
                'constraints': [models.CheckConstraint(condition=models.Q(('number__gte', 1)), name='reviewer_pseudonym_number_positive')],
            },
        ),
        TRIGGERS.operation(),
    ]
