"""Agreement tallies: a panel stage's agreement figures kept as sums over its items, so the
agreement page reads the tallies instead of every vote (``annotation.models.agreement``). A trigger
logs every vote inserted from now on; the votes already stored are logged here and counted in."""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from annotation.curation.services.agreement_tallies import agreement_tallies_refresh
from common.db_triggers import inserts_logged

VOTES_LOGGED = inserts_logged("annotation_vote", name="agreement_pending", log="annotation_agreementpending",
                              columns={"vote_id": "id", "item_id": "item_id"})


def count_stored_votes(apps, schema_editor):
    schema_editor.execute("INSERT INTO annotation_agreementpending (vote_id, item_id) "
                          "SELECT id, item_id FROM annotation_vote ORDER BY id", params=None)
    agreement_tallies_refresh()


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0017_work_item_progress'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='AgreementPending',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('vote_id', models.BigIntegerField(db_index=True)),
                ('item_id', models.BigIntegerField()),
            ],
        ),
        migrations.CreateModel(
            name='AgreementTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(max_length=32)),
                ('split', models.CharField(blank=True, max_length=8)),
                ('kind', models.CharField(max_length=16)),
                ('key', models.BigIntegerField()),
                ('n', models.BigIntegerField(default=0)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('stage', 'split', 'kind', 'key'), name='agreement_tally_once')],
            },
        ),
        migrations.CreateModel(
            name='AgreementRaterTally',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('stage', models.CharField(max_length=32)),
                ('split', models.CharField(blank=True, max_length=8)),
                ('n_votes', models.BigIntegerField(default=0)),
                ('n_adjudication', models.BigIntegerField(default=0)),
                ('n_scored', models.BigIntegerField(default=0)),
                ('n_agree', models.BigIntegerField(default=0)),
                ('n_timed', models.BigIntegerField(default=0)),
                ('ms_total', models.BigIntegerField(default=0)),
                ('annotator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('stage', 'split', 'annotator'), name='agreement_rater_tally_once')],
            },
        ),
        VOTES_LOGGED.operation(),
        migrations.RunPython(count_stored_votes, migrations.RunPython.noop),
    ]
