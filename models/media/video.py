"""Video probing and random frame access, for files and for folders of frames.

``FrameReader.read(i)`` seeks (the container's index, via FFmpeg) instead of decoding from
frame 0, keeps recently decoded frames in an LRU cache, and reads forward without seeking when
the request is just ahead of the decoder (the common case while a player plays or a tracker
walks the video). No Django here: the web API and the trackers both use it.
"""
from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import cv2
import numpy as np

from models.config import PlainConfig

VIDEO_EXTENSIONS = {".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".flv", ".ts"}
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
# Reading forward is cheaper than a seek (which restarts at the previous keyframe) when the
# target is at most this many frames ahead of the decoder.
FORWARD_READ_WINDOW = 48


class VideoError(ValueError):
    """A file or folder that cannot be used as a video; the message says why."""


@dataclass(frozen=True)
class VideoInfo(PlainConfig):
    kind: str          # "file" or "frames"
    fps: float
    frame_count: int   # decodable frames, counted
    width: int
    height: int
    duration_s: float
    codec: str         # FourCC of the stream, or the image format of a frame folder
    seekable: bool = True  # seeking lands on the exact frame (checked); False: read forward only


def _natural_key(name: str) -> list:
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def list_frame_files(folder: str | os.PathLike) -> list[Path]:
    """The image files of a frame folder in natural order (frame2 before frame10)."""
    folder = Path(folder)
    files = [p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS]
    return sorted(files, key=lambda p: _natural_key(p.name))


def _fourcc(cap: cv2.VideoCapture) -> str:
    code = int(cap.get(cv2.CAP_PROP_FOURCC))
    text = "".join(chr((code >> (8 * i)) & 0xFF) for i in range(4))
    return text.strip("\x00 ").strip() or "unknown"


def probe_video(path: str | os.PathLike, *, fps: float | None = None) -> VideoInfo:
    """Probe a video file or a folder of frames and count its decodable frames.

    ``fps`` is required for a frame folder (it has no timing of its own) and overrides a file's.
    Raises :class:`VideoError` for a missing path, an unsupported type, a file that does not
    decode, a zero-frame video, or frames of different sizes.
    """
    path = Path(path)
    if not path.exists():
        raise VideoError(f"{path}: no such file or folder")
    if path.is_dir():
        return _probe_folder(path, fps)
    if path.suffix.lower() not in VIDEO_EXTENSIONS:
        raise VideoError(
            f"{path.name}: unsupported file type {path.suffix or '(none)'!r}; "
            f"expected one of {', '.join(sorted(VIDEO_EXTENSIONS))} or a folder of frames"
        )
    if path.stat().st_size == 0:
        raise VideoError(f"{path.name}: the file is empty")
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        if not cap.isOpened():
            raise VideoError(f"{path.name}: not a readable video (the container or codec could not be opened)")
        ok, first = cap.read()
        if not ok or first is None:
            raise VideoError(f"{path.name}: the video has no decodable frames")
        height, width = first.shape[:2]
        # Digests of a few frames seen while counting, to check afterwards that seeking lands on
        # exactly those frames (it does not for some damaged or index-less files).
        claimed = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0)
        samples = {claimed * k // 4 for k in (1, 2, 3)} - {0} if claimed > 8 else set()
        digests: dict[int, str] = {}
        count = 1
        while cap.grab():
            if count in samples:
                ok, frame = cap.retrieve()
                if ok:
                    digests[count] = hashlib.sha1(frame.tobytes()).hexdigest()
            count += 1
        native_fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        codec = _fourcc(cap)
    finally:
        cap.release()
    rate = float(fps) if fps else native_fps
    if not np.isfinite(rate) or rate <= 0 or rate > 1000:
        raise VideoError(f"{path.name}: the video has no usable frame rate; give one explicitly")
    return VideoInfo("file", rate, count, int(width), int(height), count / rate, codec, _seeks_exactly(path, digests))


def _seeks_exactly(path: Path, digests: dict[int, str]) -> bool:
    """Whether seeking to each sampled frame (backwards, the hard direction) decodes that frame."""
    if not digests:
        return True
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        for index in sorted(digests, reverse=True):
            cap.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, frame = cap.read()
            if not ok or hashlib.sha1(frame.tobytes()).hexdigest() != digests[index]:
                return False
        return True
    finally:
        cap.release()


def _probe_folder(folder: Path, fps: float | None) -> VideoInfo:
    files = list_frame_files(folder)
    if not files:
        raise VideoError(f"{folder.name}: the folder holds no frames ({', '.join(sorted(IMAGE_EXTENSIONS))})")
    if not fps or fps <= 0:
        raise VideoError(f"{folder.name}: a folder of frames needs a frame rate (fps > 0)")
    size = None
    for f in files:
        img = cv2.imread(str(f), cv2.IMREAD_COLOR)
        if img is None:
            raise VideoError(f"{folder.name}/{f.name}: not a readable image")
        if size is None:
            size = img.shape[:2]
        elif img.shape[:2] != size:
            raise VideoError(
                f"{folder.name}/{f.name}: frame size {img.shape[1]}x{img.shape[0]} differs from the "
                f"first frame's {size[1]}x{size[0]}"
            )
    codec = files[0].suffix.lower().lstrip(".")
    return VideoInfo("frames", float(fps), len(files), int(size[1]), int(size[0]), len(files) / float(fps), codec)


def content_sha256(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file, or of a frame folder (file names and bytes in frame order)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = list_frame_files(path) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            while block := fh.read(chunk):
                digest.update(block)
    return digest.hexdigest()


class FrameReader:
    """Random access to the frames of one video file or frame folder (thread-safe).

    Implements :class:`models.backends.tracking.base.FrameSource`.
    """

    def __init__(self, path: str | os.PathLike, *, fps: float | None = None,
                 frame_count: int | None = None, cache_frames: int = 256, seekable: bool = True,
                 cache_bytes: int | None = None):
        self.path = Path(path)
        # Files whose seeking was found inexact (see probe_video) are only ever read forward:
        # a backward request reopens the file and walks from frame 0.
        self.seekable = seekable
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_frames = max(0, int(cache_frames))
        self._cap: cv2.VideoCapture | None = None
        self._next = 0  # index of the frame the decoder returns on its next read()
        self.stats = {"hits": 0, "seeks": 0, "decoded": 0}
        if self.path.is_dir():
            self._files = list_frame_files(self.path)
            if not self._files:
                raise VideoError(f"{self.path}: the folder holds no frames")
            first = cv2.imread(str(self._files[0]))
            if first is None:
                raise VideoError(f"{self._files[0]}: not a readable image")
            self.height, self.width = first.shape[:2]
            self.frame_count = frame_count or len(self._files)
            self.fps = float(fps or 25.0)
        else:
            self._files = None
            self._cap = self._open()
            self.width = int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH))
            self.height = int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
            self.fps = float(fps or self._cap.get(cv2.CAP_PROP_FPS) or 25.0)
            self.frame_count = int(frame_count or self._cap.get(cv2.CAP_PROP_FRAME_COUNT))
            if self.frame_count <= 0:
                self.frame_count = probe_video(self.path).frame_count
        if cache_bytes is not None:  # a memory budget rather than a frame count
            self._cache_frames = max(1, int(cache_bytes) // max(1, self.width * self.height * 3))

    def _open(self) -> cv2.VideoCapture:
        cap = cv2.VideoCapture(str(self.path), cv2.CAP_FFMPEG)
        if not cap.isOpened():
            raise VideoError(f"{self.path}: not a readable video")
        self._next = 0
        return cap

    # -- FrameSource ---------------------------------------------------------------------------
    def read(self, index: int) -> np.ndarray:
        """The frame at ``index`` (BGR uint8). The array is shared with the cache: do not modify."""
        index = int(index)
        if not 0 <= index < self.frame_count:
            raise IndexError(f"frame {index} is outside 0..{self.frame_count - 1}")
        with self._lock:
            frame = self._cache.get(index)
            if frame is not None:
                self._cache.move_to_end(index)
                self.stats["hits"] += 1
                return frame
            frame = self._decode(index)
            self._remember(index, frame)
            return frame

    def iter_frames(self, start: int = 0, stop: int | None = None, step: int = 1) -> Iterator[tuple[int, np.ndarray]]:
        """Frames ``start, start+step, ...`` below ``stop``, decoded sequentially (no cache churn)."""
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        if step < 1:
            raise ValueError("step must be >= 1")
        for index in range(start, stop, step):
            with self._lock:
                frame = self._cache.get(index)
                if frame is None:
                    frame = self._decode(index)
            yield index, frame

    def close(self) -> None:
        with self._lock:
            if self._cap is not None:
                self._cap.release()
                self._cap = None
            self._cache.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------------
    def _remember(self, index: int, frame: np.ndarray) -> None:
        if self._cache_frames:
            self._cache[index] = frame
            if len(self._cache) > self._cache_frames:
                self._cache.popitem(last=False)

    def _decode(self, index: int) -> np.ndarray:
        if self._files is not None:
            frame = cv2.imread(str(self._files[index]), cv2.IMREAD_COLOR)
            if frame is None:
                raise VideoError(f"{self._files[index]}: not a readable image")
            self.stats["decoded"] += 1
            return frame
        if self._cap is None:
            self._cap = self._open()
        if not self.seekable:
            if index < self._next:
                self._cap.release()
                self._cap = self._open()
                self.stats["seeks"] += 1
        elif not (self._next <= index <= self._next + FORWARD_READ_WINDOW):
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, index)
            self._next = int(self._cap.get(cv2.CAP_PROP_POS_FRAMES))
            self.stats["seeks"] += 1
            if self._next > index:  # the demuxer landed past the target: reopen and walk
                self._cap.release()
                self._cap = self._open()
        while self._next < index:
            if not self._cap.grab():
                raise VideoError(f"{self.path}: frame {index} could not be decoded "
                                 f"(decoding stopped at frame {self._next})")
            self._next += 1
            self.stats["decoded"] += 1
        ok, frame = self._cap.read()
        if not ok or frame is None:
            raise VideoError(f"{self.path}: frame {index} could not be decoded")
        self._next = index + 1
        self.stats["decoded"] += 1
        return frame


class ReaderPool:
    """A small process-wide LRU of open readers, keyed by path, so requests reuse decoders.

    Each reader caches decoded frames within ``cache_bytes``, so the pool holds at most about
    ``size * cache_bytes`` of frames whatever the resolution.
    """

    def __init__(self, size: int = 8, cache_bytes: int = 64 * 2**20):
        self._size = size
        self._cache_bytes = cache_bytes
        self._readers: OrderedDict[str, FrameReader] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str | os.PathLike, *, fps: float | None = None, frame_count: int | None = None,
            seekable: bool = True) -> FrameReader:
        key = str(Path(path).resolve())
        with self._lock:
            reader = self._readers.get(key)
            if reader is None:
                reader = FrameReader(key, fps=fps, frame_count=frame_count, cache_bytes=self._cache_bytes,
                                     seekable=seekable)
                self._readers[key] = reader
                if len(self._readers) > self._size:
                    _, old = self._readers.popitem(last=False)
                    old.close()
            else:
                self._readers.move_to_end(key)
            return reader

    def clear(self) -> None:
        with self._lock:
            for reader in self._readers.values():
                reader.close()
            self._readers.clear()


class EncodedImages:
    """A process-wide LRU of encoded images (JPEG bytes) within ``max_bytes``: every reviewer of an
    item asks for the same frames and crops, and decoding, cropping and encoding them again is most
    of what such a request costs. ``get(key, make)`` answers the bytes of ``key``, calling ``make()``
    (outside the lock, so two threads may both make a missing image once) when it has none. The key
    must name everything the image depends on: the video file, the frame, the box, the size."""

    def __init__(self, max_bytes: int = 32 * 2**20):
        self.max_bytes = max_bytes
        self._images: OrderedDict[tuple, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple, make) -> bytes:
        with self._lock:
            data = self._images.get(key)
            if data is not None:
                self._images.move_to_end(key)
                self.hits += 1
                return data
            self.misses += 1
        data = make()
        if len(data) > self.max_bytes:
            return data
        with self._lock:
            if key not in self._images:
                self._images[key] = data
                self._bytes += len(data)
                while self._bytes > self.max_bytes:
                    _, old = self._images.popitem(last=False)
                    self._bytes -= len(old)
        return data

    def clear(self) -> None:
        with self._lock:
            self._images.clear()
            self._bytes = 0


# -- images -------------------------------------------------------------------------------------
def resize_max(frame: np.ndarray, max_size: int | None) -> np.ndarray:
    """Downscale so the longer side is at most ``max_size`` (never upscales)."""
    if not max_size:
        return frame
    h, w = frame.shape[:2]
    scale = max_size / max(h, w)
    if scale >= 1:
        return frame
    return cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))), interpolation=cv2.INTER_AREA)


def encode_jpeg(frame: np.ndarray, *, max_size: int | None = None, quality: int = 90) -> bytes:
    ok, buf = cv2.imencode(".jpg", resize_max(frame, max_size), [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    if not ok:
        raise VideoError("the frame could not be encoded as JPEG")
    return buf.tobytes()


def crop_box(frame: np.ndarray, box, *, pad: float = 0.1) -> np.ndarray:
    """The region of ``box`` (xyxy, pixels) grown by ``pad`` of its size, clipped to the frame."""
    h, w = frame.shape[:2]
    x1, y1, x2, y2 = (float(v) for v in box)
    px, py = (x2 - x1) * pad, (y2 - y1) * pad
    xa, ya = max(0, int(np.floor(x1 - px))), max(0, int(np.floor(y1 - py)))
    xb, yb = min(w, int(np.ceil(x2 + px))), min(h, int(np.ceil(y2 + py)))
    if xb <= xa or yb <= ya:
        raise ValueError(f"box {box} does not intersect the {w}x{h} frame")
    return frame[ya:yb, xa:xb]


def draw_target(frame: np.ndarray, box, *, label: str | None = None, color=(0, 255, 255)) -> np.ndarray:
    """A copy of ``frame`` with ``box`` drawn (the target-marked frame shown to people and VLMs)."""
    out = frame.copy()
    h, w = out.shape[:2]
    thickness = max(2, round(max(h, w) / 320))
    x1, y1, x2, y2 = (round(float(v)) for v in box)
    cv2.rectangle(out, (x1, y1), (x2, y2), (0, 0, 0), thickness + 2)
    cv2.rectangle(out, (x1, y1), (x2, y2), color, thickness)
    if label:
        scale = max(0.5, max(h, w) / 1200)
        (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        ty = y1 - 4 if y1 - th - 6 > 0 else y2 + th + 4
        cv2.rectangle(out, (x1, ty - th - 4), (x1 + tw + 4, ty + base), color, -1)
        cv2.putText(out, label, (x1 + 2, ty - 2), cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1, cv2.LINE_AA)
    return out
