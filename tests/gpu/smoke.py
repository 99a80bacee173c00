"""A few frames of each GPU tracker on CUDA: ``make gpu-smoke`` (``python -m tests.gpu.smoke``).

Runs on a machine with a CUDA device and nothing else from the platform (no database, no
Django): SAM 3 (``sam3`` backend: text prompt, bfloat16 autocast) and SAM 2 (``sam2``
backend: a box prompt) on 8 synthetic frames, each through its backend's own loading code.

* SAM 3 uses the checkpoint named by ``TRAJLAB_SAM3_CHECKPOINT`` (a real ``sam3.pt``) when it is
  set, else a small random-weight model built by the package's builder
  (``tests/models/sam3_tiny.py``); SAM 2 a tiny random-weight model built from its packaged
  config (``tests/models/sam2_tiny.py``).
* It checks what CUDA changes: the model's parameters live on the GPU, no global CUDA autocast
  is left behind by sam3 (its tracker enters one at construction), hole filling (Triton on CUDA)
  ran, every box lies inside the frame, and the random-weight SAM 3 (which detects on every
  frame) reports trajectories.
* Figures (seconds per frame, peak GPU memory) are printed and written to
  ``$OUT/gpu_smoke.json`` (or ``var/gpu_smoke.json``). Exit status 0 when everything held, 1 when
  a check failed, 2 when there is no CUDA device. ``--device cpu`` runs the same script on the
  CPU (the CUDA-only checks left out), to try the script itself on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

N_FRAMES, WIDTH, HEIGHT = 8, 320, 240
DEVICE = "cuda"


class SyntheticFrames:
    """A red block moving right over a textured background (BGR uint8), as a FrameSource."""

    fps, frame_count, width, height = 10.0, N_FRAMES, WIDTH, HEIGHT

    def __init__(self):
        rng = np.random.default_rng(0)
        self.background = rng.integers(40, 120, (HEIGHT, WIDTH, 3), dtype=np.uint8)

    def box(self, index: int) -> list[float]:
        x = 20 + 20 * index
        return [x, 80, x + 60, 200]

    def read(self, index: int) -> np.ndarray:
        if not 0 <= index < N_FRAMES:
            raise IndexError(index)
        frame = self.background.copy()
        x0, y0, x1, y1 = map(int, self.box(index))
        frame[y0:y1, x0:x1] = (30, 30, 220)
        return frame

    def iter_frames(self, start=0, stop=None, step=1):
        for i in range(start, N_FRAMES if stop is None else min(stop, N_FRAMES), step):
            yield i, self.read(i)


def _check_boxes(proposals) -> None:
    for p in proposals:
        b = np.asarray(p.boxes)
        assert np.isfinite(b).all(), f"track {p.track_id}: non-finite boxes"
        assert (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all() and (b[:, 2] <= WIDTH).all() \
            and (b[:, 3] <= HEIGHT).all(), f"track {p.track_id}: a box outside the {WIDTH}x{HEIGHT} frame"


def _timed(tracker, frames, prompt: dict) -> dict:
    import torch

    cuda = DEVICE == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    state = tracker.init_state(frames)
    tracker.add_prompt(state, **prompt)
    if cuda:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    n = sum(1 for _ in tracker.propagate(state))
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    proposals = tracker.proposals(state)
    _check_boxes(proposals)
    return {"frames": n, "seconds_per_frame": round(seconds / max(n, 1), 3), "trajectories": len(proposals),
            "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None}


def smoke_sam3(folder: Path) -> dict:
    from models.backends.tracking.sam3_tracker import Sam3Tracker, Sam3TrackerConfig
    from tests.models.sam3_tiny import build_tiny_sam3, tiny_sam3_architecture

    real = os.environ.get("TRAJLAB_SAM3_CHECKPOINT", "")
    frames = SyntheticFrames()
    if real:
        tracker = Sam3Tracker(Sam3TrackerConfig(checkpoint=real, device=DEVICE))
        figures = _timed(tracker, frames, {"category": "person"})
    else:
        with tiny_sam3_architecture():
            tracker = Sam3Tracker(Sam3TrackerConfig(checkpoint=str(build_tiny_sam3(folder)), device=DEVICE))
            figures = _timed(tracker, frames, {"category": "person"})
        assert figures["trajectories"] > 0, "the random-weight SAM 3 detects on every frame, yet reported nothing"
    info = tracker.run_info()
    assert info["device"].startswith(DEVICE), info
    if DEVICE == "cuda":
        import torch

        assert not torch.is_autocast_enabled("cuda"), "SAM 3 left a global CUDA autocast behind"
        assert info["fill_hole_area"] > 0, "hole filling should be on with CUDA"
        assert next(tracker.model.parameters()).is_cuda, "SAM 3's parameters are not on the GPU"
    return {"checkpoint": "TRAJLAB_SAM3_CHECKPOINT" if real else "tiny random weights", **figures}


def smoke_sam2(folder: Path) -> dict:
    from models.backends.tracking.sam2_tracker import Sam2Tracker, Sam2TrackerConfig
    from tests.models.sam2_tiny import build_tiny_sam2

    model_config, checkpoint = build_tiny_sam2(folder)
    tracker = Sam2Tracker(Sam2TrackerConfig(checkpoint=str(checkpoint), model_config=str(model_config),
                                            device=DEVICE, mask_threshold=0.0, min_mask_area=1))
    frames = SyntheticFrames()
    figures = _timed(tracker, frames, {"category": "block", "frame_index": 3, "boxes": [frames.box(3)]})
    if DEVICE == "cuda":
        assert next(tracker.model.parameters()).is_cuda, "SAM 2's parameters are not on the GPU"
    return {"checkpoint": "tiny random weights", **figures}


def main(argv: list[str] | None = None) -> int:
    global DEVICE
    import torch

    parser = argparse.ArgumentParser(prog="python -m tests.gpu.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    DEVICE = parser.parse_args(argv).device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("gpu-smoke: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    result = {"device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu", "torch": torch.__version__, "checks": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="gpu_smoke_") as tmp:
        for name, check in (("sam3", smoke_sam3), ("sam2", smoke_sam2)):
            folder = Path(tmp) / name
            folder.mkdir()
            try:
                result["checks"][name] = {"ok": True, **check(folder)}
            except Exception as exc:  # report every backend, then fail
                failed = True
                result["checks"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                traceback.print_exc()
    out = Path(os.environ.get("OUT") or Path(__file__).resolve().parents[2] / "var")
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_smoke.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"gpu-smoke on {result['device']} (torch {result['torch']})")
    for name, r in result["checks"].items():
        print(f"  {name}: " + (f"ok, {r['frames']} frames, {r['seconds_per_frame']} s/frame, {r['trajectories']} "
                                f"trajectories, peak {r['peak_gpu_mib']} MiB ({r['checkpoint']})"
                                if r["ok"] else f"FAILED {r['error']}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
