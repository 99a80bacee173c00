"""The job table takes the common app's name, once every foreign key points at ``common.Job``; the
job's content type (and with it its permissions) moves to the common app too."""
from django.db import migrations


def move_content_type(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    if not content_type.objects.filter(app_label="common", model="job").exists():
        content_type.objects.filter(app_label="workers", model="job").update(app_label="common")


def move_content_type_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    if not content_type.objects.filter(app_label="workers", model="job").exists():
        content_type.objects.filter(app_label="common", model="job").update(app_label="workers")


class Migration(migrations.Migration):

    dependencies = [
        ('common', '0001_initial'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('workers', '0003_job_to_common'),
    ]

    operations = [
        migrations.AlterModelTable(name='job', table=None),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
