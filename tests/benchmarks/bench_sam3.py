"""SAM 3 on the CPU: seconds per frame at SAM 3's input resolution, and how frames are fed.

What a user without a GPU can expect from the ``sam3`` tracking backend, on the first frames of
``vtest.avi`` (a real pedestrian video, 768x576), one text prompt ("person"):

* **Seconds per frame.** Quick size (default, in CI): the small random-weight SAM 3 of
  ``tests/models/sam3_tiny.py`` (the package's builder, ViT trunk, text encoder and decoder
  reduced), 3 frames. Full size (``TRAJLAB_BENCH_FULL=1``): the builder's real architecture
  (the published model's size, random weights: no checkpoint can be downloaded here), 3 frames.
  Both run at SAM 3's fixed 1008x1008 input, under CPU bfloat16 autocast, with torch's default
  threads; the figure is the whole propagation (text encoding and the prompt included) over the
  frames, because SAM 3 holds outputs back for its hotstart frames.
* **Frame feeding, against the obvious way.** The backend reads and preprocesses frames one at a
  time when the model asks (``sam3_frame_images``); the package's own loader
  (``sam3.model.io_utils.load_video_frames`` on a frame folder, what
  ``Sam3VideoPredictor.start_session`` calls) decodes and resizes the whole video before the
  first frame can run. Both over the same PNG frames (30 quick, 150 full): seconds until frame 0
  is ready, bytes of preprocessed frames held, and the largest difference between the two
  preprocessings (float16 rounding only).

Figures go to ``var/bench/sam3.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from models.backends.tracking.sam3_tracker import (
    CudaToCpu,
    Sam3Tracker,
    Sam3TrackerConfig,
    sam3_frame_images,
)
from models.media.video import FrameReader
from tests.benchmarks.bench_tracking import VTEST, HeadFrames, out_dir

pytestmark = [pytest.mark.benchmark, pytest.mark.slow]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
RUN_FRAMES = 3
FEED_FRAMES = 150 if FULL else 30
IMAGE_SIZE = 1008


def _full_size_checkpoint(folder: Path) -> Path:
    """The builder's real architecture with random weights, saved as a checkpoint (no download)."""
    from sam3.model_builder import build_sam3_video_model

    from models.backends.tracking.sam3_tracker import _resolve_bpe

    torch.manual_seed(0)
    with CudaToCpu():
        model = build_sam3_video_model(checkpoint_path=None, load_from_HF=False, bpe_path=str(_resolve_bpe("")),
                                       device="cpu")
    path = folder / "sam3_random_full.pt"
    torch.save({"model": model.state_dict()}, path)
    return path


def _seconds_per_frame(checkpoint: Path, frames) -> dict:
    t0 = time.perf_counter()
    tracker = Sam3Tracker(Sam3TrackerConfig(checkpoint=str(checkpoint), device="cpu"))
    load_s = time.perf_counter() - t0
    state = tracker.init_state(frames)
    tracker.add_prompt(state, category="person")
    # SAM 3 holds its outputs back until it has seen hotstart_delay (15) frames or the end, so
    # the time between reported frames says nothing: the whole pass is timed
    t0 = time.perf_counter()
    n = sum(1 for _ in tracker.propagate(state))
    seconds = time.perf_counter() - t0
    return {"frames": n, "load_s": round(load_s, 2), "propagate_s": round(seconds, 2),
            "seconds_per_frame": round(seconds / n, 2),
            "parameters_m": round(sum(p.numel() for p in tracker.model.parameters()) / 1e6, 1),
            "trajectories": len(tracker.proposals(state))}


def _feeding(frames: PngFrames) -> dict:
    from sam3.model.io_utils import load_video_frames

    t0 = time.perf_counter()
    lazy = sam3_frame_images(frames, IMAGE_SIZE)
    first = lazy[0]
    lazy_first_s = time.perf_counter() - t0
    differences = [float((lazy[0].float() - first.float()).abs().max())]
    for i in range(1, len(lazy)):
        lazy[i]
    lazy_total_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    with CudaToCpu():
        images, height, width = load_video_frames(str(frames.folder), IMAGE_SIZE, offload_video_to_cpu=True)
    loader_s = time.perf_counter() - t0
    differences += [float((images[i].float() - lazy[i].float()).abs().max()) for i in (0, len(lazy) - 1)]
    return {
        "frames": len(lazy),
        "lazy": {"first_frame_ready_s": round(lazy_first_s, 3), "all_frames_s": round(lazy_total_s, 3),
                 "bytes_held": first.numel() * first.element_size()},
        "package_loader": {"first_frame_ready_s": round(loader_s, 3), "all_frames_s": round(loader_s, 3),
                           "bytes_held": images.numel() * images.element_size(), "dtype": str(images.dtype),
                           "decoded_frames": int(images.shape[0])},
        "same_size": [height, width] == [frames.height, frames.width],
        "max_abs_difference": max(differences),
    }


class PngFrames:
    """The first frames of vtest.avi as "<index>.png" files (lossless: both loaders see the same
    pixels), behind the FrameSource interface."""

    def __init__(self, folder: Path, n: int, fps: float):
        import cv2

        self.folder, self.frame_count, self.fps = folder, n, fps
        self.height, self.width = cv2.imread(str(folder / "0.png")).shape[:2]

    def read(self, index: int) -> np.ndarray:
        import cv2

        if not 0 <= index < self.frame_count:
            raise IndexError(index)
        return cv2.imread(str(self.folder / f"{index}.png"))

    def iter_frames(self, start=0, stop=None, step=1):
        for i in range(start, self.frame_count if stop is None else min(stop, self.frame_count), step):
            yield i, self.read(i)


def _clip(tmp_path: Path, n: int) -> PngFrames:
    import cv2

    source = FrameReader(str(VTEST))
    folder = tmp_path / "vtest_head"
    folder.mkdir()
    for i, frame in source.iter_frames(0, n):
        assert cv2.imwrite(str(folder / f"{i}.png"), frame)
    fps = source.fps
    source.close()
    return PngFrames(folder, n, fps)


def test_sam3_seconds_per_frame_on_the_cpu_and_frame_feeding(tmp_path, sam3_tiny_checkpoint):
    if not VTEST.is_file():
        pytest.skip(f"{VTEST} is not here")
    from tests.models.sam3_tiny import tiny_sam3_architecture

    clip = _clip(tmp_path, FEED_FRAMES)
    feeding = _feeding(clip)
    run_frames = HeadFrames(clip, RUN_FRAMES)
    with tiny_sam3_architecture():
        tiny = _seconds_per_frame(sam3_tiny_checkpoint, run_frames)
    result = {"mode": "full" if FULL else "quick", "video": VTEST.name, "size": [clip.width, clip.height],
              "input_resolution": IMAGE_SIZE, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "python": platform.python_version(), "cpu_count": os.cpu_count(),
              "tiny_model": tiny, "feeding": feeding}
    if FULL:
        (tmp_path / "full").mkdir()
        result["full_size_model"] = _seconds_per_frame(_full_size_checkpoint(tmp_path / "full"), run_frames)
    (out_dir() / "sam3.json").write_text(json.dumps(result, indent=2) + "\n")

    print(f"\nSAM 3 on the CPU, {VTEST.name} {clip.width}x{clip.height} at {IMAGE_SIZE}x{IMAGE_SIZE}, "
          f"{result['threads']} threads")
    print(f"{'model':<28}{'params M':>10}{'load s':>8}{'s/frame':>9}")
    for name in ("tiny_model", "full_size_model"):
        if name in result:
            r = result[name]
            print(f"{name:<28}{r['parameters_m']:>10.1f}{r['load_s']:>8.2f}{r['seconds_per_frame']:>9.2f}")
    lazy, loader = feeding["lazy"], feeding["package_loader"]
    print(f"feeding {feeding['frames']} frames: lazy first frame {lazy['first_frame_ready_s']:.3f} s holding "
          f"{lazy['bytes_held'] / 2**20:.1f} MiB; package loader {loader['first_frame_ready_s']:.3f} s holding "
          f"{loader['bytes_held'] / 2**20:.1f} MiB")

    assert tiny["frames"] == RUN_FRAMES
    assert feeding["same_size"] and loader["decoded_frames"] == FEED_FRAMES
    assert feeding["max_abs_difference"] < 0.05, "the lazy frames are not preprocessed as SAM 3's loader does"
    assert lazy["bytes_held"] * FEED_FRAMES <= loader["bytes_held"]
    assert lazy["first_frame_ready_s"] < loader["first_frame_ready_s"]
