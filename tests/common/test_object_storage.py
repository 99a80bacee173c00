"""The object store against a real S3 server (SeaweedFS, tests/storage_server.py) and local disk."""
from __future__ import annotations

import hashlib
import os
import time
import uuid

import pytest
import requests

from common import storage
from common.observability import metrics
from common.storage import StorageError, clean_key


def test_put_read_range_list_delete(object_storage, tmp_path):
    src = tmp_path / "clip.bin"
    src.write_bytes(bytes(range(256)) * 100)
    stored = object_storage.put_file("videos/ab/clip.bin", src)
    assert stored.size == 25600 and stored.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    assert object_storage.exists("videos/ab/clip.bin") and not object_storage.exists("videos/ab/other.bin")
    assert object_storage.read("videos/ab/clip.bin", start=10, length=5) == bytes(range(10, 15))   # ranged GET
    assert object_storage.read("videos/ab/clip.bin") == src.read_bytes()
    assert object_storage.list("videos") == ["videos/ab/clip.bin"]
    object_storage.delete("videos/ab/clip.bin")
    assert not object_storage.exists("videos/ab/clip.bin")
    with pytest.raises(StorageError, match="clip.bin does not exist") as err:
        object_storage.read("videos/ab/clip.bin")
    assert err.value.status_code == 404 and err.value.extra["object"].endswith("videos/ab/clip.bin")


def test_local_path_is_fetched_once_and_checked(object_storage, tmp_path):
    src = tmp_path / "v.mp4"
    src.write_bytes(b"x" * 5000)
    sha = object_storage.put_file("videos/v.mp4", src).sha256
    first = object_storage.local_path("videos/v.mp4", sha256=sha)
    assert first.read_bytes() == src.read_bytes()
    assert object_storage.local_path("videos/v.mp4", sha256=sha) == first
    assert object_storage.cache.stats["fetches"] == 1 and object_storage.cache.stats["hits"] == 1


def test_object_changed_behind_the_platform_is_refused(object_storage, s3_server, s3_bucket, tmp_path):
    src = tmp_path / "v.mp4"
    src.write_bytes(b"original")
    stored = object_storage.put_file("videos/v.mp4", src)
    # someone rewrites the object with the bucket's own tools, keeping the recorded metadata
    s3_server.client().put_object(Bucket=s3_bucket, Key=object_storage.full_key("videos/v.mp4"), Body=b"tampered",
                                  Metadata={"sha256": stored.sha256})
    with pytest.raises(StorageError, match="changed outside the platform") as err:
        object_storage.local_path("videos/v.mp4")
    assert err.value.code == "checksum_mismatch" and err.value.status_code == 409
    assert "videos/v.mp4" in err.value.extra["object"]
    assert not object_storage.cache.slot(object_storage.url, "videos/v.mp4").exists()   # nothing half-kept
    with pytest.raises(StorageError, match="changed outside"):
        object_storage.local_path("videos/v.mp4", sha256=stored.sha256)


def test_folder_key_is_fetched_object_by_object(object_storage, tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        (folder / f"{i:06d}.jpg").write_bytes(f"frame {i}".encode())
    object_storage.put_folder("videos/cd/frames", sorted(folder.iterdir()))
    local = object_storage.local_path("videos/cd/frames")
    assert sorted(p.name for p in local.iterdir()) == ["000000.jpg", "000001.jpg", "000002.jpg"]
    assert (local / "000001.jpg").read_bytes() == b"frame 1"


def test_cache_keeps_to_its_size(object_storage, settings, tmp_path):
    cache = storage.ReadCache(tmp_path / "small-cache", limit_bytes=2500)
    object_storage.cache = cache
    for i in range(4):
        src = tmp_path / f"o{i}.bin"
        src.write_bytes(bytes([i]) * 1000)
        object_storage.put_file(f"o/{i}.bin", src)
        object_storage.local_path(f"o/{i}.bin")
    kept = sorted(p for p in cache.root.iterdir() if not p.name.startswith("."))
    assert len(kept) == 2 and cache.stats["evicted"] == 2
    assert object_storage.local_path("o/3.bin").read_bytes() == bytes([3]) * 1000   # the newest stayed


def test_presigned_url_reads_without_credentials(object_storage, tmp_path):
    src = tmp_path / "a.txt"
    src.write_bytes(b"for a worker on another host")
    object_storage.put_file("runs/a.txt", src)
    url = object_storage.presigned_url("runs/a.txt", expires_s=60)
    assert requests.get(url, timeout=10).content == b"for a worker on another host"
    assert requests.get(url.split("?")[0], timeout=10).status_code == 403   # unsigned: refused


def test_bucket_that_does_not_exist_is_named(object_storage, settings, tmp_path):
    bucket = f"trajlab-absent-{uuid.uuid4().hex[:8]}"
    settings.TRAJLAB_STORAGE_URL = f"s3://{bucket}/x"
    storage.reset()
    src = tmp_path / "a.bin"
    src.write_bytes(b"a")
    with pytest.raises(StorageError, match=f"s3://{bucket}/x/a.bin: the bucket '{bucket}' does not exist") as err:
        storage.store().put_file("a.bin", src)
    assert err.value.code == "bucket_missing" and err.value.status_code == 400


def test_bucket_url_without_credentials_is_named(object_storage, settings, tmp_path, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    settings.AWS_ACCESS_KEY_ID = settings.AWS_SECRET_ACCESS_KEY = None
    storage.reset()
    with pytest.raises(StorageError, match="a.bin: no credentials") as err:
        storage.store().exists("a.bin")
    assert err.value.code == "storage_credentials_missing"


def test_wrong_credentials_are_refused(object_storage, settings):
    settings.AWS_SECRET_ACCESS_KEY = "not-the-secret"
    storage.reset()
    with pytest.raises(StorageError, match="refused the credentials") as err:
        storage.store().exists("a.bin")
    assert err.value.code == "storage_access_denied"


def test_keys_are_relative(settings, tmp_path):
    settings.TRAJLAB_STORAGE_URL = ""
    settings.MEDIA_ROOT = tmp_path
    storage.reset()
    for bad in ("../etc/passwd", "", "a/../../b"):
        with pytest.raises(StorageError, match="not a storage key"):
            clean_key(bad)
    src = tmp_path / "in.bin"
    src.write_bytes(b"abc")
    local = storage.store()
    assert local.put_file("v/in.bin", src).size == 3
    assert local.local_path("v/in.bin") == tmp_path / "v" / "in.bin"
    assert local.read("v/in.bin", start=1, length=1) == b"b" and local.list("v") == ["v/in.bin"]
    storage.reset()


def test_failed_requests_are_counted_for_the_metrics(object_storage, settings, tmp_path):
    """``trajlab_storage_errors_total`` counts what the store could not do, per operation; an
    object that is not there is an answer, not a failure."""
    def count(operation: str) -> float:
        return metrics.STORAGE_ERRORS.labels(operation)._value.get()

    before_get, before_check = count("get"), count("head_bucket")
    with pytest.raises(StorageError) as err:
        storage.store().read(f"missing-{uuid.uuid4().hex}.bin")
    assert err.value.code == "object_missing" and count("get") == before_get
    settings.AWS_SECRET_ACCESS_KEY = "not-the-secret"
    storage.reset()
    with pytest.raises(StorageError, match="refused the credentials"):
        storage.store().read("a.bin")
    assert count("head_bucket") == before_check + 1


def test_the_cache_removes_downloads_left_by_a_dead_process(tmp_path):
    cache = storage.ReadCache(tmp_path, limit_bytes=1 << 20)
    dead, live = tmp_path / ".dead.part", tmp_path / ".live.part"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "video.mp4").write_bytes(b"x" * 10)
    old = time.time() - storage.STALE_PART_S - 60
    os.utime(dead, (old, old))
    cache.trim()
    assert not dead.exists() and live.exists()


def test_local_reads_are_checked_against_the_recorded_checksum(settings, tmp_path):
    """On local disk a file whose record holds a SHA-256 is checked when read: once per process,
    again after its size or time changed; a changed file is an error naming it."""
    settings.TRAJLAB_STORAGE_URL = ""
    settings.MEDIA_ROOT = tmp_path / "media"
    storage.reset()
    local = storage.store()
    src = tmp_path / "v.bin"
    src.write_bytes(b"recorded content")
    sha = local.put_file("videos/v.bin", src).sha256
    calls = []

    def counted(path):
        calls.append(path)
        return storage.file_sha256(path)

    path = local.local_path("videos/v.bin", sha256=sha, verify=counted)
    assert local.local_path("videos/v.bin", sha256=sha, verify=counted) == path and len(calls) == 1
    path.write_bytes(b"changed behind its back")
    with pytest.raises(StorageError, match=r"videos/v.bin was changed outside the platform") as err:
        local.local_path("videos/v.bin", sha256=sha)
    assert err.value.code == "checksum_mismatch" and err.value.status_code == 409
    assert local.local_path("videos/absent.bin", sha256=sha).name == "absent.bin"   # its reader says it is missing
    dest = tmp_path / "copy.bin"
    with pytest.raises(StorageError, match="changed outside the platform"):
        local.download("videos/v.bin", dest, sha256=sha)
    assert not dest.exists()
    storage.reset()
