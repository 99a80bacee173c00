"""Crop strips made once when a run is stored (issue 27, finding 11): a vote must never wait behind
crops decoded on request. Storing a run queues the strips after commit; the strips are the crops the
review screens ask for, made by reading the video once; the crop endpoint then answers from the file
without decoding, byte for byte what it would have made."""
from __future__ import annotations

import pytest

from models.media.video import content_sha256
from tests.conftest import write_video
from tests.trajectories.factories import proposal, run_factory, video_factory
from trajectories import crop_files, selectors
from trajectories.models import Trajectory
from trajectories.services import crops
from trajectories.services.proposals import trajectories_store

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(media_root, monkeypatch, django_capture_on_commit_callbacks):
    """A run of three trajectories on a real 40-frame video, stored; the tasks it sent."""
    write_video(media_root / "clip.mp4", n_frames=40, size=(160, 120))
    # the file's own hash: a video file is checked against it when read
    video = video_factory(path="clip.mp4", width=160, height=120, frame_count=40, fps=10.0,
                          content_sha256=content_sha256(media_root / "clip.mp4"))
    run = run_factory(video=video)
    sent = []
    monkeypatch.setattr(crops.current_app, "send_task", lambda name, args=None, **kw: sent.append((name, args, kw)))
    with django_capture_on_commit_callbacks(execute=True):
        trajectories_store(run=run, proposals=[proposal(1, 0, 30, x=5, y=10, w=30, h=60, dx=1.5),
                                               proposal(2, 5, 4, x=80, y=20, w=20, h=40, dx=0),
                                               proposal(3, 10, 30, x=100, y=30, w=40, h=70, dx=-1.0)])
    return run, sent


def test_storing_a_run_queues_its_crop_strips_after_commit(stored):
    run, sent = stored
    assert sent == [(crops.TASK, [run.pk], {"queue": "cpu"})]


def test_the_strips_are_what_the_screens_ask_for_made_once(stored, monkeypatch):
    run, _ = stored
    made = crops.crop_strips_store(run=run)
    trajectories = list(Trajectory.objects.filter(run=run))
    wanted = sum(len(crop_files.strip_frames(t, n)) for t in trajectories for n, _ in crop_files.CROP_STRIPS)
    assert made == {"made": wanted, "kept": 0, "failed": 0} and wanted == 2 * 12 + 2 * 6 + 2 * 4
    assert crops.crop_strips_store(run=run) == {"made": 0, "kept": wanted, "failed": 0}

    # the endpoint answers a stored crop from its file, without decoding anything
    def no_decoding(**kwargs):
        raise AssertionError("a stored crop was decoded again")

    t = trajectories[0]
    index = crop_files.strip_frames(t, 12)[3]
    on_file = crop_files.crop_path(trajectory=t, index=index, max_size=160).read_bytes()
    monkeypatch.setattr(selectors, "video_frame", no_decoding)
    assert selectors.trajectory_crop_jpeg(trajectory=t, index=index, max_size=160) == on_file


def test_a_stored_crop_is_the_crop_made_on_request(stored, settings, tmp_path):
    run, _ = stored
    t = Trajectory.objects.filter(run=run).order_by("pk").first()
    index = crop_files.strip_frames(t, 6)[2]
    fresh = selectors.trajectory_crop_jpeg(trajectory=t, index=index, max_size=120)   # made now, kept
    assert crop_files.crop_path(trajectory=t, index=index, max_size=120).read_bytes() == fresh
    crop_files.crop_path(trajectory=t, index=index, max_size=120).unlink()
    crops.crop_strips_store(run=run)
    assert crop_files.crop_path(trajectory=t, index=index, max_size=120).read_bytes() == fresh


def test_an_unreadable_video_leaves_crops_to_be_made_on_request(stored, media_root):
    run, _ = stored
    (media_root / "clip.mp4").write_bytes(b"not a video")
    out = crops.crop_strips_store(run=run)
    assert out["made"] == 0 and out["failed"] > 0
    assert not (media_root / "crops").exists() or not any((media_root / "crops").rglob("*.jpg"))


def test_no_crops_are_queued_when_turned_off(media_root, settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.TRAJLAB_PRECOMPUTE_CROPS = False
    sent = []
    monkeypatch.setattr(crops.current_app, "send_task", lambda *a, **k: sent.append(a))
    with django_capture_on_commit_callbacks(execute=True):
        trajectories_store(run=run_factory(), proposals=[proposal(1, 0, 5)])
    assert sent == []


def test_a_proposal_runs_worker_makes_its_strips_right_after_the_run(media_root, tmp_path, monkeypatch):
    """The run's own task makes the strips at once, not behind every run queued after it."""
    from trajectories import tasks
    from trajectories.services.ingestion import video_import
    from trajectories.services.proposals import proposal_config_create, proposal_run_create
    from trajectories.services.splits import splits_assign

    monkeypatch.setattr(crops.current_app, "send_task", lambda *a, **k: None)
    video = video_import(path=write_video(tmp_path / "v.mp4", n_frames=30, size=(200, 150)), source="c").video
    splits_assign(seed=0, ratios={"train": 1})
    config = proposal_config_create(name="m", backend="hog-bytetrack", categories=["moving object"])
    run, _ = proposal_run_create(video=video, config=config, enqueue=False)
    out = tasks.proposal_run_task(run.pk)
    assert out["status"] == "succeeded" and out["trajectories"] > 0
    assert out["crops"]["made"] > 0 and out["crops"]["failed"] == 0
    assert len(list((media_root / "crops").rglob("*.jpg"))) == out["crops"]["made"]


def test_only_the_strips_crops_are_kept_on_disk(stored, media_root):
    """A crop of any other size or frame is made on request and kept in memory only: what a request
    can make the server write is bounded by the run's strips."""
    run, _ = stored
    t = Trajectory.objects.filter(run=run).order_by("pk").first()
    off_strip = next(int(f) for f in t.frames_array() if int(f) not in crop_files.strip_frames(t, 12))
    for index, size in ((crop_files.strip_frames(t, 12)[0], 200), (off_strip, 160), (off_strip, None)):
        assert selectors.trajectory_crop_jpeg(trajectory=t, index=index, max_size=size)
        assert not crop_files.crop_path(trajectory=t, index=index, max_size=size).exists()
    kept = crop_files.strip_frames(t, 12)[0]
    selectors.trajectory_crop_jpeg(trajectory=t, index=kept, max_size=160)
    assert crop_files.crop_path(trajectory=t, index=kept, max_size=160).is_file()
