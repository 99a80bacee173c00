"""The crop strips' files: where each lies and how it is read and written (one door for the crop
endpoint and the job that makes the strips, ``trajectories.services.crops``).

Files live under ``MEDIA_ROOT/crops/<video>/<trajectory>/<frame>-<max size>.jpg``, only for the
strips the review screens show (:data:`CROP_STRIPS`, so what a request can make the server keep is
bounded by the run's trajectories), and are written whole (a temporary file renamed into place), so a
reader never sees half a JPEG.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.conf import settings

from trajectories.models import Trajectory

# (crops per trajectory, longer side in pixels) of the strips the review screens show: the
# player's strip (frontend player/Player.tsx) and a pair's target strip (review/pair/PairTarget.tsx).
CROP_STRIPS = ((12, 160), (6, 120))
CROP_PAD = 0.1                                   # the crop endpoint's default margin around the box


def in_strip(trajectory: Trajectory, index: int, max_size: int | None, pad: float) -> bool:
    """Whether the crop is one of a strip the screens show (only those are kept on disk)."""
    return pad == CROP_PAD and any(max_size == size and index in strip_frames(trajectory, n)
                                   for n, size in CROP_STRIPS)


def crop_path(*, trajectory: Trajectory, index: int, max_size: int | None) -> Path:
    return (Path(settings.MEDIA_ROOT) / "crops" / str(trajectory.video_id) / str(trajectory.pk)
            / f"{int(index)}-{int(max_size or 0)}.jpg")


def crop_file_read(*, trajectory: Trajectory, index: int, max_size: int | None) -> bytes | None:
    """The stored crop, or ``None`` when it was not made yet."""
    try:
        return crop_path(trajectory=trajectory, index=index, max_size=max_size).read_bytes()
    except FileNotFoundError:
        return None


def crop_file_write(*, trajectory: Trajectory, index: int, max_size: int | None, data: bytes) -> None:
    """Keep a crop: written to a temporary file in its folder and renamed into place (atomic)."""
    path = crop_path(trajectory=trajectory, index=index, max_size=max_size)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".crop-", suffix=".jpg")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def strip_frames(trajectory: Trajectory, n: int) -> list[int]:
    """Up to ``n`` observed frames spread evenly over the trajectory (what the crop list shows)."""
    frames = trajectory.frames_array()
    if n >= len(frames):
        return [int(f) for f in frames]
    step = (len(frames) - 1) / max(n - 1, 1)
    return sorted({int(frames[round(i * step)]) for i in range(n)})
