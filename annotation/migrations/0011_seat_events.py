"""Seat events: skips with their reasons, lapsed leases taken back, and managers' releases and
reassignments of seats; a record, never edited or deleted."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from common.db_triggers import immutable_rows

TRIGGERS = immutable_rows("annotation_seatevent", name="annotation_seat_event",
                          message="seat events are a record and never change")


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0010_reviewer_pseudonyms_and_publish_anyway'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='SeatEvent',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seat', models.PositiveSmallIntegerField()),
                ('kind', models.CharField(choices=[('skipped', 'Skipped'), ('expired', 'Expired'), ('released', 'Released'), ('reassigned', 'Reassigned')], max_length=16)),
                ('held_since', models.DateTimeField(help_text='when the holder claimed the seat')),
                ('reason', models.CharField(blank=True, max_length=200)),
                ('at', models.DateTimeField(auto_now_add=True)),
                ('by', models.ForeignKey(blank=True, help_text='the manager who released or reassigned it', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('holder', models.ForeignKey(help_text='who held the seat', on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('item', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='seat_events', to='annotation.workitem')),
                ('to', models.ForeignKey(blank=True, help_text='the annotator a reassigned seat went to', null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['item_id', 'at', 'id'],
                'indexes': [models.Index(fields=['holder', 'kind', 'at'], name='seat_event_by_holder')],
                'constraints': [models.CheckConstraint(condition=models.Q(models.Q(('by__isnull', False), ('kind', 'reassigned'), ('to__isnull', False)), models.Q(('by__isnull', False), ('kind', 'released'), ('to__isnull', True)), models.Q(('by__isnull', True), ('kind__in', ['skipped', 'expired']), ('to__isnull', True)), _connector='OR'), name='seat_event_actor_matches_kind')],
            },
        ),
        TRIGGERS.operation(),
    ]
