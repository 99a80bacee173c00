"""Track imports read CVAT for video 1.1 XML and Label Studio video JSON beside MOT, JSON tubes and
CSV: two more formats, a longer format column, and the database's list of known formats with them."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("trajectories", "0008_track_import_file_and_fit"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="trackimport",
            name="track_import_format_known",
        ),
        migrations.AlterField(
            model_name="trackimport",
            name="format",
            field=models.CharField(choices=[("mot", "Mot"), ("json", "Json"), ("csv", "Csv"),
                                            ("cvat", "CVAT for video 1.1"), ("labelstudio", "Label Studio video")],
                                   max_length=16),
        ),
        migrations.AddConstraint(
            model_name="trackimport",
            constraint=models.CheckConstraint(
                condition=models.Q(("format__in", ["mot", "json", "csv", "cvat", "labelstudio"])),
                name="track_import_format_known"),
        ),
    ]
