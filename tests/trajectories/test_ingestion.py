from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from common.errors import ApplicationError
from tests.conftest import media_files, write_video
from trajectories.models import Source, SplitGroup, Video
from trajectories.services.ingestion import video_import

pytestmark = pytest.mark.django_db


def test_import_probes_stores_and_records_source(media_root, small_video):
    result = video_import(path=small_video, source="cam-1", split_group="day-1")
    v = result.video
    assert result.created
    assert (v.frame_count, v.width, v.height, v.fps, v.kind) == (30, 160, 120, 10.0, "file")
    assert v.duration_s == pytest.approx(3.0)
    assert v.codec.lower() in {"mp4v", "fmp4"}
    assert v.source.name == "cam-1" and v.split_group.name == "day-1"
    assert v.abspath.is_file() and v.abspath.read_bytes() == small_video.read_bytes()
    assert v.size_bytes == small_video.stat().st_size
    assert media_files(media_root / "tmp") == []


def test_same_content_is_deduplicated(media_root, small_video, tmp_path):
    first = video_import(path=small_video, source="cam-1").video
    copy = tmp_path / "copy.mp4"
    copy.write_bytes(small_video.read_bytes())
    again = video_import(path=copy, source="cam-2")
    assert not again.created and again.video.pk == first.pk
    assert Video.objects.count() == 1
    assert len(media_files(media_root / "videos")) == 1


def test_split_group_defaults_to_source(media_root, small_video):
    v = video_import(path=small_video, source="cam-9").video
    assert v.split_group.name == "cam-9"


def test_frame_folder_import(media_root, tmp_path):
    import cv2
    import numpy as np

    folder = tmp_path / "seq"
    folder.mkdir()
    for i in (1, 2, 10):  # natural order: 1, 2, 10
        cv2.imwrite(str(folder / f"f{i}.png"), np.full((48, 64, 3), i * 20, np.uint8))
    v = video_import(path=folder, source="seq", fps=5).video
    assert (v.kind, v.frame_count, v.width, v.height, v.fps) == ("frames", 3, 64, 48, 5.0)
    assert sorted(p.name for p in v.abspath.iterdir()) == ["f1.png", "f10.png", "f2.png"]


def _bad_inputs(tmp_path):
    garbage = tmp_path / "garbage.mp4"
    garbage.write_bytes(bytes(range(256)) * 64)
    text = tmp_path / "notes.txt"
    text.write_text("not a video")
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    zero = write_video(tmp_path / "zero.mp4", n_frames=0)
    real = write_video(tmp_path / "real.mp4", n_frames=20)
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(real.read_bytes()[:200])
    return {"garbage": garbage, "unsupported": text, "empty": empty, "zero-frame": zero, "corrupt": corrupt}


@pytest.mark.parametrize("kind", ["garbage", "unsupported", "empty", "zero-frame", "corrupt"])
def test_bad_input_is_refused_and_leaves_nothing(media_root, tmp_path, kind):
    path = _bad_inputs(tmp_path)[kind]
    with pytest.raises(ApplicationError) as err:
        video_import(path=path, source="cam-1")
    assert err.value.code == "invalid_video"
    assert path.name in err.value.message
    assert Video.objects.count() == 0 and Source.objects.count() == 0 and SplitGroup.objects.count() == 0
    assert media_files(media_root) == []


def test_database_failure_removes_the_stored_file(media_root, small_video, monkeypatch):
    from trajectories.services import ingestion

    def boom(**kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(ingestion, "split_group_get_or_create", boom)
    with pytest.raises(RuntimeError):
        video_import(path=small_video, source="cam-1")
    assert Video.objects.count() == 0
    assert media_files(media_root) == []


# -- API upload -------------------------------------------------------------------------------
def _upload(client, path, **fields):
    with open(path, "rb") as fh:
        return client.post("/api/videos/", {"file": fh, **fields}, format="multipart")


def test_upload_creates_then_dedupes(media_root, manager_client, small_video):
    r = _upload(manager_client, small_video, source="cam-1", split_group="g1")
    assert r.status_code == 201, r.content
    assert r.json()["created"] is True and r.json()["video"]["frame_count"] == 30
    r2 = _upload(manager_client, small_video, source="cam-1")
    assert r2.status_code == 200 and r2.json()["created"] is False
    assert r2.json()["video"]["id"] == r.json()["video"]["id"]
    assert media_files(media_root / "tmp") == []


def test_upload_of_garbage_is_a_clear_400(media_root, manager_client, tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x01" * 5000)
    r = _upload(manager_client, bad, source="cam-1")
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "invalid_video" and "broken" in body["message"]
    assert Video.objects.count() == 0
    assert media_files(media_root) == []


def test_upload_over_the_size_limit_is_413(media_root, manager_client, small_video, settings):
    settings.TRAJLAB_MAX_UPLOAD_BYTES = 1000
    r = _upload(manager_client, small_video, source="cam-1")
    assert r.status_code == 413
    assert r.json()["code"] == "upload_too_large"
    assert Video.objects.count() == 0
    assert media_files(media_root) == []


def test_upload_needs_the_manager_role(media_root, client_for, annotator, small_video):
    r = _upload(client_for(annotator), small_video, source="cam-1")
    assert r.status_code == 403
    assert Video.objects.count() == 0


# -- management command -------------------------------------------------------------------------
def test_import_command_imports_folders_and_reports_failures(media_root, tmp_path):
    folder = tmp_path / "incoming"
    folder.mkdir()
    write_video(folder / "a.mp4", seed=1)
    write_video(folder / "b.avi", seed=2, fourcc="MJPG")
    (folder / "c.mp4").write_bytes(b"junk" * 100)
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="1 input"):
        call_command("import_videos", str(folder), "--source", "cam-1", stdout=out, stderr=err)
    assert Video.objects.count() == 2
    assert "c.mp4" in err.getvalue()
    assert out.getvalue().count("imported") == 2


def test_browser_upload_with_session_and_csrf(media_root, small_video, make_user, settings):
    """A session-authenticated upload is parsed by the CSRF check first; the limit still holds."""
    from django.test import Client

    make_user("manager", username="uploader")
    browser = Client(enforce_csrf_checks=True)
    assert browser.login(username="uploader", password="pw-for-tests")
    browser.get("/accounts/login/")  # sets the CSRF cookie
    token = browser.cookies["csrftoken"].value

    def upload():
        with open(small_video, "rb") as fh:
            return browser.post("/api/videos/", {"file": fh, "source": "cam-1"}, HTTP_X_CSRFTOKEN=token)

    settings.TRAJLAB_MAX_UPLOAD_BYTES = 1000
    r = upload()
    assert r.status_code == 413 and r.json()["code"] == "upload_too_large"
    assert media_files(media_root) == []
    settings.TRAJLAB_MAX_UPLOAD_BYTES = 10**9
    r = upload()
    assert r.status_code == 201, r.content


def test_overlong_names_are_refused_before_anything_is_written(media_root, tmp_path):
    long_name = tmp_path / ("x" * 230 + ".mp4")
    write_video(long_name)
    with pytest.raises(ApplicationError) as err:
        video_import(path=long_name, source="s" * 201)
    assert err.value.code == "invalid_name" and "source" in err.value.message
    assert Video.objects.count() == 0 and media_files(media_root) == []


def test_staging_sweep_removes_only_old_leftovers(media_root):
    import os
    import time

    from trajectories.services.ingestion import staging_sweep

    old = media_root / "tmp" / "upload-old"
    old.mkdir()
    (old / "clip.mp4").write_bytes(b"partial")
    fresh = media_root / "tmp" / "upload-fresh"
    fresh.mkdir()
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    assert staging_sweep() == 1
    assert not old.exists() and fresh.exists()


def test_a_large_upload_is_imported_by_a_job(media_root, manager_client, small_video, settings,
                                            django_capture_on_commit_callbacks):
    from common.models import Job
    from trajectories.services.ingestion import video_import_job_execute

    settings.TRAJLAB_SYNC_IMPORT_BYTES = 100  # everything counts as large
    with django_capture_on_commit_callbacks(execute=False) as queued:
        r = _upload(manager_client, small_video, source="cam-big")
    assert r.status_code == 202, r.content
    assert len(queued) == 1 and Video.objects.count() == 0
    job = Job.objects.get(pk=r.json()["job"]["id"])
    assert job.kind == "video_import" and job.status == "queued"
    job = video_import_job_execute(job_id=job.pk)  # what the worker's task calls
    assert job.status == "succeeded" and job.result["created"] is True
    video = Video.objects.get(pk=job.result["video"])
    assert video.source.name == "cam-big" and video.frame_count == 30
    assert media_files(media_root / "tmp") == []
    assert video_import_job_execute(job_id=job.pk).status == "succeeded"  # a re-delivery changes nothing
    assert Video.objects.count() == 1


def test_a_large_corrupt_upload_fails_its_job_and_leaves_nothing(media_root, manager_client, tmp_path, settings,
                                                                django_capture_on_commit_callbacks):
    from trajectories.services.ingestion import video_import_job_execute

    settings.TRAJLAB_SYNC_IMPORT_BYTES = 100
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"\x00\x01" * 5000)
    with django_capture_on_commit_callbacks(execute=False):
        r = _upload(manager_client, bad, source="cam-big")
    job = video_import_job_execute(job_id=r.json()["job"]["id"])
    assert job.status == "failed" and "broken.mp4" in job.error
    assert Video.objects.count() == 0 and media_files(media_root) == []
