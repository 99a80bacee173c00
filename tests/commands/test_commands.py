"""Management commands: what a person types and what they see."""
from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from models.world.scene import GroundTruth
from tests.conftest import write_video
from trajectories.models import ProposalRun, SplitGroup, Trajectory, Video

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=out)
    return out.getvalue()


def test_assign_splits_command(media_root, tmp_path):
    for i in range(4):
        run("import_videos", str(write_video(tmp_path / f"v{i}.mp4", seed=i)), "--source", f"cam{i}")
    text = run("assign_splits", "--seed", "3", "--ratios", "train=0.5,test=0.5")
    assert text.count("train") == 2 and text.count("test") == 2
    assert set(SplitGroup.objects.values_list("split", flat=True)) == {"train", "test"}
    with pytest.raises(CommandError, match="ratios must look like"):
        run("assign_splits", "--seed", "1", "--ratios", "train:1")


def test_propose_command_runs_inline_and_refuses_bad_input(media_root, tmp_path):
    run("import_videos", str(write_video(tmp_path / "v.mp4", n_frames=30, size=(200, 150))), "--source", "c")
    run("assign_splits", "--seed", "0")
    video = Video.objects.get()
    text = run("propose", str(video.pk), "--categories", "moving object")
    assert f"video #{video.pk}: run #" in text and "trajectories" in text
    assert ProposalRun.objects.get().status == "succeeded" and Trajectory.objects.exists()
    assert "already succeeded" in run("propose", str(video.pk), "--categories", "moving object")
    with pytest.raises(CommandError, match="unknown video id"):
        run("propose", "424242")
    with pytest.raises(CommandError, match="not found"):
        run("propose", "--backend", "sam2", "--checkpoint", str(tmp_path / "missing.pt"))
    with pytest.raises(CommandError, match="not valid JSON"):
        run("propose", "--tracker-settings", "{oops")
    with pytest.raises(CommandError, match="unknown backend 'sam9'"):
        run("propose", "--backend", "sam9")


def test_propose_takes_a_registered_tracker(media_root, tmp_path, settings):
    settings.TRAJLAB_BACKENDS = {"people-every-2nd": {"backend": "hog-bytetrack", "settings": {"anchor_stride": 2}}}
    run("import_videos", str(write_video(tmp_path / "v.mp4", n_frames=20, size=(200, 150))), "--source", "c")
    run("assign_splits", "--seed", "0")
    run("propose", "--backend", "people-every-2nd", "--name", "registered", "--categories", "moving object")
    config = ProposalRun.objects.get().config
    assert config.backend == "hog-bytetrack" and config.tracker_settings["anchor_stride"] == 2


def test_create_user_command():
    assert "API token" in run("create_user", "ann", "--password", "secret-pass", "--roles", "annotator,auditor")
    user = get_user_model().objects.get(username="ann")
    assert set(user.groups.values_list("name", flat=True)) == {"annotator", "auditor"}
    with pytest.raises(CommandError, match="unknown role"):
        run("create_user", "bob", "--password", "secret-pass", "--roles", "chief")


def test_demo_command_builds_the_project_and_is_idempotent(media_root, settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.TRAJLAB_SHARED_DATA = tmp_path / "no-shared-data"
    text = run("demo", "--no-proposals")
    assert "not found" in text  # the real video is optional
    videos = list(Video.objects.order_by("pk"))
    assert [v.name for v in videos] == ["crossing", "stop_and_go", "busy_plaza", "market", "corridor", "evening"]
    assert sorted(v.split for v in videos) == ["dev", "dev", "test", "test", "train", "train"]
    for v in videos:
        assert v.split and v.metadata["rendered"]
        truth = GroundTruth.load(media_root / v.metadata["ground_truth"])
        assert truth.n_frames == v.frame_count and (truth.width, truth.height) == (v.width, v.height)
    users = get_user_model().objects.filter(username__in=["manager", "annotator1", "annotator2", "annotator3",
                                                          "adjudicator", "auditor"])
    assert users.count() == 6 and users.get(username="annotator2").check_password("trajlab-demo")
    run("demo", "--no-proposals")
    assert Video.objects.count() == 6 and get_user_model().objects.count() == 6
