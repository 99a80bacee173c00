# The dnn-bytetrack backend (an OpenCV DNN COCO detector linked by ByteTrack).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('trajectories', '0005_imported_runs_and_tube_reports'),
    ]

    operations = [
        migrations.AlterField(
            model_name='proposalconfig',
            name='backend',
            field=models.CharField(choices=[('hog-bytetrack', 'Hog Bytetrack'), ('dnn-bytetrack', 'Dnn Bytetrack'), ('sam2', 'Sam2'), ('imported', 'Imported')], max_length=32),
        ),
    ]
