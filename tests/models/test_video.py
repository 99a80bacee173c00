"""Probing, random frame access and frame rendering of ``models.media.video``.

Frames from ``FrameReader.read`` are checked against an independent reference: a fresh
``cv2.VideoCapture`` decoding the file from frame 0 (frames compared by digest, so a long video
need not be held in memory).
"""
from __future__ import annotations

import hashlib
import shutil
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from models.media.video import (
    FORWARD_READ_WINDOW,
    FrameReader,
    ReaderPool,
    VideoError,
    content_sha256,
    crop_box,
    draw_target,
    encode_jpeg,
    probe_video,
)
from tests.media import mp4_sync_samples

VTEST = Path(__file__).resolve().parents[3] / "shared" / "data" / "vtest.avi"
VTEST_FRAMES = 795
# OpenCV reports the FourCC of an MPEG-4 Part 2 stream written as "mp4v"/"XVID" as FFmpeg's tag.
MPEG4_PART2 = {"FMP4", "mp4v", "MP4V", "XVID", "DIVX"}

needs_vtest = pytest.mark.skipif(not VTEST.is_file(), reason=f"{VTEST} is not available")


# -- helpers -------------------------------------------------------------------------------------
def render_video(path: Path, *, n_frames: int = 60, size=(160, 120), fps: float = 25.0,
                 fourcc: str = "mp4v", seed: int = 0) -> Path:
    """A textured background panning under a moving block: every frame differs from the others
    and the encoder has to predict between frames (not an all-keyframe stream)."""
    w, h = size
    rng = np.random.default_rng(seed)
    canvas = cv2.GaussianBlur(rng.integers(0, 256, (h + 2 * n_frames, w + 3 * n_frames, 3), dtype=np.uint8),
                              (0, 0), 2)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    assert writer.isOpened(), f"cannot write {path} with {fourcc}"
    for i in range(n_frames):
        frame = canvas[2 * i: 2 * i + h, 3 * i: 3 * i + w].copy()
        x = (7 * i) % (w - 20)
        frame[h // 3: h // 3 + 30, x: x + 20] = (30, 30, 220)
        writer.write(frame)
    writer.release()
    return path


def frame_digest(frame: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(frame).tobytes(), digest_size=16).hexdigest()


def sequential_digests(path: Path) -> list[str]:
    """Digests of every frame, decoded from the start with a plain capture (the reference)."""
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    assert cap.isOpened()
    digests = []
    try:
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            digests.append(frame_digest(frame))
    finally:
        cap.release()
    return digests


def access_pattern(n: int, seed: int, k: int) -> list[int]:
    """Random indices (forward and backward jumps) plus the awkward cases: the last frame, a jump
    back to frame 0, steps inside the forward-read window, a step just past it, one frame back."""
    rng = np.random.default_rng(seed)
    a = n // 3
    pattern = [int(i) for i in rng.choice(n, size=min(k, n), replace=False)]
    pattern += [n - 1, 0, n - 1, a, a + 1, a + 7, a + 7 + FORWARD_READ_WINDOW,
                a + 8 + 2 * FORWARD_READ_WINDOW + 1, a - 1, n - 2]
    assert max(pattern) < n
    return pattern


def assert_reads_match(reader: FrameReader, reference: list[str], indices: list[int]) -> None:
    wrong = [i for i in indices if frame_digest(reader.read(i)) != reference[i]]
    assert wrong == [], f"frames differing from sequential decoding: {wrong}"


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gop_video(tmp_path_factory) -> Path:
    """240 frames of MPEG-4 in MP4 whose keyframes are spaced (checked, not assumed)."""
    path = render_video(tmp_path_factory.mktemp("gop") / "gop.mp4", n_frames=240, fps=25.0)
    keyframes = mp4_sync_samples(path)
    assert keyframes is not None and len(keyframes) >= 3, keyframes
    assert keyframes[0] == 0 and min(np.diff(keyframes)) > 1, keyframes
    return path


@pytest.fixture(scope="module")
def gop_reference(gop_video) -> list[str]:
    digests = sequential_digests(gop_video)
    assert len(digests) == 240
    assert len(set(digests)) == 240  # every frame distinct, so a wrong frame cannot pass
    return digests


@pytest.fixture(scope="module")
def vtest_reference() -> list[str]:
    if not VTEST.is_file():
        pytest.skip(f"{VTEST} is not available")
    digests = sequential_digests(VTEST)
    assert len(digests) == VTEST_FRAMES
    return digests


def write_frames(folder: Path, n: int, *, size=(48, 32), ext: str = ".png", name: str = "frame{}") -> list:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(n)
    frames = []
    for i in range(1, n + 1):
        img = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        assert cv2.imwrite(str(folder / (name.format(i) + ext)), img)
        frames.append(img)
    return frames


# -- probing -------------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix, fourcc, codecs", [
    (".mp4", "mp4v", MPEG4_PART2),
    (".avi", "XVID", MPEG4_PART2),
    (".avi", "MJPG", {"MJPG"}),
    (".mkv", "XVID", MPEG4_PART2),
])
def test_probe_generated_video(tmp_path, suffix, fourcc, codecs):
    path = render_video(tmp_path / f"clip{suffix}", n_frames=37, size=(96, 64), fps=12.5, fourcc=fourcc)

    info = probe_video(path)

    assert info.kind == "file"
    assert info.frame_count == 37
    assert (info.width, info.height) == (96, 64)
    assert info.fps == pytest.approx(12.5)
    assert info.duration_s == pytest.approx(37 / 12.5)
    assert info.codec in codecs
    assert info.as_dict()["frame_count"] == 37


def test_probe_fps_override(tmp_path):
    path = render_video(tmp_path / "clip.mp4", n_frames=20, fps=10.0)
    info = probe_video(path, fps=40.0)
    assert info.fps == 40.0 and info.frame_count == 20
    assert info.duration_s == pytest.approx(0.5)


@needs_vtest
def test_probe_vtest():
    info = probe_video(VTEST)
    assert (info.kind, info.width, info.height) == ("file", 768, 576)
    assert info.frame_count == VTEST_FRAMES
    assert info.fps == pytest.approx(10.0)
    assert info.duration_s == pytest.approx(79.5)
    assert info.codec == "MP43"


def test_probe_missing_path(tmp_path):
    with pytest.raises(VideoError, match="no such file"):
        probe_video(tmp_path / "absent.mp4")


def test_probe_random_bytes_named_mp4(tmp_path):
    path = tmp_path / "noise.mp4"
    path.write_bytes(np.random.default_rng(0).bytes(20_000))
    with pytest.raises(VideoError, match=r"noise\.mp4: not a readable video"):
        probe_video(path)
    with pytest.raises(VideoError, match="not a readable video"):
        FrameReader(path)


def test_probe_unsupported_extension(tmp_path):
    path = render_video(tmp_path / "clip.mp4", n_frames=5)
    renamed = path.rename(tmp_path / "clip.txt")  # real video bytes, wrong type
    with pytest.raises(VideoError, match=r"unsupported file type '\.txt'.*\.mp4"):
        probe_video(renamed)


def test_probe_empty_file(tmp_path):
    path = tmp_path / "empty.mp4"
    path.touch()
    with pytest.raises(VideoError, match="the file is empty"):
        probe_video(path)


@pytest.mark.parametrize("suffix, fourcc, cut", [
    (".mp4", "mp4v", 30),     # inside the ftyp/free boxes
    (".avi", "XVID", 600),    # inside the RIFF hdrl list
])
def test_probe_header_cut(tmp_path, suffix, fourcc, cut):
    full = render_video(tmp_path / f"full{suffix}", n_frames=30, fourcc=fourcc)
    cut_path = tmp_path / f"cut{suffix}"
    cut_path.write_bytes(full.read_bytes()[:cut])
    with pytest.raises(VideoError, match="not a readable video"):
        probe_video(cut_path)


def test_probe_mp4_truncated_halfway_fails_clearly(tmp_path):
    # OpenCV's MP4 writer puts the moov index at the end, so half a file has no index at all.
    full = render_video(tmp_path / "full.mp4", n_frames=60)
    half = tmp_path / "half.mp4"
    data = full.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    with pytest.raises(VideoError, match=r"half\.mp4: not a readable video"):
        probe_video(half)


def test_avi_truncated_halfway_has_fewer_frames(tmp_path):
    full = render_video(tmp_path / "full.avi", n_frames=120, fourcc="XVID")
    half = tmp_path / "half.avi"
    data = full.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    reference = sequential_digests(full)

    info = probe_video(half)

    n = info.frame_count
    assert 0 < n < 120
    half_reference = sequential_digests(half)
    assert len(half_reference) == n
    # The surviving frames are the original's first frames (the last one may be cut inside).
    assert half_reference[: n - 1] == reference[: n - 1]
    # The header still claims 120 frames: reading past the cut fails clearly, and the reader
    # stays usable afterwards.
    reader = FrameReader(half, cache_frames=0)
    with pytest.raises(VideoError, match="could not be decoded"):
        reader.read(110)
    with pytest.raises(VideoError, match="could not be decoded"):
        reader.read(n)
    assert_reads_match(reader, half_reference, [n - 1, 3, n // 2, 0, n - 2])


@needs_vtest
def test_vtest_truncated_halfway_probes_fewer_frames(tmp_path):
    half = tmp_path / "half.avi"
    with open(VTEST, "rb") as fh:
        half.write_bytes(fh.read(VTEST.stat().st_size // 2))
    info = probe_video(half)
    assert 0 < info.frame_count < VTEST_FRAMES
    assert (info.width, info.height, info.codec) == (768, 576, "MP43")


@needs_vtest
def test_vtest_truncated_halfway_random_access(tmp_path):
    # An AVI cut short has no index, and FFmpeg cannot find MP43 keyframes without it: seeking
    # lands on non-keyframes. The probe notices, and the reader then only reads forward.
    half = tmp_path / "half.avi"
    with open(VTEST, "rb") as fh:
        half.write_bytes(fh.read(VTEST.stat().st_size // 2))
    reference = sequential_digests(half)
    info = probe_video(half)
    assert info.seekable is False and probe_video(VTEST).seekable is True
    reader = FrameReader(half, frame_count=len(reference), cache_frames=0, seekable=info.seekable)
    assert_reads_match(reader, reference, [300, 100, 300, 200, 50])
    seeking = FrameReader(half, frame_count=len(reference), cache_frames=0)  # trusting the container
    assert any(frame_digest(seeking.read(i)) != reference[i] for i in [300, 100, 200, 50])


@pytest.mark.parametrize("suffix, fourcc", [(".mp4", "mp4v"), (".avi", "MJPG")])
def test_probe_zero_frame_video(tmp_path, suffix, fourcc):
    path = tmp_path / f"zero{suffix}"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), 10.0, (64, 48))
    assert writer.isOpened()
    writer.release()
    assert path.stat().st_size > 0
    with pytest.raises(VideoError, match="not a readable video|no decodable frames"):
        probe_video(path)
    with pytest.raises(VideoError):
        FrameReader(path)


def test_probe_frame_folder(tmp_path):
    write_frames(tmp_path / "frames", 12, size=(48, 32))
    info = probe_video(tmp_path / "frames", fps=5.0)
    assert info.kind == "frames"
    assert (info.frame_count, info.width, info.height, info.codec) == (12, 48, 32, "png")
    assert info.fps == 5.0 and info.duration_s == pytest.approx(2.4)


def test_probe_frame_folder_mixed_sizes(tmp_path):
    write_frames(tmp_path / "frames", 3, size=(48, 32))
    cv2.imwrite(str(tmp_path / "frames" / "frame4.png"), np.zeros((32, 40, 3), np.uint8))
    with pytest.raises(VideoError, match=r"frame4\.png: frame size 40x32 differs from the first frame's 48x32"):
        probe_video(tmp_path / "frames", fps=10)


def test_probe_folder_without_images(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.txt").write_text("no frames here")
    with pytest.raises(VideoError, match="holds no frames"):
        probe_video(folder, fps=10)
    with pytest.raises(VideoError, match="holds no frames"):
        FrameReader(folder)


@pytest.mark.parametrize("fps", [None, 0, -5])
def test_probe_frame_folder_needs_fps(tmp_path, fps):
    write_frames(tmp_path / "frames", 2)
    with pytest.raises(VideoError, match="needs a frame rate"):
        probe_video(tmp_path / "frames", fps=fps)


def test_probe_frame_folder_with_unreadable_image(tmp_path):
    write_frames(tmp_path / "frames", 2)
    (tmp_path / "frames" / "frame3.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(VideoError, match=r"frame3\.jpg: not a readable image"):
        probe_video(tmp_path / "frames", fps=10)


# -- random access -------------------------------------------------------------------------------
def test_random_access_matches_sequential_mp4(gop_video, gop_reference):
    reader = FrameReader(gop_video, cache_frames=0)
    assert (reader.frame_count, reader.width, reader.height) == (240, 160, 120)
    assert reader.fps == pytest.approx(25.0)

    assert_reads_match(reader, gop_reference, access_pattern(240, seed=7, k=60))
    assert reader.stats["seeks"] > 10  # the seeking path ran, not only forward reads
    assert reader.stats["hits"] == 0


@needs_vtest
def test_random_access_matches_sequential_vtest(vtest_reference):
    reader = FrameReader(VTEST, cache_frames=0)
    assert reader.frame_count == VTEST_FRAMES
    assert_reads_match(reader, vtest_reference, access_pattern(VTEST_FRAMES, seed=11, k=20))
    assert reader.stats["seeks"] > 5


def test_forward_window_reads_without_seeking(gop_video, gop_reference):
    reader = FrameReader(gop_video, cache_frames=0)
    start = 100
    assert_reads_match(reader, gop_reference, [start])
    seeks = reader.stats["seeks"]

    inside = [start + 1, start + 4, start + 4 + FORWARD_READ_WINDOW]
    assert_reads_match(reader, gop_reference, inside)
    assert reader.stats["seeks"] == seeks

    beyond = inside[-1] + 1 + FORWARD_READ_WINDOW + 1   # one past the window of the decoder
    assert beyond < 240
    assert_reads_match(reader, gop_reference, [beyond])
    assert reader.stats["seeks"] == seeks + 1
    seeks += 1
    assert_reads_match(reader, gop_reference, [start])  # backward: seek
    assert reader.stats["seeks"] == seeks + 1


def test_reader_uses_given_fps_and_frame_count(gop_video):
    reader = FrameReader(gop_video, fps=12.0, frame_count=100)
    assert reader.fps == 12.0 and reader.frame_count == 100
    with pytest.raises(IndexError):
        reader.read(100)


def test_cache_hit_on_repeat_read(gop_video, gop_reference):
    reader = FrameReader(gop_video, cache_frames=4)
    first = reader.read(50)
    decoded = reader.stats["decoded"]

    again = reader.read(50)

    assert again is first
    assert reader.stats["hits"] == 1
    assert reader.stats["decoded"] == decoded
    assert frame_digest(again) == gop_reference[50]


def test_cache_evicts_least_recently_used(gop_video):
    reader = FrameReader(gop_video, cache_frames=2)
    reader.read(10)
    reader.read(20)
    reader.read(10)      # 10 becomes the most recent
    reader.read(30)      # evicts 20
    hits = reader.stats["hits"]
    reader.read(10)
    assert reader.stats["hits"] == hits + 1
    reader.read(20)
    assert reader.stats["hits"] == hits + 1


def test_no_cache_when_disabled(gop_video):
    reader = FrameReader(gop_video, cache_frames=0)
    reader.read(5)
    reader.read(5)
    assert reader.stats["hits"] == 0


@pytest.mark.parametrize("index", [-1, 240, 10_000])
def test_read_outside_range(gop_video, index):
    with pytest.raises(IndexError, match="outside 0..239"):
        FrameReader(gop_video).read(index)


def test_iter_frames_matches_sequential(gop_video, gop_reference):
    reader = FrameReader(gop_video)
    got = [(i, frame_digest(f)) for i, f in reader.iter_frames(30, 100, 7)]
    assert got == [(i, gop_reference[i]) for i in range(30, 100, 7)]
    with pytest.raises(ValueError):
        next(reader.iter_frames(0, 10, 0))


def test_reads_after_close_reopen(gop_video, gop_reference):
    reader = FrameReader(gop_video)
    reader.read(200)
    reader.close()
    assert_reads_match(reader, gop_reference, [200, 3])


def test_concurrent_reads_are_exact(gop_video, gop_reference):
    reader = FrameReader(gop_video, cache_frames=8)
    wrong: list[int] = []

    def worker(seed: int):
        for i in np.random.default_rng(seed).integers(0, 240, 15):
            if frame_digest(reader.read(int(i))) != gop_reference[int(i)]:
                wrong.append(int(i))

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_frame_folder_reader_natural_order(tmp_path):
    frames = write_frames(tmp_path / "frames", 12, size=(40, 30), name="img{}")  # img2 < img10
    reader = FrameReader(tmp_path / "frames", fps=5.0)
    assert (reader.frame_count, reader.width, reader.height, reader.fps) == (12, 40, 30, 5.0)
    for i in [9, 1, 11, 0, 9]:
        assert np.array_equal(reader.read(i), frames[i]), i
    assert reader.stats["hits"] == 1
    with pytest.raises(IndexError):
        reader.read(12)


# -- reader pool ---------------------------------------------------------------------------------
def test_reader_pool_reuses_and_evicts_oldest(tmp_path, monkeypatch):
    paths = [render_video(tmp_path / f"v{i}.mp4", n_frames=5, seed=i) for i in range(3)]
    pool = ReaderPool(size=2, cache_bytes=4 * 160 * 120 * 3)  # room for 4 frames of 160x120

    a = pool.get(paths[0])
    monkeypatch.chdir(tmp_path)
    assert pool.get("v0.mp4") is a              # same file by another spelling: same reader
    b = pool.get(paths[1])
    assert pool.get(paths[0]) is a              # a becomes the most recently used
    a.read(1)
    c = pool.get(paths[2])                      # evicts b, the least recently used

    assert pool.get(paths[0]) is a and pool.get(paths[2]) is c
    assert b._cap is None                       # the evicted reader was closed
    b2 = pool.get(paths[1])
    assert b2 is not b
    assert pool.get(paths[2]) is c              # c was more recent than a
    assert pool.get(paths[0]) is not a          # so a went
    assert c._cache_frames == 4                # the byte budget, in frames of this size
    pool.clear()
    assert c._cap is None


# -- hashing -------------------------------------------------------------------------------------
def test_content_sha256_of_files(tmp_path):
    one = render_video(tmp_path / "one.mp4", n_frames=10, seed=1)
    two = render_video(tmp_path / "two.mp4", n_frames=10, seed=2)
    copy = tmp_path / "copy.mp4"
    shutil.copyfile(one, copy)

    digest = content_sha256(one)

    assert digest == hashlib.sha256(one.read_bytes()).hexdigest()
    assert digest == content_sha256(one) == content_sha256(copy)
    assert content_sha256(one, chunk=1000) == digest
    assert content_sha256(two) != digest


def test_content_sha256_of_frame_folders(tmp_path):
    write_frames(tmp_path / "a", 3)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    digest = content_sha256(tmp_path / "a")
    assert digest == content_sha256(tmp_path / "b") == content_sha256(tmp_path / "a")

    (tmp_path / "b" / "frame3.png").rename(tmp_path / "b" / "frame4.png")
    assert content_sha256(tmp_path / "b") != digest

    cv2.imwrite(str(tmp_path / "a" / "frame2.png"), np.zeros((32, 48, 3), np.uint8))
    assert content_sha256(tmp_path / "a") != digest


# -- rendering -----------------------------------------------------------------------------------
def test_crop_box_pads_and_clips():
    frame = np.arange(120 * 200 * 3, dtype=np.uint32).reshape(120, 200, 3).astype(np.uint8)
    crop = crop_box(frame, (50, 20, 90, 60), pad=0.1)     # 40x40 box, grown by 4 each side
    assert crop.shape == (48, 48, 3)
    assert np.array_equal(crop, frame[16:64, 46:94])

    assert crop_box(frame, (50, 20, 90, 60), pad=0).shape == (40, 40, 3)
    edge = crop_box(frame, (-10, 100, 30, 130), pad=0)    # clipped to the frame
    assert np.array_equal(edge, frame[100:120, 0:30])
    with pytest.raises(ValueError, match="does not intersect"):
        crop_box(frame, (300, 10, 340, 50))


def test_draw_target_marks_box_on_a_copy():
    frame = np.zeros((240, 320, 3), np.uint8)
    color = (0, 255, 255)
    marked = draw_target(frame, (40.4, 60.2, 200.0, 180.0), color=color)

    assert not frame.any()                               # the input is untouched
    for y, x in [(60, 120), (180, 120), (120, 40), (120, 200)]:   # one point on each side
        assert tuple(marked[y, x]) == color, (y, x)
    assert not marked[120, 120].any()                    # the inside is not filled
    assert not marked[10, 10].any()


def test_draw_target_label():
    frame = np.zeros((240, 320, 3), np.uint8)
    plain = draw_target(frame, (40, 60, 200, 180))
    labelled = draw_target(frame, (40, 60, 200, 180), label="#12 person", color=(255, 0, 0))
    band = labelled[30:58, 42:120]                       # just above the box's top edge
    assert (band == (255, 0, 0)).all(axis=2).sum() > 100    # the label's background
    assert not np.array_equal(plain[30:58], labelled[30:58])


def test_encode_jpeg_downscales_and_decodes():
    frame = np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)

    def decode(data: bytes) -> np.ndarray:
        assert data[:2] == b"\xff\xd8"
        return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)

    assert decode(encode_jpeg(frame, max_size=160)).shape == (120, 160, 3)
    assert decode(encode_jpeg(frame, max_size=100)).shape == (75, 100, 3)
    assert decode(encode_jpeg(frame, max_size=1000)).shape == (240, 320, 3)   # never upscales
    assert decode(encode_jpeg(frame)).shape == (240, 320, 3)
    flat = np.full((64, 64, 3), (10, 120, 200), np.uint8)
    assert np.abs(decode(encode_jpeg(flat)).astype(int) - flat).max() <= 3
