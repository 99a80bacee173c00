"""Proposal configurations store their resolved settings, every default written out.

Before this, a configuration stored its settings as given and was resolved against the tracker's
defaults of the day when it ran. The CPU trackers' defaults changed twice (2681c9f: the detector
on every 2nd frame, Kalman boxes between, buffered matching; 6b40faa: HOG scans around motion),
so a configuration that relied on them ran with settings its ``config_hash`` does not describe.

Each ``hog-bytetrack`` and ``dnn-bytetrack`` configuration gets the defaults it was created
under, pinned. Which ones is read from its hash: the resolved settings of each set of defaults
below (with the keys that did not exist then left out) are hashed as they were at creation, and
the one that gives the stored ``config_hash`` wins. A configuration no set matches (a model file
that is no longer there) gets the oldest defaults, the ones that stood until 2026-12-06. The
settings are then stored resolved (``trajectories.services.proposals.stored_settings``) where they
resolve; otherwise the pinned keys alone are written. SAM 2 and SAM 3 defaults did not change.
"""
from django.db import migrations

from models.backends.tracking import resolve_tracker_settings
from trajectories.services.proposals import settings_hash, stored_settings

# HogPersonSettings fields added with the motion regions (6b40faa); before it HOG scanned every
# frame whole, which is regions "frame".
_REGION_KEYS = ("regions", "full_frame_every", "motion_downscale", "motion_var_threshold",
                "region_margin", "region_memory", "max_region_fraction")
# Earlier defaults, newest first: (tracker settings, HOG person regions or None, keys absent then).
_EVERY_FRAME = {"anchor_stride": 1, "between_anchors": "none", "match_buffer": 0.0}
# The appearance settings (1311ef3; off by default, which is how every tracker ran before them).
_APPEARANCE = ("appearance", "appearance_weight", "appearance_gate", "appearance_ema")
_EARLIER_DEFAULTS = {
    "hog-bytetrack": [
        ({}, None, _APPEARANCE),                                                                 # 6b40faa
        ({"anchor_stride": 2, "between_anchors": "kalman", "match_buffer": 0.3}, "frame", _APPEARANCE),  # 2681c9f
        (_EVERY_FRAME, "frame", ("between_anchors", "match_buffer", *_APPEARANCE)),              # before it
    ],
    "dnn-bytetrack": [
        ({}, None, _APPEARANCE),                                                                 # 2681c9f
        (_EVERY_FRAME, None, ("between_anchors", "match_buffer", *_APPEARANCE)),                 # before 2681c9f
    ],
}


def _pinned(config, defaults: dict, person_regions: str | None) -> tuple[dict, dict]:
    """``(tracker_settings, detector_settings)`` with ``defaults`` for every key not given."""
    given = {**config.tracker_settings, **config.anchor_policy}
    tracker = {**{k: v for k, v in defaults.items() if k not in given}, **config.tracker_settings}
    detectors = config.detector_settings
    if not detectors and person_regions is not None:  # the default detectors, HOG as it scanned then
        detectors = resolve_tracker_settings(config.backend, categories=config.categories)["detectors"]
        detectors = {**detectors, "person": {**detectors["person"], "regions": person_regions}}
    return tracker, detectors


def _resolve(config, tracker: dict, detectors: dict) -> dict:
    return resolve_tracker_settings(
        config.backend, categories=config.categories, checkpoint_path=config.checkpoint_path,
        model_config_path=config.model_config_path, anchor_policy=config.anchor_policy,
        detector_settings=detectors, tracker_settings=tracker)


def _created_under(config, resolved: dict, absent: tuple[str, ...], old_hog: bool) -> bool:
    """Whether ``resolved``, with the keys of its day only, hashes to the stored ``config_hash``."""
    then = {k: v for k, v in resolved.items() if k not in absent}
    if old_hog and not config.detector_settings:
        person = {k: v for k, v in then["detectors"]["person"].items() if k not in _REGION_KEYS}
        then["detectors"] = {**then["detectors"], "person": person}
    digest, _ = settings_hash(backend=config.backend, categories=config.categories, resolved=then,
                              software=config.software)
    return digest == config.config_hash


def pin_defaults(apps, schema_editor):
    ProposalConfig = apps.get_model("trajectories", "ProposalConfig")
    for config in ProposalConfig.objects.filter(backend__in=list(_EARLIER_DEFAULTS)).order_by("pk"):
        choices = [({}, None, ()), *_EARLIER_DEFAULTS[config.backend]]  # today's defaults first
        chosen, resolved = choices[-1], None
        for defaults, regions, absent in choices:
            try:
                candidate = _resolve(config, *_pinned(config, defaults, regions))
                if _created_under(config, candidate, absent, old_hog=regions is not None):
                    chosen, resolved = (defaults, regions, absent), candidate
                    break
            except (ValueError, TypeError, OSError, KeyError):  # TrackerConfigError is a ValueError
                continue
        tracker, detectors = _pinned(config, chosen[0], None)
        if resolved is None:
            try:
                resolved = _resolve(config, *_pinned(config, chosen[0], chosen[1]))
            except (ValueError, TypeError, OSError, KeyError):
                pass
        if resolved is not None:
            config.anchor_policy, detectors, tracker = stored_settings(
                config.backend, resolved, anchor_policy=config.anchor_policy)
        elif chosen[1] is not None and not detectors:
            detectors = {"person": {"regions": chosen[1]}}
        config.tracker_settings, config.detector_settings = tracker, detectors
        config.save(update_fields=["anchor_policy", "tracker_settings", "detector_settings"])


class Migration(migrations.Migration):

    dependencies = [
        ("trajectories", "0009_track_import_cvat_labelstudio"),
    ]

    operations = [
        migrations.RunPython(pin_defaults, migrations.RunPython.noop),
    ]
