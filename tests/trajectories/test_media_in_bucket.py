"""Imported videos in an S3 bucket (a real SeaweedFS server, tests/storage_server.py): the record
holds a key, frames are served from the read-through cache, a changed object is refused by name,
and the server dying mid-upload leaves no record pointing at a missing object."""
from __future__ import annotations

import cv2
import numpy as np
import pytest

from common import storage
from common.storage import BucketStore, StorageError
from models.media.video import FrameReader
from tests.conftest import media_files
from tests.storage_server import start_weed, stop_weed
from trajectories.models import Video
from trajectories.services.ingestion import video_import

pytestmark = pytest.mark.django_db


def decode(response) -> np.ndarray:
    assert response.status_code == 200, response.content[:300]
    return cv2.imdecode(np.frombuffer(b"".join(response), np.uint8), cv2.IMREAD_COLOR)


def test_imported_video_lives_in_the_bucket(object_storage, media_root, small_video, client_for, annotator):
    video = video_import(path=small_video, source="lab").video
    assert video.path == f"videos/{video.content_sha256[:2]}/{video.content_sha256}.mp4"   # a key, not a path
    assert object_storage.exists(video.path)
    assert not [p for p in media_files(media_root) if "videos" in p.parts]                 # nothing on local disk
    client = client_for(annotator)
    image = decode(client.get(f"/api/videos/{video.pk}/frames/7.jpg"))
    expected = FrameReader(small_video).read(7)
    assert image.shape == expected.shape and np.abs(image.astype(int) - expected).mean() < 8
    decode(client.get(f"/api/videos/{video.pk}/frames/20.jpg"))
    assert object_storage.cache.stats["fetches"] == 1      # the object came down once for both frames


def test_frame_folder_is_stored_frame_by_frame(object_storage, media_root, tmp_path, small_video):
    folder = tmp_path / "frames"
    folder.mkdir()
    reader = FrameReader(small_video)
    for i in range(5):
        cv2.imwrite(str(folder / f"{i:06d}.png"), reader.read(i))
    video = video_import(path=folder, source="lab", fps=10.0).video
    assert video.kind == Video.Kind.FRAMES
    assert object_storage.list(video.path) == [f"{video.path}/{i:06d}.png" for i in range(5)]
    np.testing.assert_array_equal(FrameReader(video.abspath).read(3), reader.read(3))


def test_video_changed_in_the_bucket_is_refused_by_name(object_storage, s3_server, s3_bucket, media_root,
                                                         small_video, client_for, annotator):
    video = video_import(path=small_video, source="lab").video
    s3_server.client().put_object(Bucket=s3_bucket, Key=object_storage.full_key(video.path), Body=b"not the video")
    r = client_for(annotator).get(f"/api/videos/{video.pk}/frames/3.jpg")
    assert r.status_code == 409 and r.json()["code"] == "checksum_mismatch"
    assert video.path in r.json()["message"] and "changed outside the platform" in r.json()["message"]


def test_missing_bucket_refuses_the_import_and_writes_nothing(object_storage, settings, media_root, small_video):
    settings.TRAJLAB_STORAGE_URL = "s3://trajlab-absent-bucket-for-import/x"
    storage.reset()
    with pytest.raises(StorageError, match="trajlab-absent-bucket-for-import/x/videos/.*does not exist"):
        video_import(path=small_video, source="lab")
    assert not Video.objects.exists() and small_video.exists()


@pytest.mark.slow
def test_server_killed_mid_upload_leaves_no_record(settings, media_root, tmp_path, small_video, monkeypatch):
    """A frame folder is uploaded object by object; the server dies after the second. The import
    is refused with the object named, no Video row exists, and once the server is back the same
    import (a retry) succeeds and every object its record names is there."""
    server = start_weed(tmp_path / "own-s3")
    try:
        server.client().create_bucket(Bucket="fault-test")
        settings.TRAJLAB_STORAGE_URL = "s3://fault-test/media"
        settings.AWS_S3_ENDPOINT_URL = server.endpoint
        settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY = server.access_key, server.secret_key
        settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / "cache"
        storage.reset()
        folder = tmp_path / "frames"
        folder.mkdir()
        reader = FrameReader(small_video)
        for i in range(6):
            cv2.imwrite(str(folder / f"{i:06d}.png"), reader.read(i))

        put = BucketStore.put_file
        calls = {"n": 0}

        def put_then_die(self, key, source):
            calls["n"] += 1
            if calls["n"] == 3:
                stop_weed(server)          # SIGKILL, between two objects of one video
            return put(self, key, source)

        monkeypatch.setattr(BucketStore, "put_file", put_then_die)
        with pytest.raises(StorageError, match=r"s3://fault-test/media/videos/.*/000002\.png: the storage server "
                                               r"cannot be reached") as err:
            video_import(path=folder, source="lab", fps=10.0)
        assert err.value.code == "storage_unreachable" and err.value.status_code == 503
        assert not Video.objects.exists()
        assert folder.is_dir()             # the input is kept for the retry

        monkeypatch.setattr(BucketStore, "put_file", put)
        server = start_weed(tmp_path / "own-s3", ports=_ports(server), fresh=False)
        storage.reset()
        video = video_import(path=folder, source="lab", fps=10.0).video
        objects = storage.store()
        assert objects.list(video.path) == [f"{video.path}/{i:06d}.png" for i in range(6)]
        for v in Video.objects.all():
            assert objects.list(v.path) or objects.exists(v.path)
    finally:
        stop_weed(server)
        storage.reset()


def _ports(server) -> list[int]:
    """The eight ports a server was started on, in :func:`tests.storage_server.weed_command`'s order."""
    flags = ("-master.port=", "-master.port.grpc=", "-volume.port=", "-volume.port.grpc=", "-filer.port=",
             "-filer.port.grpc=", "-s3.port=", "-s3.port.grpc=")
    return [int(next(a for a in server.command if a.startswith(f))[len(f):]) for f in flags]


def test_a_large_upload_reaches_a_worker_on_another_host_through_the_bucket(
        object_storage, media_root, tmp_path, manager_client, small_video, settings, django_capture_on_commit_callbacks):
    from common.models import Job
    from trajectories.services.ingestion import video_import_job_execute

    settings.TRAJLAB_SYNC_IMPORT_BYTES = 100  # everything counts as large
    with open(small_video, "rb") as fh, django_capture_on_commit_callbacks(execute=False):
        r = manager_client.post("/api/videos/", {"file": fh, "source": "cam-big"}, format="multipart")
    assert r.status_code == 202, r.content
    job = Job.objects.get(pk=r.json()["job"]["id"])
    assert object_storage.exists(job.params["staging"]) and media_files(media_root) == []   # staged in the bucket
    worker_media = tmp_path / "worker-host-media"                      # the worker shares no folder with the web
    (worker_media / "tmp").mkdir(parents=True)
    settings.MEDIA_ROOT = worker_media
    job = video_import_job_execute(job_id=job.pk)
    assert job.status == "succeeded", job.error
    video = Video.objects.get(pk=job.result["video"])
    assert object_storage.exists(video.path) and not object_storage.exists(job.params["staging"])
    assert media_files(worker_media) == []


def test_a_missing_bucket_is_named_by_the_api_and_the_command(object_storage, settings, media_root, small_video,
                                                              manager_client):
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.TRAJLAB_STORAGE_URL = "s3://trajlab-absent-bucket-for-import/x"
    storage.reset()
    with open(small_video, "rb") as fh:
        r = manager_client.post("/api/videos/", {"file": fh, "source": "cam"}, format="multipart")
    assert r.status_code == 400 and r.json()["code"] == "bucket_missing"
    assert "s3://trajlab-absent-bucket-for-import/x/videos/" in r.json()["message"]
    err = StringIO()
    with pytest.raises(CommandError, match="nothing was stored"):
        call_command("import_videos", str(small_video), stderr=err)
    assert "the bucket 'trajlab-absent-bucket-for-import' does not exist" in err.getvalue()
    assert not Video.objects.exists() and media_files(media_root) == []
