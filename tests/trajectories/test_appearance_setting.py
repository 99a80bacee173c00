"""The CPU tracker's appearance setting through a proposal configuration: named, it is stored
resolved; a bad value is a 400 that names it, and nothing is stored."""
from __future__ import annotations

import pytest

from trajectories.models import ProposalConfig

pytestmark = pytest.mark.django_db


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
