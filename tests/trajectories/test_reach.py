"""Server-side reach (issue 16, finding 7; issue 27, finding 1): the API takes no checkpoint or
model config path (a registered tracker brings them); one named on the command line outside
``TRAJLAB_MODEL_ROOTS`` is refused with 400 before anything reads or hashes it, links out of a
root included; a video imported through the API must lie under ``MEDIA_ROOT`` or
``TRAJLAB_IMPORT_ROOTS``; stored paths are shown relative to the server's folders."""
from __future__ import annotations

import pytest

from common.errors import ApplicationError
from common.reach import import_roots, relative_path
from tests.models.sam2_tiny import build_tiny_sam2
from trajectories.models import ProposalConfig, Video
from trajectories.services import proposals
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import proposal_config_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_hashing(monkeypatch):
    def refuse(path):
        raise AssertionError(f"{path} was hashed")
    monkeypatch.setattr(proposals, "content_sha256", refuse)


def test_a_checkpoint_outside_the_model_roots_is_refused_unread(manager_client, no_hashing, settings, tmp_path):
    settings.TRAJLAB_MODEL_ROOTS = [str(tmp_path / "models")]
    r = manager_client.post("/api/proposal-configs/", {"name": "sam2", "backend": "sam2", "categories": ["person"],
                                                        "checkpoint_path": "/etc/passwd",
                                                        "model_config_path": "/etc/hostname"}, format="json")
    assert r.status_code == 400, r.content
    body = r.json()  # the API takes no paths at all: a registered tracker brings its files
    assert body["code"] == "location_in_request" and body["extra"]["field"] in ("checkpoint_path", "model_config_path")
    # the operator's command line may name files, under the model roots only
    with pytest.raises(ApplicationError) as refused:
        proposal_config_create(name="s", backend="sam2", categories=["person"], checkpoint_path="/etc/hostname",
                               model_config_path="/etc/passwd")
    assert refused.value.code == "path_outside_roots" and refused.value.status_code == 400
    assert ProposalConfig.objects.count() == 0


def test_a_link_from_a_model_root_to_elsewhere_is_refused(settings, tmp_path, no_hashing):
    root = tmp_path / "models"
    root.mkdir()
    (root / "sam2.pt").symlink_to("/etc/passwd")
    (root / "sam2.yaml").write_text("model: {}\n")
    (tmp_path / "elsewhere.pt").write_bytes(b"weights")
    settings.TRAJLAB_MODEL_ROOTS = [str(root)]
    for checkpoint in (root / "sam2.pt", root / ".." / "elsewhere.pt"):
        with pytest.raises(ApplicationError) as refused:
            proposal_config_create(name="s", backend="sam2", categories=["person"], checkpoint_path=str(checkpoint),
                                   model_config_path=str(root / "sam2.yaml"))
        assert refused.value.code == "path_outside_roots" and "checkpoint_path" in refused.value.message


def test_a_checkpoint_under_a_model_root_is_hashed_and_kept(settings, tmp_path):
    model_config, checkpoint = build_tiny_sam2(tmp_path / "sam2")
    settings.TRAJLAB_MODEL_ROOTS = [str(tmp_path / "elsewhere"), str(tmp_path / "sam2")]
    config = proposal_config_create(name="s", backend="sam2", categories=["person"], checkpoint_path=str(checkpoint),
                                    model_config_path=str(model_config))
    assert len(config.checkpoint_sha256) == 64


def test_an_api_import_outside_the_import_roots_is_refused(media_root, small_video, settings, tmp_path):
    settings.TRAJLAB_IMPORT_ROOTS = [str(tmp_path / "incoming")]
    with pytest.raises(ApplicationError) as refused:
        video_import(path=small_video, source="cam", roots=import_roots())
    assert refused.value.code == "path_outside_roots" and str(small_video) in refused.value.message
    assert Video.objects.count() == 0
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    moved = incoming / small_video.name
    small_video.rename(moved)
    assert video_import(path=moved, source="cam", roots=import_roots()).created
    # the operator's own command passes no roots and reads where it is told
    assert not video_import(path=moved, source="cam").created


def test_stored_paths_are_shown_relative(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.MEDIA_ROOT = tmp_path / "var" / "media"
    settings.TRAJLAB_MODEL_ROOTS = [str(tmp_path / "weights")]
    assert relative_path(str(tmp_path / "var" / "releases" / "demo" / "1.0.0")) == "releases/demo/1.0.0"
    assert relative_path(str(tmp_path / "var" / "media" / "videos" / "a.mp4")) == "videos/a.mp4"
    assert relative_path(str(tmp_path / "weights" / "sam2" / "t.pt")) == "sam2/t.pt"
    assert relative_path("/srv/secret/layout/x.pt") == "layout/x.pt"
    assert relative_path("configs/sam2.1/sam2.1_hiera_t.yaml") == "configs/sam2.1/sam2.1_hiera_t.yaml"
    assert relative_path("") == ""
