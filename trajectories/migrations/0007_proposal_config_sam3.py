# The sam3 backend (SAM 3 concept-prompted tracking).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('trajectories', '0006_proposal_config_dnn_bytetrack'),
    ]

    operations = [
        migrations.AlterField(
            model_name='proposalconfig',
            name='backend',
            field=models.CharField(choices=[('hog-bytetrack', 'Hog Bytetrack'), ('dnn-bytetrack', 'Dnn Bytetrack'), ('sam2', 'Sam2'), ('sam3', 'Sam3'), ('imported', 'Imported')], max_length=32),
        ),
    ]
