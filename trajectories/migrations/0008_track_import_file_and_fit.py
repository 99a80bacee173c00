"""Track imports keep their file until a job stores its tracks, and the fit findings the importer
confirmed. Captions stored before text was checked (a JSON escape ``"\\ud800"`` parses to a lone
surrogate, which SQLite's JSON text kept and no JSON answer can write) are repaired: a lone surrogate
becomes U+FFFD and a NUL is dropped."""
from django.db import migrations, models


def _repaired(text: str) -> str:
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text).replace("\x00", "")


def repair_captions(apps, schema_editor):
    TrackImport = apps.get_model("trajectories", "TrackImport")
    for pk, captions in TrackImport.objects.values_list("pk", "captions").iterator():
        if not isinstance(captions, dict):
            continue
        fixed = {_repaired(str(k)): _repaired(v) if isinstance(v, str) else v for k, v in captions.items()}
        if fixed != captions:
            TrackImport.objects.filter(pk=pk).update(captions=fixed)


class Migration(migrations.Migration):

    dependencies = [
        ("trajectories", "0007_proposal_config_sam3"),
    ]

    operations = [
        migrations.AddField(
            model_name="trackimport",
            name="data",
            field=models.BinaryField(blank=True, default=b""),
        ),
        migrations.AddField(
            model_name="trackimport",
            name="fit_findings",
            field=models.JSONField(blank=True, default=list,
                                   help_text="what the fit check found and the importer confirmed (models.tracks_io.fit)"),
        ),
        migrations.RunPython(repair_captions, migrations.RunPython.noop),
    ]
