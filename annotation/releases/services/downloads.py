"""Downloads of a published release: the whole release as a streamed ``.tar`` and its
``SHA256SUMS`` on its own (the file whose SHA-256 names the release).

Both check what is on disk against what was published before sending anything: a missing file, or
one whose size is not the published one, is a 409 ``release_tampered`` listing the problems (the
full SHA-256 check is :func:`annotation.releases.services.releases.release_verify`; the receiver
repeats it with ``sha256sum -c SHA256SUMS``).
"""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

from annotation.models import Release
from annotation.releases.services.release_io.archive import tar_length, tar_members, tar_stream
from annotation.releases.services.release_io.export import CHECKSUMS
from annotation.releases.services.release_store import release_folder
from common.errors import ConflictError


@dataclass
class ReleaseArchive:
    filename: str                                # <name>-<version>.tar
    length: int                                  # bytes, exact
    manifest_sha256: str                         # SHA-256 of the SHA256SUMS inside
    chunks: Iterator[bytes]                      # the archive, written as it is read


def _tampered(release: Release, problems: list[str]) -> ConflictError:
    return ConflictError(f"release {release} on disk is not what was published: {problems[0]}"
                         + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""),
                         code="release_tampered", extra={"problems": problems[:50]})


def release_archive(*, release: Release) -> ReleaseArchive:
    """The release as a ``.tar`` of its published files under ``<name>-<version>/``."""
    folder = release_folder(release)
    files = list(release.files.order_by("path").values_list("path", "size_bytes"))
    problems = []
    for path, size in files:
        target = folder / path
        if not target.is_file():
            problems.append(f"{path} is missing")
        elif target.stat().st_size != size:
            problems.append(f"{path} has {target.stat().st_size} bytes, not the published {size}")
    if problems:
        raise _tampered(release, problems)
    members = tar_members(folder, files, prefix=f"{release.name}-{release.version}",
                          mtime=release.created_at.timestamp())
    return ReleaseArchive(filename=f"{release.name}-{release.version}.tar", length=tar_length(members),
                          manifest_sha256=release.manifest_sha256, chunks=tar_stream(members))


def release_checksums(*, release: Release) -> bytes:
    """The release's ``SHA256SUMS``, after checking that its SHA-256 is the published one."""
    path = release_folder(release) / CHECKSUMS
    if not path.is_file():
        raise _tampered(release, [f"{CHECKSUMS} is missing"])
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != release.manifest_sha256:
        raise _tampered(release, [f"{CHECKSUMS} does not have the published SHA-256 {release.manifest_sha256}"])
    return data
