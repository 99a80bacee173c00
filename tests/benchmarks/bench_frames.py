"""Random frame access on a long 720p video: ``FrameReader`` (seeking) against naive decoding.

The naive way opens the file for each request and decodes from frame 0 up to the target, which
is what a server without an index-aware reader does. Both paths run in the same process on the
same fixed-seed sample of frame indices, and must return identical frames.

Quick size (default): 600 frames. Full size (``TRAJLAB_BENCH_FULL=1``): 3000 frames, 2 minutes
at 25 fps. Figures go to ``var/bench/frames.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from models.media.video import FORWARD_READ_WINDOW, FrameReader, VideoError, probe_video
from tests.media import mp4_sync_samples

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL") == "1"
REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "var" / "bench"
CACHE_DIR = BENCH_DIR / "cache"

WIDTH, HEIGHT, FPS = 1280, 720, 25.0
N_FRAMES = 3000 if FULL else 600
N_SEEK = 100 if FULL else 30          # requests served by FrameReader
N_NAIVE = 20 if FULL else 10          # the first N_NAIVE of the same requests, served naively
SEED = 20240601
RENDER_VERSION = 1                    # bump when the rendered content changes
MIN_SPEEDUP = 4.0                     # asserted at any size; measured speedups are far larger


# -- the video -----------------------------------------------------------------------------------
def render_long_video(path: Path, n_frames: int) -> None:
    """Pan over a blurred-noise canvas with moving figures and a frame counter: detailed,
    changing content that an MPEG-4 encoder cannot reduce to nothing (~5 Mbit/s at 720p)."""
    rng = np.random.default_rng(SEED)
    canvas = rng.integers(0, 256, (HEIGHT + 400, WIDTH + 800, 3), dtype=np.uint8)
    canvas = cv2.normalize(cv2.GaussianBlur(canvas, (0, 0), 3), None, 0, 255, cv2.NORM_MINMAX)
    figures = [(rng.uniform(0, WIDTH), rng.uniform(0, HEIGHT), rng.uniform(-6, 6), rng.uniform(-3, 3),
                tuple(int(c) for c in rng.integers(0, 256, 3))) for _ in range(10)]
    partial = path.with_name(path.stem + ".partial" + path.suffix)
    writer = cv2.VideoWriter(str(partial), cv2.VideoWriter_fourcc(*"mp4v"), FPS, (WIDTH, HEIGHT))
    assert writer.isOpened(), f"cannot write {partial}"
    try:
        for i in range(n_frames):
            ox = int(400 + 380 * np.sin(i / 120))
            oy = int(200 + 190 * np.sin(i / 170))
            frame = canvas[oy:oy + HEIGHT, ox:ox + WIDTH].copy()
            for x, y, vx, vy, color in figures:
                cx, cy = int((x + vx * i) % WIDTH), int((y + vy * i) % HEIGHT)
                cv2.rectangle(frame, (cx, cy), (cx + 40, cy + 110), color, -1)
                cv2.circle(frame, (cx + 20, cy - 15), 15, color, -1)
            cv2.putText(frame, f"{i:05d}", (20, 60), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (255, 255, 255), 3)
            writer.write(frame)
    finally:
        writer.release()
    os.replace(partial, path)


@pytest.fixture(scope="module")
def long_video() -> Path:
    """The rendered video, cached under var/bench/cache and reused while it probes complete."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / f"long720_{N_FRAMES}f_v{RENDER_VERSION}.mp4"
    if path.exists():
        try:
            if probe_video(path).frame_count == N_FRAMES:
                return path
        except VideoError as exc:  # a damaged cache file is rendered again
            print(f"re-rendering {path.name}: {exc}")
    render_long_video(path, N_FRAMES)
    return path


# -- measurement ---------------------------------------------------------------------------------
def digest(frame: np.ndarray) -> str:
    return hashlib.blake2b(np.ascontiguousarray(frame).tobytes(), digest_size=16).hexdigest()


def naive_read(path: Path, index: int) -> np.ndarray:
    """Open the file and decode every frame from 0 up to ``index`` (grab() decodes, read() also
    converts to BGR)."""
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        for _ in range(index):
            if not cap.grab():
                raise AssertionError(f"frame {index} not reached")
        ok, frame = cap.read()
        assert ok, f"frame {index} not decoded"
        return frame
    finally:
        cap.release()


def summary(times_s: list[float]) -> dict:
    ms = np.asarray(times_s) * 1000
    return {"n": len(ms), "median_ms": round(float(np.median(ms)), 3),
            "p90_ms": round(float(np.percentile(ms, 90)), 3), "mean_ms": round(float(ms.mean()), 3),
            "max_ms": round(float(ms.max()), 3)}


def test_random_frame_access(long_video):
    info = probe_video(long_video)
    keyframes = mp4_sync_samples(long_video)
    assert info.frame_count == N_FRAMES and (info.width, info.height) == (WIDTH, HEIGHT)
    assert keyframes is not None and len(keyframes) > 1, "expected an inter-coded stream"
    gops = sorted({int(d) for d in np.diff(keyframes)})
    assert min(gops) > 1

    rng = np.random.default_rng(SEED)
    indices = [int(i) for i in rng.choice(N_FRAMES, size=N_SEEK, replace=False)]

    # (a) FrameReader with the cache disabled: every fetch decodes (a seek or a forward read).
    t0 = time.perf_counter()
    reader = FrameReader(long_video, cache_frames=0)
    open_s = time.perf_counter() - t0
    seek_times, seek_digests = [], {}
    for i in indices:
        t0 = time.perf_counter()
        frame = reader.read(i)
        seek_times.append(time.perf_counter() - t0)
        seek_digests[i] = digest(frame)
    stats = dict(reader.stats)
    reader.close()

    # FrameReader with its cache, the same frames asked for again (a reviewer going back).
    cached = FrameReader(long_video, cache_frames=max(256, N_SEEK))
    for i in indices:
        cached.read(i)
    hit_times = []
    for i in indices:
        t0 = time.perf_counter()
        frame = cached.read(i)
        hit_times.append(time.perf_counter() - t0)
        assert digest(frame) == seek_digests[i]
    assert cached.stats["hits"] == N_SEEK
    cached.close()

    # (b) naive: open and decode from frame 0, for the first N_NAIVE of the same requests.
    naive_times, mismatched = [], []
    for i in indices[:N_NAIVE]:
        t0 = time.perf_counter()
        frame = naive_read(long_video, i)
        naive_times.append(time.perf_counter() - t0)
        if digest(frame) != seek_digests[i]:
            mismatched.append(i)

    seek_same = summary([seek_times[k] for k in range(N_NAIVE)])
    results = {
        "video": {"frames": N_FRAMES, "width": WIDTH, "height": HEIGHT, "fps": FPS, "codec": info.codec,
                  "keyframe_intervals": gops, "size_mb": round(long_video.stat().st_size / 1e6, 2),
                  "bitrate_mbit_s": round(long_video.stat().st_size * 8 / (N_FRAMES / FPS) / 1e6, 2)},
        "size": "full" if FULL else "quick",
        "seed": SEED,
        "forward_read_window": FORWARD_READ_WINDOW,
        "reader_open_ms": round(open_s * 1000, 3),
        # "decoded" counts the frames the reader itself read; OpenCV's seek decodes from the
        # keyframe to the target internally, which is not counted.
        "seek_no_cache": {**summary(seek_times), "reader_stats": stats},
        "seek_no_cache_same_requests_as_naive": seek_same,
        "seek_cache_repeat": summary(hit_times),
        "naive_from_frame_0": summary(naive_times),
        "speedup_median": round(summary(naive_times)["median_ms"] / seek_same["median_ms"], 1),
        "frames_identical": not mismatched,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "opencv": cv2.__version__},
    }
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "frames.json").write_text(json.dumps(results, indent=2) + "\n")

    print(f"\nrandom frame fetch, {N_FRAMES} frames {WIDTH}x{HEIGHT} {info.codec}, keyframe every "
          f"{'/'.join(map(str, gops))} frames, {results['video']['bitrate_mbit_s']} Mbit/s ({results['size']})")
    print(f"{'path':<42}{'n':>5}{'median ms':>12}{'p90 ms':>10}{'mean ms':>10}")
    for label, key in [("FrameReader, no cache (seek)", "seek_no_cache"),
                       ("FrameReader, no cache, naive's requests", "seek_no_cache_same_requests_as_naive"),
                       ("FrameReader, cache hit (repeat)", "seek_cache_repeat"),
                       ("naive: open + decode from frame 0", "naive_from_frame_0")]:
        r = results[key]
        print(f"{label:<42}{r['n']:>5}{r['median_ms']:>12.2f}{r['p90_ms']:>10.2f}{r['mean_ms']:>10.2f}")
    print(f"speed-up of seeking over naive (median, same requests): {results['speedup_median']}x; "
          f"reader open {results['reader_open_ms']:.1f} ms; {stats['seeks']} of {N_SEEK} fetches seeked")

    assert mismatched == [], f"frames differ between seeking and naive decoding: {mismatched}"
    assert results["speedup_median"] >= MIN_SPEEDUP, results
