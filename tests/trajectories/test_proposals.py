"""Proposal runs through the service, with the real trackers (HOG+ByteTrack, a tiny SAM 2 and a
tiny SAM 3)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.curation.services.pools import pool_freeze
from annotation.demo.builders import demo_video_import
from annotation.demo.simulation import simulate_annotators
from annotation.models import WorkItem
from common.errors import ApplicationError
from models.demo.coverage import box_iou
from models.media.video import content_sha256
from models.world.renderer import render_scene
from models.world.scene import PersonSpec, SceneSpec, demo_scenes, gt_path_for
from tests.conftest import write_video
from tests.models.sam2_tiny import build_tiny_sam2
from tests.models.sam3_tiny import blind_copy, tiny_sam3_architecture
from trajectories.models import (
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    SplitGroup,
    Trajectory,
)
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import (
    proposal_config_create,
    proposal_run_create,
    proposal_run_execute,
)
from trajectories.services.splits import splits_assign

pytestmark = pytest.mark.django_db


@pytest.fixture
def model_root(settings, tmp_path):
    """The test's folder is a model root (``TRAJLAB_MODEL_ROOTS``), so its tiny SAM 2 may be read."""
    settings.TRAJLAB_MODEL_ROOTS = [str(tmp_path)]
    return tmp_path


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    spec = demo_scenes(0)[0]
    spec.n_frames = 48  # the first four seconds of the crossing scene
    # under the still, even camera: the run's boxes must all lie on people, and through the varied
    # world's camera HOG also fires on a window of the wall (tracker accuracy there is
    # bench_tracking's measurement)
    spec.variation = 0.0
    path = tmp_path_factory.mktemp("render") / f"{spec.name}.mp4"
    return path, render_scene(spec, path)


def _video(path, source="cam"):
    video = video_import(path=path, source=source).video
    splits_assign(seed=0, ratios={"train": 1})
    return video


def test_hog_bytetrack_run_on_a_rendered_scene(media_root, rendered):
    path, truth = rendered
    video = _video(path)
    config = proposal_config_create(name="hog", backend="hog-bytetrack", categories=["person"])
    assert config.version == 1 and config.software["supervision"].startswith("0.")
    run, created = proposal_run_create(video=video, config=config, enqueue=False)
    assert created and run.status == "queued" and run.job.status == "queued"
    progress = []
    run = proposal_run_execute(run_id=run.pk, echo=lambda f, m: progress.append(f))
    assert run.status == ProposalRun.Status.SUCCEEDED
    assert progress and progress[-1] >= 0.9 and progress == sorted(progress)
    tracks = list(Trajectory.objects.filter(run=run))
    assert len(tracks) >= 2
    # Stored boxes lie on rendered people (image evidence, nothing interpolated into empty space).
    ious = []
    for t in tracks:
        for f, box in zip(t.frames_array(), t.boxes_array()):
            gt = np.array([p.boxes[f] for p in truth.people if p.boxes[f] is not None], np.float32)
            assert len(gt), f"track {t.track_id} has an observation on frame {f} where nobody is"
            ious.append(box_iou(box[None], gt).max())
    ious = np.array(ious)
    assert (ious > 0.1).all(), f"boxes on nobody: {np.sort(ious)[:5]}"
    assert np.median(ious) >= 0.6 and (ious >= 0.5).mean() >= 0.8
    for t in tracks:
        assert len(t.appearance_array()) > 0 and np.isclose(np.linalg.norm(t.appearance_array()), 1, atol=1e-3)
    # Running the same configuration again changes nothing.
    again, created = proposal_run_create(video=video, config=config, enqueue=False)
    assert not created and again.pk == run.pk
    assert proposal_run_execute(run_id=run.pk).trajectory_count == len(tracks)
    assert Trajectory.objects.count() == len(tracks)
    same = proposal_config_create(name="hog", backend="hog-bytetrack", categories=["person"])
    assert same.pk == config.pk and ProposalConfig.objects.count() == 1


def test_sam2_run_with_a_tiny_model_through_the_real_loader(media_root, tmp_path, model_root):
    model_config, checkpoint = build_tiny_sam2(tmp_path / "sam2")
    video = _video(write_video(tmp_path / "moving.mp4", n_frames=24, size=(160, 120)), source="sam2-cam")
    config = proposal_config_create(
        name="sam2-tiny", backend="sam2", categories=["moving object"], checkpoint_path=str(checkpoint),
        model_config_path=str(model_config), anchor_policy={"anchor_stride": 12},
        tracker_settings={"mask_threshold": 0.0, "min_mask_area": 1})
    assert len(config.checkpoint_sha256) == 64 and config.software["sam2"] == "1.1.0"
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    assert run.job.queue == "gpu"
    run = proposal_run_execute(run_id=run.pk)
    assert run.status == ProposalRun.Status.SUCCEEDED, run.error
    for t in Trajectory.objects.filter(run=run):
        boxes = t.boxes_array()
        assert (boxes[:, 0] >= 0).all() and (boxes[:, 2] <= 160).all() and (boxes[:, 3] <= 120).all()


def test_missing_sam2_checkpoint_is_refused_before_anything_is_stored(media_root, tmp_path, manager_client, settings):
    with pytest.raises(ApplicationError) as err:
        proposal_config_create(name="sam2", backend="sam2", categories=["person"],
                               checkpoint_path=str(tmp_path / "nope.pt"))
    assert err.value.code == "checkpoint_missing" and "nope.pt" in err.value.message
    settings.TRAJLAB_BACKENDS = {"sam2-large": {"backend": "sam2",
                                                "settings": {"checkpoint": "/models/sam2.1_hiera_large.pt"}}}
    r = manager_client.post("/api/proposal-configs/", {"name": "sam2", "backend": "sam2-large",
                                                        "categories": ["person"]}, format="json")
    assert r.status_code == 400 and "sam2.1_hiera_large.pt" in r.json()["message"]
    r = manager_client.post("/api/proposal-configs/", {"name": "sam2", "backend": "sam2", "categories": ["person"],
                                                        "checkpoint_path": "/models/sam2.1_hiera_large.pt"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "location_in_request"
    assert ProposalConfig.objects.count() == 0


def test_bad_tracker_settings_and_categories_are_refused(db):
    with pytest.raises(ApplicationError, match="unknown"):
        proposal_config_create(name="x", backend="hog-bytetrack", categories=["person"], tracker_settings={"speed": 3})
    with pytest.raises(ApplicationError, match="giraffe"):
        proposal_config_create(name="x", backend="hog-bytetrack", categories=["giraffe"])
    with pytest.raises(ApplicationError, match="unknown backend"):
        proposal_config_create(name="x", backend="yolo", categories=["person"])
    assert ProposalConfig.objects.count() == 0


def test_a_concept_needs_sam3_and_text_also_from_the_command_line(db):
    with pytest.raises(CommandError, match="needs a text-prompted tracker"):
        call_command("propose", "--backend", "hog-bytetrack", "--concept", "person with a red umbrella")
    with pytest.raises(CommandError, match="blank"):
        call_command("propose", "--backend", "sam3", "--concept", "  ")
    with pytest.raises(CommandError, match="at most 120"):
        call_command("propose", "--backend", "sam3", "--concept", "a person " * 20)
    with pytest.raises(ApplicationError, match="must be text") as info:
        proposal_config_create(name="x", backend="sam3", categories=["person"], concept=["person"])
    assert info.value.code == "invalid_concept" and ProposalConfig.objects.count() == 0


def test_changed_checkpoint_fails_the_run_clearly(media_root, tmp_path, model_root):
    model_config, checkpoint = build_tiny_sam2(tmp_path / "sam2")
    video = _video(write_video(tmp_path / "v.mp4", n_frames=12, size=(160, 120)))
    config = proposal_config_create(name="s", backend="sam2", categories=["moving object"],
                                    checkpoint_path=str(checkpoint), model_config_path=str(model_config))
    checkpoint.write_bytes(checkpoint.read_bytes() + b"tampered")
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    with pytest.raises(ApplicationError, match="SHA-256 differs"):
        proposal_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "SHA-256" in run.error and run.job.status == "failed"
    assert Trajectory.objects.count() == 0 and DuplicateCandidate.objects.count() == 0
    # A failed run is queued again in place, never duplicated.
    again, created = proposal_run_create(video=video, config=config, enqueue=False)
    assert created and again.pk == run.pk and again.status == "queued"


def test_a_duplicate_delivery_that_loses_the_race_keeps_the_winner(media_root, tmp_path, monkeypatch):
    from tests.trajectories.factories import proposal
    from trajectories.services import proposals as service

    video = _video(write_video(tmp_path / "v.mp4", n_frames=12, size=(160, 120)))
    config = proposal_config_create(name="hog", backend="hog-bytetrack", categories=["person"])
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)

    def tracker_while_another_worker_finishes(tracker, reader, categories, progress=None):
        service.trajectories_store(run=run, proposals=[proposal(1, 0, 4)])  # the other delivery
        return [proposal(1, 0, 4), proposal(2, 5, 4, x=80)]

    monkeypatch.setattr(service, "run_tracker", tracker_while_another_worker_finishes)
    result = proposal_run_execute(run_id=run.pk)
    assert result.status == "succeeded" and result.trajectory_count == 1
    result.job.refresh_from_db()
    assert result.job.status == "succeeded" and "first" in result.job.message
    assert Trajectory.objects.filter(run=run).count() == 1


def test_one_configuration_spelled_differently_is_one_record(db):
    a = proposal_config_create(name="p", backend="hog-bytetrack", categories=["person"])
    same = [
        dict(categories=["  Person "]),
        dict(categories=["person", "person"]),
        dict(categories=["person"], anchor_policy={"anchor_stride": 2}),
        dict(categories=["person"], tracker_settings={"anchor_stride": 2, "min_track_length": 3}),
    ]
    for kwargs in same:
        assert proposal_config_create(name="p", backend="hog-bytetrack", **kwargs).pk == a.pk, kwargs
    b = proposal_config_create(name="p", backend="hog-bytetrack", categories=["person"], anchor_policy={"anchor_stride": 1})
    assert b.pk != a.pk and b.version == 2 and ProposalConfig.objects.count() == 2


@pytest.mark.parametrize("kwargs, message", [
    (dict(checkpoint_path="/etc/hostname"), "no checkpoint"),
    (dict(anchor_policy={"anchor_stride": 2}, tracker_settings={"anchor_stride": 3}), "both"),
    (dict(tracker_settings={"anchor_stride": "often"}), "anchor_stride"),
])
def test_settings_that_cannot_mean_anything_are_refused(db, kwargs, message):
    with pytest.raises(ApplicationError, match=message):
        proposal_config_create(name="x", backend="hog-bytetrack", categories=["person"], **kwargs)
    assert ProposalConfig.objects.count() == 0


def test_sam2_setting_of_the_wrong_type_is_a_clear_error(tmp_path, db, model_root):
    model_config, checkpoint = build_tiny_sam2(tmp_path / "sam2")
    with pytest.raises(ApplicationError) as err:
        proposal_config_create(name="s", backend="sam2", categories=["person"], checkpoint_path=str(checkpoint),
                               model_config_path=str(model_config), tracker_settings={"device": 0})
    assert err.value.code == "invalid_tracker_settings"


def _queued_run(tmp_path, name="v"):
    video = _video(write_video(tmp_path / f"{name}.mp4", n_frames=12, size=(160, 120)), source=name)
    config = proposal_config_create(name="hog", backend="hog-bytetrack", categories=["moving object"])
    return proposal_run_create(video=video, config=config, enqueue=False)[0]


def test_a_run_whose_worker_keeps_dying_is_failed(media_root, tmp_path):
    from common.models import Job

    run = _queued_run(tmp_path)
    Job.objects.filter(pk=run.job_id).update(attempts=3)  # three deliveries died with their worker
    with pytest.raises(ApplicationError, match="gave up after 3 attempts"):
        proposal_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and run.job.status == "failed" and Trajectory.objects.count() == 0


def test_a_broker_that_refuses_the_message_fails_the_run_visibly(media_root, tmp_path, monkeypatch,
                                                                 django_capture_on_commit_callbacks):
    from common.jobs import runs

    def refuse(*args, **kwargs):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(runs.current_app, "send_task", refuse)
    video = _video(write_video(tmp_path / "b.mp4", n_frames=12, size=(160, 120)))
    config = proposal_config_create(name="hog", backend="hog-bytetrack", categories=["person"])
    with django_capture_on_commit_callbacks(execute=True):
        run, _ = proposal_run_create(video=video, config=config)
    run.refresh_from_db()
    assert run.status == "failed" and "broker" in run.error and run.job.status == "failed"
    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        again, queued = proposal_run_create(video=video, config=config)
    assert queued and again.pk == run.pk and again.status == "queued" and len(callbacks) == 1


def test_a_stale_run_is_queued_again_and_a_live_one_is_not(media_root, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    from common.models import Job

    run = _queued_run(tmp_path)
    first_job = run.job_id
    again, queued = proposal_run_create(video=run.video, config=run.config, enqueue=False)
    assert not queued and again.job_id == first_job  # still fresh: left alone
    Job.objects.filter(pk=first_job).update(updated_at=timezone.now() - timedelta(hours=2))
    again, queued = proposal_run_create(video=run.video, config=run.config, enqueue=False)
    assert queued and again.pk == run.pk and again.job_id != first_job and ProposalRun.objects.count() == 1


# -- SAM 3 ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sam3_weights(sam3_tiny_checkpoint, tmp_path_factory):
    """The session's tiny SAM 3 checkpoint and its blind twin, in a model folder of their own."""
    folder = tmp_path_factory.mktemp("sam3_models")
    checkpoint = folder / sam3_tiny_checkpoint.name
    os.link(sam3_tiny_checkpoint, checkpoint)  # a hard link: the reach check follows symbolic ones
    return checkpoint, blind_copy(checkpoint, folder)


def _rendered_with_truth(tmp_path, name: str, n_frames: int = 3):
    spec = SceneSpec(name=name, width=320, height=180, fps=8, n_frames=n_frames, seed=3, background="plaza",
                     people=[PersonSpec(upper="red", lower="blue", direction="right", speed="normal",
                                        start=(60, 160), height=90)])
    path = tmp_path / f"{name}.mp4"
    render_scene(spec, path).save(gt_path_for(path))
    video = demo_video_import(path, source=name, name=name, ground_truth=gt_path_for(path), echo=lambda *a, **k: None)
    SplitGroup.objects.filter(pk=video.split_group_id).update(split="train")
    video.refresh_from_db()
    return video


@pytest.mark.slow
def test_sam3_run_is_stored_reviewed_and_frozen_like_any_other(media_root, tmp_path, settings, sam3_weights,
                                                             make_user):
    checkpoint, _ = sam3_weights
    settings.TRAJLAB_MODEL_ROOTS = [str(checkpoint.parent)]
    manager = make_user("manager", username="boss")
    video = _rendered_with_truth(tmp_path, "sam3-scene")
    config = proposal_config_create(name="sam3-tiny", backend="sam3", categories=[" Person "],
                                    checkpoint_path=str(checkpoint), tracker_settings={"device": "cpu"})
    assert config.categories == ["person"] and config.checkpoint_sha256 == content_sha256(checkpoint)
    assert config.software["sam3"] == "0.1.4" and config.software["numpy"].startswith("2.3")
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    assert run.job.queue == "gpu"
    with tiny_sam3_architecture():
        run = proposal_run_execute(run_id=run.pk)
    assert run.status == ProposalRun.Status.SUCCEEDED, run.error
    recorded = run.job.result["tracker"]
    assert recorded["checkpoint_sha256"] == config.checkpoint_sha256 and recorded["prompts"] == ["person"]
    assert recorded["backend"] == "sam3" and recorded["device"] == "cpu"
    tracks = list(Trajectory.objects.filter(run=run))
    assert tracks and {t.category for t in tracks} == {"person"}
    for t in tracks:
        boxes = t.boxes_array()
        assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= 320).all() and (boxes[:, 3] <= 180).all()
        assert set(t.frames_array()) <= {0, 1, 2}
    # the same review and freeze as every other run's trajectories
    assert WorkItem.objects.filter(stage="usability", trajectory__run=run).count() == len(tracks)
    simulate_annotators(n_annotators=3, accuracy=1.0, seed=0)
    assert not WorkItem.objects.filter(trajectory__run=run).exclude(state__in=["decided", "unresolved"]).exists()
    pool = pool_freeze(run=run, frozen_by=manager)
    assert pool.run_id == run.pk and pool.n_members <= len(tracks)


@pytest.mark.slow
def test_sam3_that_finds_nothing_is_an_empty_run_and_bad_configurations_are_refused(
        media_root, tmp_path, settings, sam3_weights, manager_client):
    checkpoint, blind = sam3_weights
    settings.TRAJLAB_MODEL_ROOTS = [str(checkpoint.parent)]
    video = _rendered_with_truth(tmp_path, "sam3-empty", n_frames=2)
    # a query-conditioned run (seed C.1): the manager's concept is the prompt, recorded on the run
    config = proposal_config_create(name="sam3-blind", backend="sam3", categories=["person"],
                                    checkpoint_path=str(blind), tracker_settings={"device": "cpu"},
                                    concept="  person with a red umbrella")
    assert config.tracker_settings["concept"] == "person with a red umbrella"
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    with tiny_sam3_architecture():
        run = proposal_run_execute(run_id=run.pk)
    assert run.status == ProposalRun.Status.SUCCEEDED and run.trajectory_count == 0
    assert not Trajectory.objects.filter(run=run).exists()
    assert run.job.result["tracker"]["prompts"] == ["person with a red umbrella"]
    shown = manager_client.get(f"/api/proposal-runs/{run.pk}/").json()
    assert shown["concept"] == "person with a red umbrella"
    plain = proposal_config_create(name="sam3-blind", backend="sam3", categories=["person"],
                                   checkpoint_path=str(blind), tracker_settings={"device": "cpu"})
    assert plain.pk != config.pk and plain.tracker_settings["concept"] == ""

    settings.TRAJLAB_BACKENDS = {  # the operator's entries: the API names them, never a path
        "sam3-missing": {"backend": "sam3", "settings": {"checkpoint": str(checkpoint.parent / "sam3.pt")}},
        "sam3-local": {"backend": "sam3", "settings": {"checkpoint": str(checkpoint)}},
        "sam3-configured": {"backend": "sam3", "settings": {"checkpoint": str(checkpoint),
                                                            "model_config": str(checkpoint)}}}

    def refused(body: dict) -> dict:
        r = manager_client.post("/api/proposal-configs/", {"name": "sam3", "backend": "sam3-local", **body},
                                format="json")
        assert r.status_code == 400, r.content
        return r.json()

    missing = refused({"categories": ["person"], "backend": "sam3-missing"})
    assert missing["code"] == "checkpoint_missing" and "sam3.pt" in missing["message"]
    assert "huggingface.co/facebook/sam3" in missing["message"]
    empty = refused({"categories": []})
    assert empty["code"] == "invalid" and "categories" in str(empty)
    assert "unknown category" in refused({"categories": ["flying saucer"]})["message"]
    assert "must be empty" in refused({"categories": ["person"], "backend": "sam3-configured"})["message"]
    made = manager_client.post("/api/proposal-configs/", {"name": "sam3", "backend": "sam3-local",
                                                           "categories": ["person"], "concept": "person in red"},
                               format="json")
    assert made.status_code == 201 and made.json()["concept"] == "person in red"
    for concept in ("", "   ", 7, ["person"], "x" * 121):
        assert "concept" in str(refused({"categories": ["person"], "concept": concept}))
    assert "exactly one category" in refused({"categories": ["person", "car"], "concept": "red car"})["message"]
    twice = refused({"categories": ["person"], "concept": "a", "tracker_settings": {"concept": "b"}})
    assert twice["code"] == "invalid_concept"
    assert refused({"categories": ["person"], "backend": "hog-bytetrack", "concept": "a"})["code"] == "concept_needs_sam3"
    for location in ({"checkpoint_path": str(checkpoint)}, {"tracker_settings": {"bpe_path": "/etc/hostname"}}):
        outside = refused({"categories": ["person"], **location})
        assert outside["code"] == "location_in_request"
    # a corrupt checkpoint is hashed and stored; the run that loads it fails with the reason
    corrupt = checkpoint.parent / "corrupt.pt"
    corrupt.write_bytes(b"\0" * 1024)
    bad = proposal_config_create(name="sam3-corrupt", backend="sam3", categories=["person"],
                                 checkpoint_path=str(corrupt), tracker_settings={"device": "cpu"})
    run, _ = proposal_run_create(video=video, config=bad, enqueue=False)
    with pytest.raises(ApplicationError, match="does not load into SAM 3's video model"):
        proposal_run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == ProposalRun.Status.FAILED and "corrupt.pt" in run.error
    assert not Trajectory.objects.filter(run=run).exists()
