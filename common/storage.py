"""Where the platform's files live: local disk under ``MEDIA_ROOT``, or an S3 bucket.

``TRAJLAB_STORAGE_URL`` unset keeps every file on local disk (the embedded default);
``s3://bucket/prefix`` puts them in that bucket through django-storages' S3 backend, reached with
``AWS_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
``AWS_DEFAULT_REGION``. Records store *keys*, relative and with forward slashes
(``videos/ab/ab….mp4``), never a local path; a key means the same file in both modes.

The contract of :class:`ObjectStore`:
- ``put_file`` is atomic: the object appears whole or not at all (S3 creates an object only once
  its upload completes; on disk a temporary name is renamed). Its SHA-256 is recorded in the
  object's metadata (``sha256``) and returned for the record.
- ``local_path`` gives a file OpenCV can open. On disk that is the file itself; from a bucket the
  object is downloaded once into a read-through cache (``TRAJLAB_STORAGE_CACHE_DIR``, at most
  ``TRAJLAB_STORAGE_CACHE_MB``, least recently used first out) and its checksum checked before it
  is used, so a video is fetched once per host, never per frame request. A folder key (frames of
  one video) is fetched object by object.
- On local disk ``local_path`` checks the file against the ``sha256`` the record holds too, once
  per process and again whenever the file's size or modification time changes.
- ``read`` returns bytes, optionally a byte range (a ranged GET).
- ``presigned_url`` lets a process that holds no credentials read one object (a presigned GET on
  a bucket, a ``file://`` URL on local disk): :func:`presigned_get`.
- Every failure is a :class:`StorageError` naming the object: no credentials, a bucket that does
  not exist, a missing object, a checksum that no longer matches, a server that does not answer.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from django.conf import settings
from django.core.files.storage import FileSystemStorage
from rest_framework import status

from common.errors import ApplicationError
from common.observability.metrics import storage_error

logger = logging.getLogger(__name__)

CHUNK = 1 << 20
SHA256_META = "sha256"
VERIFIED_MAX = 4096     # local files whose last good check a process remembers


class StorageError(ApplicationError):
    """A file could not be written or read; ``extra["object"]`` names it."""


@dataclass(frozen=True)
class StoredObject:
    key: str
    size: int
    sha256: str


def clean_key(key: str) -> str:
    """``key`` as stored: relative, forward slashes, no ``..``; a bad key is refused."""
    text = str(key).replace("\\", "/").strip("/")
    parts = PurePosixPath(text).parts
    if not text or any(p in ("..", ".") for p in parts) or text.startswith("/"):
        raise StorageError(f"{key!r} is not a storage key (relative, no '..')", code="storage_key_invalid",
                           extra={"object": str(key)})
    return "/".join(parts)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


class ObjectStore:
    """The operations the rest of the code uses; one implementation per place (disk, bucket)."""

    url: str           # where objects go, for messages: a folder or ``s3://bucket/prefix``
    remote: bool       # False: ``local_path`` is the stored file itself

    def put_file(self, key: str, source: Path) -> StoredObject: ...
    def put_folder(self, key: str, files: list[Path]) -> int: ...
    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def stored_sha256(self, key: str) -> str | None: ...
    def delete(self, key: str) -> None: ...
    def list(self, prefix: str) -> list[str]: ...
    def listed(self, prefix: str) -> list[tuple[str, dt.datetime]]: ...
    def local_path(self, key: str, *, sha256: str | None = None,
                   verify: Callable[[Path], str] | None = None) -> Path: ...
    def presigned_url(self, key: str, *, expires_s: int = 3600) -> str: ...
    def download(self, key: str, dest: Path, *, sha256: str | None = None) -> None: ...

    def name(self, key: str) -> str:
        return f"{self.url.rstrip('/')}/{clean_key(key)}"


class LocalStore(ObjectStore):
    """Files under ``MEDIA_ROOT`` through Django's ``FileSystemStorage``."""

    remote = False

    def __init__(self, root: Path):
        self.root = Path(root)
        self.url = str(self.root)
        self.files = FileSystemStorage(location=self.root)
        self._verified: dict[str, tuple] = {}    # path -> (size, mtime_ns, sha256) of its last good check
        self._verified_lock = threading.Lock()

    def path(self, key: str) -> Path:
        return Path(self.files.path(clean_key(key)))

    def put_file(self, key: str, source: Path) -> StoredObject:
        dest = self.path(key)
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")
        try:
            shutil.copyfile(source, tmp)
            sha = file_sha256(tmp)
            os.replace(tmp, dest)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return StoredObject(clean_key(key), dest.stat().st_size, sha)

    def put_folder(self, key: str, files: list[Path]) -> int:
        dest = self.path(key)
        tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex}.part")
        tmp.mkdir(parents=True)
        try:
            for f in files:
                shutil.copy2(f, tmp / f.name)
            os.replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return sum(f.stat().st_size for f in dest.iterdir())

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        try:
            with open(self.path(key), "rb") as fh:
                fh.seek(start)
                return fh.read() if length is None else fh.read(length)
        except FileNotFoundError:
            raise _missing(self.name(key)) from None

    def exists(self, key: str) -> bool:
        return self.files.exists(clean_key(key))

    def stored_sha256(self, key: str) -> str | None:
        """The file's own SHA-256 (a file on disk carries no recorded one)."""
        path = self.path(key)
        if not path.is_file():
            raise _missing(self.name(key))
        return file_sha256(path)

    def delete(self, key: str) -> None:
        path = self.path(key)
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def list(self, prefix: str) -> list[str]:
        return [key for key, _ in self.listed(prefix)]

    def listed(self, prefix: str) -> list[tuple[str, dt.datetime]]:
        """The keys under ``prefix`` with when each was last written (UTC), in key order."""
        base = self.path(prefix)
        if not base.is_dir():
            return []
        found = []
        for p in base.rglob("*"):
            try:
                if p.is_file():
                    found.append((p.relative_to(self.root).as_posix(),
                                  dt.datetime.fromtimestamp(p.stat().st_mtime, dt.UTC)))
            except FileNotFoundError:                # removed while listed
                continue
        return sorted(found)

    def local_path(self, key: str, *, sha256: str | None = None,
                   verify: Callable[[Path], str] | None = None) -> Path:
        """The file itself, checked against ``sha256`` (computed by ``verify``, default the file's
        SHA-256) when the record holds one: once per process, and again after its size or
        modification time changed. A file that is not there is returned unchecked (its reader says so)."""
        path = self.path(key)
        if sha256:
            self._check(key, path, sha256, verify)
        return path

    def _check(self, key: str, path: Path, sha256: str, verify: Callable[[Path], str] | None) -> None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return
        stamp = (st.st_size, st.st_mtime_ns, sha256)
        if self._verified.get(str(path)) == stamp:
            return
        got = (verify or file_sha256)(path)
        if got != sha256:
            raise checksum_mismatch(self.name(key), sha256, got)
        with self._verified_lock:
            if len(self._verified) >= VERIFIED_MAX:
                self._verified.pop(next(iter(self._verified)))
            self._verified[str(path)] = stamp

    def presigned_url(self, key: str, *, expires_s: int = 3600) -> str:
        return self.path(key).as_uri()

    def download(self, key: str, dest: Path, *, sha256: str | None = None) -> None:
        """A copy of the file at ``dest``, checked against ``sha256`` when given."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(self.path(key), dest)
        except FileNotFoundError:
            raise _missing(self.name(key)) from None
        if sha256 and (got := file_sha256(dest)) != sha256:
            dest.unlink(missing_ok=True)
            raise checksum_mismatch(self.name(key), sha256, got)


def _missing(name: str) -> StorageError:
    return StorageError(f"{name} does not exist", code="object_missing", extra={"object": name},
                        status_code=status.HTTP_404_NOT_FOUND)


def storage_failure(exc: Exception, name: str) -> StorageError:
    """A botocore failure as a ``StorageError`` naming the object ``name``."""
    from botocore import exceptions as bx

    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, bx.NoCredentialsError | bx.PartialCredentialsError):
        return StorageError(f"{name}: no credentials for the bucket (set AWS_ACCESS_KEY_ID and "
                            "AWS_SECRET_ACCESS_KEY)", code="storage_credentials_missing", extra={"object": name})
    if isinstance(exc, bx.ClientError):
        code = exc.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            return StorageError(f"{name}: the bucket does not exist", code="bucket_missing",
                                extra={"object": name})
        if code in ("NoSuchKey", "404", "NotFound"):
            return _missing(name)
        if code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "403"):
            return StorageError(f"{name}: the storage server refused the credentials ({code})",
                                code="storage_access_denied", extra={"object": name})
        return StorageError(f"{name}: the storage server answered {code or exc}", code="storage_failed",
                            extra={"object": name}, status_code=status.HTTP_502_BAD_GATEWAY)
    if isinstance(exc, bx.BotoCoreError | ConnectionError | OSError):
        return StorageError(f"{name}: the storage server cannot be reached ({exc})", code="storage_unreachable",
                            extra={"object": name}, status_code=status.HTTP_503_SERVICE_UNAVAILABLE)
    return StorageError(f"{name}: {exc}", code="storage_failed", extra={"object": name},
                        status_code=status.HTTP_502_BAD_GATEWAY)


class BucketStore(ObjectStore):
    """Objects in ``s3://bucket/prefix`` through django-storages' ``S3Storage`` (boto3)."""

    remote = True

    def __init__(self, url: str, *, cache: ReadCache):
        from botocore.config import Config
        from storages.backends.s3 import S3Storage

        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc:
            raise StorageError(f"TRAJLAB_STORAGE_URL {url!r} is not s3://bucket/prefix", code="storage_url_invalid",
                               extra={"object": url})
        self.bucket_name, self.prefix = parts.netloc, parts.path.strip("/")
        self.url = f"s3://{self.bucket_name}/{self.prefix}".rstrip("/")
        self.cache = cache
        self._bucket_seen = False
        self.files = S3Storage(
            bucket_name=self.bucket_name, location=self.prefix, endpoint_url=settings.AWS_S3_ENDPOINT_URL,
            access_key=settings.AWS_ACCESS_KEY_ID, secret_key=settings.AWS_SECRET_ACCESS_KEY,
            region_name=settings.AWS_DEFAULT_REGION, file_overwrite=True, querystring_auth=True,
            addressing_style="path", signature_version="s3v4",
            client_config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5,
                                 read_timeout=60, signature_version="s3v4", s3={"addressing_style": "path"}))

    def _object(self, key: str):
        return self.files.bucket.Object(self.full_key(key))

    def full_key(self, key: str) -> str:
        return f"{self.prefix}/{clean_key(key)}" if self.prefix else clean_key(key)

    def _call(self, key: str, fn, operation: str):
        if not self._bucket_seen:
            self._bucket_check(key)
        try:
            return fn()
        except Exception as exc:
            failure = storage_failure(exc, self.name(key))
            if failure.code != "object_missing":            # a missing object is an answer, not a failure
                storage_error(operation)
            raise failure from exc

    def _bucket_check(self, key: str) -> None:
        """Refuse a bucket that does not exist before the first request (some servers, SeaweedFS
        among them, would create it on the first write)."""
        try:
            self.files.connection.meta.client.head_bucket(Bucket=self.bucket_name)
        except Exception as exc:
            failure = storage_failure(exc, self.name(key))
            storage_error("head_bucket")
            if failure.code == "object_missing":
                failure = StorageError(f"{self.name(key)}: the bucket {self.bucket_name!r} does not exist",
                                       code="bucket_missing", extra={"object": self.name(key)})
            raise failure from exc
        self._bucket_seen = True

    def put_file(self, key: str, source: Path) -> StoredObject:
        sha = file_sha256(source)
        size = Path(source).stat().st_size
        self._call(key, operation="put", fn=lambda: self._object(key).upload_file(
            str(source), ExtraArgs={"Metadata": {SHA256_META: sha}}))
        return StoredObject(clean_key(key), size, sha)

    def put_folder(self, key: str, files: list[Path]) -> int:
        """Each file as ``key/<name>``; on a failure the objects already written are removed."""
        done: list[str] = []
        try:
            for f in files:
                self.put_file(f"{clean_key(key)}/{f.name}", f)
                done.append(f"{clean_key(key)}/{f.name}")
        except BaseException:
            for k in done:
                self._delete_quietly(k)
            raise
        return sum(f.stat().st_size for f in files)

    def _delete_quietly(self, key: str) -> None:
        try:
            self.delete(key)
        except StorageError:
            logger.warning("could not remove %s after a failed write", self.name(key))

    def read(self, key: str, *, start: int = 0, length: int | None = None) -> bytes:
        if start == 0 and length is None:
            return self._call(key, operation="get", fn=lambda: self._object(key).get()["Body"].read())
        end = "" if length is None else str(start + length - 1)
        return self._call(key, operation="range_get", fn=lambda: self._object(key).get(Range=f"bytes={start}-{end}")["Body"].read())

    def head(self, key: str) -> dict:
        return self._call(key, operation="head", fn=lambda: self.files.connection.meta.client.head_object(
            Bucket=self.bucket_name, Key=self.full_key(key)))

    def stored_sha256(self, key: str) -> str | None:
        """The SHA-256 stored with the object when it was put (``None``: an object put without)."""
        return self.head(key).get("Metadata", {}).get(SHA256_META)

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
            return True
        except StorageError as exc:
            if exc.code == "object_missing":
                return False
            raise

    def delete(self, key: str) -> None:
        keys = self.list(key) or [clean_key(key)]
        for k in keys:
            self._call(k, operation="delete", fn=lambda k=k: self._object(k).delete())
        self.cache.forget(self.url, clean_key(key))

    def list(self, prefix: str) -> list[str]:
        return [key for key, _ in self.listed(prefix)]

    def listed(self, prefix: str) -> list[tuple[str, dt.datetime]]:
        """The keys under ``prefix`` with when each was last written (UTC), in key order."""
        base = self.full_key(prefix) + "/"
        strip = len(self.prefix) + 1 if self.prefix else 0
        pages = self._call(prefix, operation="list", fn=lambda: list(self.files.connection.meta.client.get_paginator(
            "list_objects_v2").paginate(Bucket=self.bucket_name, Prefix=base)))
        return sorted((o["Key"][strip:], o["LastModified"].astimezone(dt.UTC))
                      for page in pages for o in page.get("Contents", []))

    def presigned_url(self, key: str, *, expires_s: int = 3600) -> str:
        return self._call(key, operation="presign", fn=lambda: self.files.connection.meta.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket_name, "Key": self.full_key(key)}, ExpiresIn=expires_s))

    def local_path(self, key: str, *, sha256: str | None = None,
                   verify: Callable[[Path], str] | None = None) -> Path:
        """The object (or the folder of objects under ``key/``) in the read-through cache, fetched
        once and checked: against ``sha256`` computed by ``verify`` (default: the file's
        SHA-256) when given, else against the checksum recorded at write time."""
        key = clean_key(key)
        return self.cache.get(self.url, key, lambda tmp: self._fetch(key, tmp, sha256=sha256, verify=verify))

    def _fetch(self, key: str, tmp: Path, *, sha256: str | None, verify) -> None:
        members = self.list(key)
        if members:  # a folder: one GET per object
            tmp.mkdir(parents=True)
            for member in members:
                self._download(member, tmp / PurePosixPath(member).name, sha256=None)
        else:
            self._download(key, tmp, sha256=None if verify else sha256)
        if sha256 and (verify or members):
            got = (verify or file_sha256)(tmp)
            if got != sha256:
                raise checksum_mismatch(self.name(key), sha256, got)

    def download(self, key: str, dest: Path, *, sha256: str | None = None) -> None:
        """The object into the local file ``dest`` (not cached), checked against ``sha256`` when
        given, else against the checksum recorded in its metadata."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._download(key, dest, sha256=sha256)
        except BaseException:
            Path(dest).unlink(missing_ok=True)
            raise

    def _download(self, key: str, dest: Path, *, sha256: str | None) -> None:
        obj = self._object(key)
        self._call(key, operation="download", fn=lambda: obj.download_file(str(dest)))
        recorded = sha256 or self._call(key, operation="head", fn=lambda: obj.metadata).get(SHA256_META)
        if recorded:
            got = file_sha256(dest)
            if got != recorded:
                raise checksum_mismatch(self.name(key), recorded, got)


def checksum_mismatch(name: str, expected: str, got: str) -> StorageError:
    return StorageError(f"{name} was changed outside the platform: its SHA-256 is {got[:12]}…, "
                        f"{expected[:12]}… was recorded", code="checksum_mismatch",
                        extra={"object": name, "expected": expected, "got": got},
                        status_code=status.HTTP_409_CONFLICT)


STALE_PART_S = 3600   # a download folder this old belongs to a process that died: the cache removes it


class ReadCache:
    """Objects fetched from a bucket, on local disk, least recently used out past ``limit_bytes``.

    Each entry is a folder ``<root>/<hash of store and key>/`` holding the object under its own
    name (or the folder of a folder key); its time is touched on every hit. Entries are renamed
    into place only once complete and checked, so a reader never sees half a file."""

    def __init__(self, root: Path, limit_bytes: int):
        self.root = Path(root)
        self.limit_bytes = int(limit_bytes)
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "fetches": 0, "evicted": 0}

    def slot(self, url: str, key: str) -> Path:
        return self.root / hashlib.sha256(f"{url}\0{key}".encode()).hexdigest()[:32]

    def get(self, url: str, key: str, fetch: Callable[[Path], None]) -> Path:
        slot = self.slot(url, key)
        path = slot / PurePosixPath(key).name
        if path.exists():
            try:
                os.utime(slot)
            except FileNotFoundError:      # evicted by another process just now: fetch it again
                pass
            else:
                self.stats["hits"] += 1
                return path
        tmp = self.root / f".{uuid.uuid4().hex}.part"
        try:
            tmp.mkdir(parents=True)
            fetch(tmp / path.name)
            try:
                os.replace(tmp, slot)
            except OSError:  # another process placed it first: theirs is as good
                _remove(tmp)
        except BaseException:
            _remove(tmp)
            raise
        self.stats["fetches"] += 1
        self.trim(keep=slot)
        return path

    def forget(self, url: str, key: str) -> None:
        _remove(self.slot(url, key))

    def trim(self, *, keep: Path | None = None) -> None:
        """Remove least recently used entries until the cache fits its limit (``keep`` stays)."""
        with self._lock:
            entries = []
            stale = time.time() - STALE_PART_S
            for slot in self.root.iterdir():
                try:
                    if slot.name.startswith("."):     # a download in progress, or one whose process died
                        if slot.stat().st_mtime < stale:
                            _remove(slot)
                        continue
                    size = sum(p.stat().st_size for p in slot.rglob("*") if p.is_file())
                    entries.append((slot.stat().st_mtime, size, slot))
                except FileNotFoundError:               # removed by another process meanwhile
                    continue
            total = sum(size for _, size, _ in entries)
            for _, size, slot in sorted(entries, key=lambda e: e[0]):
                if total <= self.limit_bytes:
                    break
                if slot == keep:
                    continue
                _remove(slot)
                total -= size
                self.stats["evicted"] += 1


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists():
        path.unlink(missing_ok=True)


_stores: dict[tuple, ObjectStore] = {}


def _settings_key() -> tuple:
    if not settings.TRAJLAB_STORAGE_URL:
        return ("", str(settings.MEDIA_ROOT))
    return (settings.TRAJLAB_STORAGE_URL, settings.AWS_S3_ENDPOINT_URL, settings.AWS_ACCESS_KEY_ID,
            settings.AWS_SECRET_ACCESS_KEY, settings.AWS_DEFAULT_REGION, str(settings.TRAJLAB_STORAGE_CACHE_DIR),
            settings.TRAJLAB_STORAGE_CACHE_MB)


def store() -> ObjectStore:
    """The store the settings name (one per process and setting values)."""
    key = _settings_key()
    found = _stores.get(key)
    if found is None:
        url = settings.TRAJLAB_STORAGE_URL
        if url:
            cache = ReadCache(Path(settings.TRAJLAB_STORAGE_CACHE_DIR), settings.TRAJLAB_STORAGE_CACHE_MB * 2**20)
            found = BucketStore(url, cache=cache)
        else:
            found = LocalStore(Path(settings.MEDIA_ROOT))
        _stores[key] = found
    return found


def presigned_get(key: str, *, expires_s: int = 3600) -> str:
    """A URL that reads the object ``key`` without the platform's credentials, for a process on
    another host: a presigned GET (valid ``expires_s`` seconds) on a bucket, ``file://`` on local
    disk. It names one object; whoever fetches it checks the checksum the record holds."""
    return store().presigned_url(clean_key(key), expires_s=expires_s)


def reset() -> None:
    """Forget the stores built so far (tests that change the settings)."""
    _stores.clear()
