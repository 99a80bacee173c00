"""Helpers for tests that inspect media files."""
from __future__ import annotations

import struct
from pathlib import Path


def mp4_sync_samples(path: Path) -> list[int] | None:
    """0-based indices of the keyframes of the first track of an MP4 (its ``stss`` box), or None
    when the track has no ``stss`` (every sample is a keyframe)."""
    data = Path(path).read_bytes()

    def children(start: int, end: int):
        i = start
        while i + 8 <= end:
            size, kind = struct.unpack(">I4s", data[i:i + 8])
            header = 8
            if size == 1:
                size, header = struct.unpack(">Q", data[i + 8:i + 16])[0], 16
            elif size == 0:
                size = end - i
            yield kind, i + header, i + size
            i += size

    def find(start: int, end: int, kind: bytes):
        return next(((s, e) for k, s, e in children(start, end) if k == kind), None)

    span = (0, len(data))
    for kind in (b"moov", b"trak", b"mdia", b"minf", b"stbl"):
        span = find(*span, kind)
        assert span is not None, f"{path}: no {kind.decode()} box"
    stss = find(*span, b"stss")
    if stss is None:
        return None
    start = stss[0]
    (count,) = struct.unpack(">I", data[start + 4:start + 8])
    return [n - 1 for n in struct.unpack(f">{count}I", data[start + 8:start + 8 + 4 * count])]
