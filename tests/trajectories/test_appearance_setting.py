"""The CPU tracker's appearance setting through a proposal configuration: named, it is stored
resolved; a bad value is a 400 that names it, and nothing is stored."""
from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from models.backends.tracking import resolve_tracker_settings
from tests.trajectories.factories import config_factory
from trajectories.models import ProposalConfig
from trajectories.services.proposals import _tracker_for, settings_hash

pytestmark = pytest.mark.django_db
pinning = importlib.import_module("trajectories.migrations.0010_proposal_config_settings_pinned")
APPEARANCE_KEYS = ("appearance", "appearance_weight", "appearance_gate", "appearance_ema")


@pytest.mark.parametrize("backend", ["hog-bytetrack", "dnn-bytetrack"])
def test_a_bad_appearance_setting_is_a_400_naming_it(manager_client, backend):
    for settings, words in (({"appearance": "resnet50"}, "appearance must be null or one of 'mobilenetv2-imagenet'"),
                            ({"appearance": 1}, "appearance"),
                            ({"appearance": "mobilenetv2-imagenet", "appearance_gate": 3}, "appearance_gate"),
                            ({"appearance_weight": -0.5}, "appearance_weight")):
        r = manager_client.post("/api/proposal-configs/", {"name": "q", "backend": backend, "categories": ["person"],
                                                            "tracker_settings": settings}, format="json")
        assert r.status_code == 400 and r.json()["code"] == "invalid_tracker_settings", r.content
        assert words in r.json()["message"]
    assert ProposalConfig.objects.count() == 0


def test_a_named_appearance_embedder_is_stored_with_its_settings(manager_client):
    r = manager_client.post("/api/proposal-configs/", {"name": "p", "backend": "hog-bytetrack", "categories": ["person"],
                                                        "tracker_settings": {"appearance": "mobilenetv2-imagenet"}},
                            format="json")
    assert r.status_code == 201, r.content
    settings = r.json()["tracker_settings"]
    assert settings["appearance"] == "mobilenetv2-imagenet"
    assert (settings["appearance_weight"], settings["appearance_gate"], settings["appearance_ema"]) == (0.5, 0.3, 0.9)


def test_a_configuration_created_before_the_appearance_settings_keeps_its_defaults():
    # given: a configuration stored as given (min_track_length only), hashed under the defaults of
    # 6b40faa, before the appearance settings existed
    software = {"numpy": "1.0", "opencv-python-headless": "4.0", "supervision": "0.1"}
    resolved = resolve_tracker_settings("hog-bytetrack", categories=["person"], tracker_settings={"min_track_length": 4})
    then = {k: v for k, v in resolved.items() if k not in APPEARANCE_KEYS}
    digest, _ = settings_hash(backend="hog-bytetrack", categories=["person"], resolved=then, software=software)
    config = config_factory(tracker_settings={"min_track_length": 4}, software=software, config_hash=digest)

    # when: trajectories 0010 pins the defaults it was created under
    pinning.pin_defaults(apps, None)

    # then: that day's defaults (two-frame anchors, HOG around motion), appearance off
    config.refresh_from_db()
    runs = _tracker_for(config).config
    assert (runs.anchor_stride, runs.match_buffer, runs.min_track_length, runs.appearance) == (2, 0.3, 4, None)
    assert runs.detectors["person"]["regions"] == "motion"
    assert config.tracker_settings["appearance"] is None and config.config_hash == digest
