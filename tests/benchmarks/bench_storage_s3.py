"""Frame fetch latency from an S3 bucket (SeaweedFS on loopback) against local disk.

One 720p MPEG-4 video is imported twice, to local disk (``TRAJLAB_STORAGE_URL`` unset) and to the
bucket, and frames are asked for as the frames API asks (``video_frame_jpeg``: decode and encode
one JPEG):
- ``cold``: the first frame of a video on this host: the process's open readers and JPEG cache
  emptied and, for the bucket, the read-through object cache too, so each sample includes the
  one whole-object download that OpenCV needs (a file, not a stream);
- ``cached``: later frames at random indices, the object already in the cache (the JPEG cache is
  emptied before each, so every sample decodes).
It also times single objects as a frame folder or a crop cache reads them: a whole small object
(a JPEG frame, one GET) and a 64 KiB range of the video object (one ranged GET), against reading
the same bytes from local disk.

Quick size (default): 150 frames, 5 cold and 30 cached samples. Full size
(``TRAJLAB_BENCH_FULL=1``): 750 frames, 20 cold and 200 cached. Figures (``p50_ms``, ``p95_ms``
per path) go to ``var/bench/storage_s3.json``; run with ``-s`` to see the table. Loopback figures:
a remote bucket adds its round-trip time to every GET and its bandwidth to the cold download.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from django.test import override_settings

from common import storage
from models.media.video import FrameReader, VideoError, probe_video
from tests.benchmarks.bench_frames import render_long_video
from trajectories import selectors
from trajectories.services.ingestion import video_import

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL") == "1"
REPO = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO / "var" / "bench"
N_FRAMES = 750 if FULL else 150
N_COLD = 20 if FULL else 5
N_CACHED = 200 if FULL else 30
N_OBJECTS = 50 if FULL else 20
SEED = 20261206


@pytest.fixture(scope="module")
def video_file() -> Path:
    path = BENCH_DIR / "cache" / f"storage_s3_720p_{N_FRAMES}f.mp4"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if probe_video(path).frame_count == N_FRAMES:
            return path
    except VideoError:
        pass
    render_long_video(path, N_FRAMES)
    return path


def percentiles(samples_s: list[float]) -> dict:
    ms = np.asarray(samples_s) * 1000
    return {"n": len(ms), "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2), "max_ms": round(float(ms.max()), 2)}


def forget_open_videos() -> None:
    selectors._readers.clear()
    selectors._encoded.clear()


def cold_fetches(video, objects, rng) -> dict:
    cold = []
    for _ in range(N_COLD):
        forget_open_videos()
        if objects.remote:
            shutil.rmtree(objects.cache.root, ignore_errors=True)
        index = int(rng.integers(0, video.frame_count))
        start = time.perf_counter()
        selectors.video_frame_jpeg(video=video, index=index)
        cold.append(time.perf_counter() - start)
    return percentiles(cold)


def cached_fetch(video, index: int) -> float:
    selectors._encoded.clear()
    start = time.perf_counter()
    selectors.video_frame_jpeg(video=video, index=index)
    return time.perf_counter() - start


def object_reads(objects, video, frame_keys: list[str]) -> dict:
    whole, ranged = [], []
    for key in frame_keys:
        start = time.perf_counter()
        objects.read(key)
        whole.append(time.perf_counter() - start)
    for i in range(len(frame_keys)):
        offset = (i * 997 * 4096) % max(1, video.size_bytes - 65536)
        start = time.perf_counter()
        objects.read(video.path, start=offset, length=65536)
        ranged.append(time.perf_counter() - start)
    return {"frame_object": percentiles(whole), "range_64k": percentiles(ranged)}


def test_frame_fetch_bucket_against_local_disk(settings, tmp_path, s3_server, s3_bucket, video_file):
    settings.MEDIA_ROOT = tmp_path / "media"
    (settings.MEDIA_ROOT / "tmp").mkdir(parents=True)
    frames = tmp_path / "frames"
    frames.mkdir()
    reader = FrameReader(video_file)
    for i in range(N_OBJECTS):
        cv2.imwrite(str(frames / f"{i:06d}.jpg"), reader.read(i))
    reader.close()
    report = {"frames": N_FRAMES, "size": "full" if FULL else "quick", "video_bytes": video_file.stat().st_size,
              "machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "paths": {}}

    settings.AWS_S3_ENDPOINT_URL = s3_server.endpoint
    settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY = s3_server.access_key, s3_server.secret_key
    settings.TRAJLAB_STORAGE_CACHE_DIR = tmp_path / "object-cache"
    urls = {"local": "", "bucket": f"s3://{s3_bucket}/bench"}

    def use(place: str):
        """The storage setting for ``place``, entered and left (no layer of overrides piles up)."""
        return override_settings(TRAJLAB_STORAGE_URL=urls[place])

    # One row, one key: the same video imported to local disk and to the bucket (the key means the
    # same file in both places), so both paths decode the same frames.
    video, frame_keys = None, [f"bench-frames/{f.name}" for f in sorted(frames.iterdir())]
    for place in ("local", "bucket"):
        with use(place):
            objects = storage.store()
            start = time.perf_counter()
            if video is None:
                video = video_import(path=video_file, source="bench").video
            else:
                objects.put_file(video.path, video_file)
            report["paths"][place] = {"import_s": round(time.perf_counter() - start, 3)}
            for key, f in zip(frame_keys, sorted(frames.iterdir())):
                objects.put_file(key, f)
            report["paths"][place]["cold"] = cold_fetches(video, objects, np.random.default_rng(SEED))
            report["paths"][place].update(object_reads(objects, video, frame_keys))
    # cached: the two places take turns on the same indices (a shared machine's load hits both alike)
    cached = {"local": [], "bucket": []}
    for index in np.random.default_rng(SEED + 1).integers(0, video.frame_count, N_CACHED):
        for place in ("local", "bucket"):
            with use(place):
                cached[place].append(cached_fetch(video, int(index)))
    rows = []
    for place in ("local", "bucket"):
        figures = report["paths"][place]
        figures["cached"] = percentiles(cached[place])
        for name in ("cold", "cached", "frame_object", "range_64k"):
            rows.append(f"{place:7s} {name:13s} p50 {figures[name]['p50_ms']:8.2f} ms   "
                        f"p95 {figures[name]['p95_ms']:8.2f} ms   (n={figures[name]['n']})")
    storage.reset()
    forget_open_videos()
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    (BENCH_DIR / "storage_s3.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nframe fetch, 720p MPEG-4, {N_FRAMES} frames ({report['video_bytes'] / 1e6:.1f} MB)")
    print("\n".join(rows))
    # the point of the cache: once the object is here, the bucket costs nothing per frame
    cached = report["paths"]["bucket"]["cached"]["p50_ms"]
    assert cached < 5 * report["paths"]["local"]["cached"]["p50_ms"] + 20
