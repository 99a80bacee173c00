"""A proposal configuration stores its settings resolved, and the migration that pinned the
defaults of earlier configurations (trajectories 0010) keeps each running as its hash says."""
from __future__ import annotations

import dataclasses
import importlib

import pytest
from django.apps import apps

from models.backends.tracking import resolve_tracker_settings
from models.backends.tracking.hog_bytetrack import HogByteTrackConfig
from tests.trajectories.factories import config_factory
from trajectories.models import ProposalConfig
from trajectories.services.proposals import _tracker_for, proposal_config_create, settings_hash

pytestmark = pytest.mark.django_db
pinning = importlib.import_module("trajectories.migrations.0010_proposal_config_settings_pinned")
SOFTWARE = {"numpy": "1.0", "opencv-python-headless": "4.0", "supervision": "0.1"}
# the appearance settings (1311ef3), which no configuration of an earlier day had
APPEARANCE_KEYS = ("appearance", "appearance_weight", "appearance_gate", "appearance_ema")
REGION_KEYS = ("regions", "full_frame_every", "motion_downscale", "motion_var_threshold", "region_margin",
               "region_memory", "max_region_fraction")


def test_a_configuration_given_in_part_stores_every_setting():
    config = proposal_config_create(name="p", backend="hog-bytetrack", categories=["person"],
                                    anchor_policy={"anchor_stride": 3}, tracker_settings={"match_buffer": 0.1})
    fields = {f.name for f in dataclasses.fields(HogByteTrackConfig)}
    assert config.anchor_policy == {"anchor_stride": 3}
    assert set(config.tracker_settings) == fields - {"categories", "detectors", "anchor_stride"}
    assert config.tracker_settings["match_buffer"] == 0.1 and config.tracker_settings["between_anchors"] == "kalman"
    assert config.detector_settings["person"]["regions"] == "motion"
    # what is stored resolves to what was given, and hashes to the stored hash
    given = resolve_tracker_settings("hog-bytetrack", categories=["person"], anchor_policy={"anchor_stride": 3},
                                     tracker_settings={"match_buffer": 0.1})
    stored = resolve_tracker_settings("hog-bytetrack", categories=["person"], anchor_policy=config.anchor_policy,
                                      detector_settings=config.detector_settings,
                                      tracker_settings=config.tracker_settings)
    assert stored == given
    assert settings_hash(backend="hog-bytetrack", categories=["person"], resolved=stored,
                         software=config.software)[0] == config.config_hash
    # the same settings spelled out in full are the same record
    again = proposal_config_create(name="p", backend="hog-bytetrack", categories=["person"],
                                   anchor_policy=config.anchor_policy, detector_settings=config.detector_settings,
                                   tracker_settings=config.tracker_settings)
    assert again.pk == config.pk


def test_the_api_returns_the_resolved_settings_and_refuses_bad_ones(manager_client):
    r = manager_client.post("/api/proposal-configs/", {"name": "p", "backend": "hog-bytetrack", "categories": ["person"],
                                                        "tracker_settings": {"min_track_length": 5}}, format="json")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["tracker_settings"]["min_track_length"] == 5 and body["tracker_settings"]["anchor_stride"] == 2
    assert body["detector_settings"]["person"]["regions"] == "motion"
    for settings, words in (({"speed": 3}, "unknown key"), ({"match_buffer": 7}, "match_buffer"),
                            ({"anchor_stride": 0}, "anchor_stride")):
        r = manager_client.post("/api/proposal-configs/", {"name": "q", "backend": "hog-bytetrack",
                                                            "categories": ["person"], "tracker_settings": settings},
                                format="json")
        assert r.status_code == 400 and r.json()["code"] == "invalid_tracker_settings", r.content
        assert words in r.json()["message"]
    assert ProposalConfig.objects.count() == 1


def _as_created(tracker_settings: dict | None = None, *, anchor_policy: dict | None = None,
                day: str = "today", detector_settings: dict | None = None, **kw) -> ProposalConfig:
    """A hog-bytetrack configuration stored as given (the way configurations were stored before
    0010), its hash that of its settings resolved against the defaults of ``day``."""
    tracker_settings, anchor_policy = tracker_settings or {}, anchor_policy or {}
    given = {**tracker_settings, **anchor_policy}
    if day == "today":
        earlier, absent = {}, ()
    elif day == "2681c9f":
        earlier, absent = {"anchor_stride": 2, "between_anchors": "kalman", "match_buffer": 0.3}, APPEARANCE_KEYS
    else:
        earlier, absent = {"anchor_stride": 1}, ("between_anchors", "match_buffer", *APPEARANCE_KEYS)
    resolved = resolve_tracker_settings("hog-bytetrack", categories=["person"], anchor_policy=anchor_policy,
                                        detector_settings=detector_settings,
                                        tracker_settings={**{k: v for k, v in earlier.items() if k not in given},
                                                          **tracker_settings})
    resolved = {k: v for k, v in resolved.items() if k not in absent}
    if day != "today" and not detector_settings:  # HOG's person settings had no scan regions then
        person = {k: v for k, v in resolved["detectors"]["person"].items() if k not in REGION_KEYS}
        resolved["detectors"] = {**resolved["detectors"], "person": person}
    digest, _ = settings_hash(backend="hog-bytetrack", categories=["person"], resolved=resolved, software=SOFTWARE)
    return config_factory(tracker_settings=tracker_settings, anchor_policy=anchor_policy,
                          detector_settings=detector_settings or {}, software=SOFTWARE, config_hash=digest, **kw)


def _runs_with(config: ProposalConfig) -> HogByteTrackConfig:
    config.refresh_from_db()
    return _tracker_for(config).config


def test_configurations_created_under_earlier_defaults_keep_running_with_them():
    # given: configurations stored as given, created under each day's defaults
    oldest = _as_created(day="before 2681c9f")
    oldest_stride = _as_created(anchor_policy={"anchor_stride": 3}, day="before 2681c9f")
    middle = _as_created(day="2681c9f")
    today = _as_created({"min_track_length": 4})
    own_detector = _as_created(detector_settings={"person": {"min_height": 60}}, day="before 2681c9f")
    unknown = config_factory(tracker_settings={"lost_track_buffer": 10})  # a hash no defaults give
    sam2 = config_factory(backend="sam2", tracker_settings={"device": "cpu"})

    # when: the migration runs (twice: the second changes nothing)
    pinning.pin_defaults(apps, None)
    first = {c.pk: (c.anchor_policy, c.detector_settings, c.tracker_settings) for c in ProposalConfig.objects.all()}
    pinning.pin_defaults(apps, None)
    assert first == {c.pk: (c.anchor_policy, c.detector_settings, c.tracker_settings)
                     for c in ProposalConfig.objects.all()}

    # then: each runs with the defaults it was created under, its own settings kept
    for config in (oldest, unknown):
        runs = _runs_with(config)
        assert (runs.anchor_stride, runs.between_anchors, runs.match_buffer) == (1, "none", 0.0)
        assert runs.detectors["person"]["regions"] == "frame"
    assert _runs_with(unknown).lost_track_buffer == 10
    runs = _runs_with(oldest_stride)
    assert (runs.anchor_stride, runs.match_buffer) == (3, 0.0) and oldest_stride.anchor_policy == {"anchor_stride": 3}
    runs = _runs_with(middle)
    assert (runs.anchor_stride, runs.between_anchors, runs.match_buffer) == (2, "kalman", 0.3)
    assert runs.detectors["person"]["regions"] == "frame"
    runs = _runs_with(today)
    assert (runs.anchor_stride, runs.match_buffer, runs.min_track_length) == (2, 0.3, 4)
    assert runs.detectors["person"]["regions"] == "motion"
    runs = _runs_with(own_detector)
    assert runs.anchor_stride == 1 and runs.detectors == {"person": {"min_height": 60}}
    # every setting is written out, and the hash did not move
    for config in (oldest, middle, today):
        assert set(config.tracker_settings) | set(config.anchor_policy) >= {"anchor_stride", "between_anchors",
                                                                              "match_buffer", "min_track_length"}
    sam2.refresh_from_db()
    assert sam2.tracker_settings == {"device": "cpu"}
    assert ProposalConfig.objects.get(pk=oldest.pk).config_hash == oldest.config_hash
