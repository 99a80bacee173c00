"""A published release as one streamed ``.tar``: every file of the release under
``<name>-<version>/``, ``SHA256SUMS`` among them, so ``tar -x`` then ``sha256sum -c SHA256SUMS``
checks it, and the SHA-256 of ``SHA256SUMS`` is the release's ``manifest_sha256``.

The archive is written as it is sent (POSIX pax headers, the files read in blocks), so memory stays
bounded whatever the release's size, and its exact length is known before the first byte.
"""
from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from annotation.releases.services.release_io.export import HASH_BLOCK

BLOCK = tarfile.BLOCKSIZE                        # 512: headers and file data are padded to it
END = b"\0" * (2 * BLOCK)                        # two zero blocks end a tar archive


@dataclass(frozen=True)
class Member:
    path: Path                                   # the file on disk
    size: int                                    # its size as published (bytes)
    header: bytes                                # its pax header blocks


def _padding(size: int) -> int:
    return -size % BLOCK


def tar_members(folder: Path, files: list[tuple[str, int]], *, prefix: str, mtime: float) -> list[Member]:
    """Headers for ``files`` ({relative path, size}) of ``folder``, in the order given; every file
    read-only (0444), owned by nobody in particular, dated ``mtime``."""
    members = []
    for rel, size in files:
        info = tarfile.TarInfo(f"{prefix}/{rel}")
        info.size, info.mtime, info.mode, info.type = size, int(mtime), 0o444, tarfile.REGTYPE
        info.uname = info.gname = ""
        members.append(Member(Path(folder) / rel, size, info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8")))
    return members


def tar_length(members: list[Member]) -> int:
    """The archive's exact length in bytes."""
    return sum(len(m.header) + m.size + _padding(m.size) for m in members) + len(END)


def tar_stream(members: list[Member]) -> Iterator[bytes]:
    """The archive in chunks of at most ``HASH_BLOCK`` bytes of file data. A file whose length on
    disk is not the published one ends the stream with an OSError (the client sees a short
    download, never a wrong archive of the right length)."""
    for m in members:
        yield m.header
        left = m.size
        with open(m.path, "rb") as fh:
            while left:
                chunk = fh.read(min(HASH_BLOCK, left))
                if not chunk:
                    raise OSError(f"{m.path} is shorter than its published {m.size} bytes")
                left -= len(chunk)
                yield chunk
            if fh.read(1):
                raise OSError(f"{m.path} is longer than its published {m.size} bytes")
        yield b"\0" * _padding(m.size)
    yield END
