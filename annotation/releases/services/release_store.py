"""Release folders in the platform's store (``common.storage``), for hosts that share no disk.

On local disk (the embedded default) a release's row names its folder under ``VAR_DIR/releases``,
as it always has. With a bucket (``TRAJLAB_STORAGE_URL``) every file of the folder is stored under
``releases/<name>/<version>/`` (its SHA-256 kept with it) before the release's row is written, and
the row names that key: a store that fails mid-upload takes away what it stored and leaves no
row; a row that cannot be written takes the objects away again.

Any host reads a stored release through :func:`release_folder`: its own copy under
``VAR_DIR/releases/<name>/<version>``, fetched file by file on first use and each file checked
against the SHA-256 the release recorded (a changed object is ``checksum_mismatch``, 409, naming
it). :func:`stored_problems` compares the objects themselves with what was published.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from django.conf import settings

from annotation.models import Release
from common.storage import StorageError, store

logger = logging.getLogger(__name__)

PREFIX = "releases"


def release_root() -> Path:
    """This host's folder of release folders."""
    return Path(settings.VAR_DIR) / "releases"


def release_key(name: str, version: str) -> str:
    return f"{PREFIX}/{name}/{version}"


def is_stored(release: Release) -> bool:
    """The release's row names a key in the store, not a folder of this host."""
    return not Path(release.path).is_absolute()


def _fetched_mark(release: Release) -> Path:
    # beside the folder, not in it: a release folder holds exactly its published files
    return release_root() / ".fetched" / f"{release.name}-{release.version}"


def release_store_upload(folder: Path, *, key: str, paths: list[str]) -> None:
    """Store the files ``paths`` of ``folder`` under ``key``; on any failure remove what was stored
    (as far as the store lets it) and raise."""
    objects = store()
    try:
        for path in paths:
            objects.put_file(f"{key}/{path}", folder / path)
    except BaseException:
        release_store_remove(key)
        raise


def release_store_remove(key: str) -> None:
    """Remove a stored release folder, best effort (what stays is an orphan no row names)."""
    objects = store()
    try:
        objects.delete(key)
    except StorageError:
        logger.warning("release objects under %s are left without a record", objects.name(key))


def mark_fetched(release: Release) -> None:
    """Record that this host's folder of ``release`` holds every published file."""
    mark = _fetched_mark(release)
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text(release.manifest_sha256, encoding="ascii")


def release_folder(release: Release) -> Path:
    """A folder of this host holding the release's published files: the folder its row names, or
    for a stored release this host's copy, fetched whole and checked file by file on first use."""
    if not is_stored(release):
        return Path(release.path)
    local = release_root() / release.name / release.version
    mark = _fetched_mark(release)
    if local.is_dir() and mark.is_file() and mark.read_text(encoding="ascii") == release.manifest_sha256:
        return local
    objects = store()
    local.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".fetching-{release.name}-{release.version}-", dir=local.parent))
    try:
        for path, sha in release.files.order_by("path").values_list("path", "sha256"):
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            objects.download(f"{release.path}/{path}", target, sha256=sha)
        shutil.rmtree(local, ignore_errors=True)
        staging.rename(local)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    mark_fetched(release)
    return local


def stored_problems(release: Release) -> list[str]:
    """What differs between a stored release's objects and what was published: a missing object, or
    one whose recorded SHA-256 is not the published one (empty for a release on local disk)."""
    if not is_stored(release):
        return []
    objects = store()
    problems = []
    for path, sha in release.files.order_by("path").values_list("path", "sha256"):
        key = f"{release.path}/{path}"
        try:
            recorded = objects.stored_sha256(key)
        except StorageError as exc:
            problems.append(f"{objects.name(key)}: {exc.message}")
            continue
        if recorded != sha:
            problems.append(f"{objects.name(key)} holds SHA-256 {recorded or 'none'}, not the published {sha}")
    return problems


def release_fetch_stored(key: str, dest: Path) -> Path:
    """Every object under ``key`` (a release folder someone stored) into the new folder ``dest``, to
    import it; each object checked against the SHA-256 stored with it."""
    objects = store()
    keys = objects.list(key)
    if not keys:
        raise StorageError(f"{objects.name(key)} holds no release", code="object_missing",
                           extra={"object": objects.name(key)})
    for full in keys:
        target = dest / full[len(key) + 1:]
        target.parent.mkdir(parents=True, exist_ok=True)
        objects.download(full, target)
    return dest
