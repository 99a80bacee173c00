"""Releases in an S3 bucket (a real SeaweedFS server, tests/storage_server.py): a release's files
are stored under ``releases/<name>/<version>/`` before its row names that key; another host (its own
VAR_DIR and cache, nothing shared but the database and the bucket) verifies, diffs and downloads it;
an object changed behind the platform's back is refused by name; a release stored in the bucket
imports from there; and the S3 server dying mid-release leaves no row and no objects."""
from __future__ import annotations

import io
import tarfile

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Release
from annotation.releases.services.downloads import release_archive
from annotation.releases.services.release_store import release_folder
from annotation.releases.services.releases import release_create, release_diff, release_verify
from common import storage
from common.storage import BucketStore, StorageError
from tests.annotation.test_release_bytes import build_scope
from tests.storage_server import start_weed, stop_weed

pytestmark = pytest.mark.django_db


@pytest.fixture
def host(settings, tmp_path):
    """This process plays one host: its own VAR_DIR and read-through cache."""
    def become(name: str):
        settings.VAR_DIR = tmp_path / name / "var"
        settings.VAR_DIR.mkdir(parents=True)
        settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / name / "cache"
        storage.reset()
        return storage.store()
    return become


def test_a_release_is_stored_and_another_host_verifies_diffs_and_downloads_it(object_storage, host, settings):
    build_scope(("train",))
    host("exporter")
    release = release_create(name="bkt", version="1.0.0", splits=["train"])
    assert release.path == "releases/bkt/1.0.0"
    objects = storage.store()
    files = dict(release.files.values_list("path", "sha256"))
    assert objects.list(release.path) == sorted(f"{release.path}/{p}" for p in files)
    for path in ("SHA256SUMS", "data/relations/train.parquet", "README.md"):
        assert objects.head(f"{release.path}/{path}")["Metadata"]["sha256"] == files[path]
    second = release_create(name="bkt", version="1.1.0", splits=["train"])

    host("web-2")                                    # shares nothing with the exporter but the bucket
    assert release_verify(release=release) == []
    folder = release_folder(release)
    assert folder.is_relative_to(settings.VAR_DIR)
    assert release_diff(old=release, new=second)["tables"]["relations"] == {"added": 0, "removed": 0, "changed": 0}
    archive = release_archive(release=release)
    data = b"".join(archive.chunks)
    assert len(data) == archive.length
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        assert {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()} == set(files)

    # an object changed behind the platform's back, on a host without a copy yet
    host("web-3")
    key = f"{release.path}/data/relations.jsonl"
    objects = storage.store()
    objects.files.connection.meta.client.put_object(Bucket=objects.bucket_name, Key=objects.full_key(key),
                                                    Body=b"{}\n", Metadata={"sha256": files["data/relations.jsonl"]})
    with pytest.raises(StorageError) as changed:
        release_folder(release)
    assert changed.value.code == "checksum_mismatch" and "data/relations.jsonl" in changed.value.message
    objects.files.connection.meta.client.put_object(Bucket=objects.bucket_name, Key=objects.full_key(key), Body=b"")
    with pytest.raises(StorageError):
        release_verify(release=release)

    # a stored release checks (and would import) from the bucket
    call_command("import_release", second.path, "--from-store", "--check-only")
    with pytest.raises(CommandError, match="holds no release"):
        call_command("import_release", "releases/bkt/9.9.9", "--from-store", "--check-only")


@pytest.mark.slow
def test_the_server_dying_mid_release_leaves_no_row_and_no_objects(settings, tmp_path, host, monkeypatch):
    build_scope(("train",))
    server = start_weed(tmp_path / "own-s3")
    try:
        server.client().create_bucket(Bucket="release-fault")
        settings.TRAJLAB_STORAGE_URL = "s3://release-fault/lab"
        settings.AWS_S3_ENDPOINT_URL = server.endpoint
        settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY = server.access_key, server.secret_key
        host("exporter")
        put = BucketStore.put_file
        stored = []

        def dies_midway(self, key, source):
            stored.append(key)
            if len(stored) == 10:
                stop_weed(server)                    # SIGKILL while the release goes up
            return put(self, key, source)

        monkeypatch.setattr(BucketStore, "put_file", dies_midway)
        with pytest.raises(StorageError) as failed:
            release_create(name="bkt", version="1.0.0", splits=["train"])
        assert "release-fault/lab/releases/bkt/1.0.0/" in failed.value.message
        assert not Release.objects.exists()
        assert not (settings.VAR_DIR / "releases" / "bkt" / "1.0.0").exists()
        assert [p.name for p in (settings.VAR_DIR / "releases").iterdir()] == []      # no staging left

        monkeypatch.setattr(BucketStore, "put_file", put)
        from tests.trajectories.test_media_in_bucket import _ports
        server = start_weed(tmp_path / "own-s3", ports=_ports(server), fresh=False)
        storage.reset()
        left = storage.store().list("releases/bkt/1.0.0")
        # the nine objects stored before the server died were whole, and went again when the upload
        # failed if the server let them; whatever stays is an orphan no row names
        assert len(left) <= 9
        release = release_create(name="bkt", version="1.0.0", splits=["train"])     # publishing again works
        assert release_verify(release=release) == []
    finally:
        stop_weed(server)
        storage.reset()


class _WebHostDied(BaseException):
    """The web process publishing the release is killed: nothing after it runs, nothing is cleaned up."""


def test_a_web_host_killed_mid_export_leaves_orphans_and_the_request_sent_again_publishes(
        object_storage, host, monkeypatch):
    from annotation.releases.services import release_store, releases

    build_scope(("train",))
    host("web-1")
    put, stored = BucketStore.put_file, []

    def killed_after_three(self, key, source):
        if len(stored) == 3:
            raise _WebHostDied
        stored.append(key)
        return put(self, key, source)

    monkeypatch.setattr(BucketStore, "put_file", killed_after_three)
    for module in (release_store, releases):             # a killed process removes nothing it stored
        monkeypatch.setattr(module, "release_store_remove", lambda key: None)
    with pytest.raises(_WebHostDied):
        release_create(name="bkt", version="1.0.0", splits=["train"])
    assert not Release.objects.exists() and object_storage.list("releases/bkt/1.0.0") == sorted(stored)

    monkeypatch.setattr(BucketStore, "put_file", put)
    host("web-2")                                          # the request sent again, to another web host
    release = release_create(name="bkt", version="1.0.0", splits=["train"])
    files = dict(release.files.values_list("path", "sha256"))
    assert object_storage.list(release.path) == sorted(f"{release.path}/{p}" for p in files)   # no stray object
    for key in stored:                                     # the orphans were written over with the same files
        assert object_storage.head(key)["Metadata"]["sha256"] == files[key.removeprefix(f"{release.path}/")]
    assert release_verify(release=release) == []
