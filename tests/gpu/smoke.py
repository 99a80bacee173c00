"""Each GPU path of the platform once, on CUDA: ``make gpu-smoke`` (``python -m tests.gpu.smoke``).

Runs on a machine with a CUDA device and nothing else from the platform (no database, no
Django), with only what a CUDA image's own Python holds (torch, numpy, OpenCV, transformers,
sentence-transformers) and the wheels of ``make gpu-wheels``; well under five minutes on one GPU.
The checks, in order:

* ``sam3``, ``sam2``: SAM 3 (``sam3`` backend: text prompt, bfloat16 autocast) and SAM 2
  (``sam2`` backend: a box prompt) on 8 synthetic frames, each through its backend's own loading
  code. SAM 3 uses the checkpoint named by ``TRAJLAB_SAM3_CHECKPOINT`` (a real ``sam3.pt``) when
  it is set, else a small random-weight model built by the package's builder
  (``tests/models/sam3_tiny.py``); SAM 2 a tiny random-weight model built from its packaged
  config (``tests/models/sam2_tiny.py``). Checked: the parameters live on the GPU, no global CUDA
  autocast is left behind by sam3 (its tracker enters one at construction), hole filling (Triton
  on CUDA) ran, every box lies inside the frame, and the random-weight SAM 3 (which detects on
  every frame) reports trajectories.
* ``train_vtrajembed``, ``train_scout``, ``train_actpair``: ``TRAIN_STEPS`` steps of each
  retriever at its embedded default size through ``models.training.trainer.train`` with
  ``precision="bf16"``, on a tiny snapshot rendered on the spot (``tests/gpu/tiny_data.py``: one
  40-frame 320x240 scene of three people, their truth tracks, six queries, verified relations)
  and a random-weight text encoder (the packaged MiniLM is not on a GPU image). Checked: the run
  finished with finite losses on the device, modules gave bfloat16 outputs, no autocast is left
  behind, the checkpoint records the precision, and its weights and AdamW state are float32.
* ``torchrun``: ``workers.train_entry`` launched by its ``command(...)`` with one process per
  CUDA device (NCCL; two gloo processes with ``--device cpu``) on the saved snapshot folder
  (loaded against its sealed hash), bf16 steps of VTrajEmbed. Checked: exit status 0,
  ``result.json`` finished with the launched world size, a progress line per step. Its peak
  memory is the rise of the device memory in use (the ranks are other processes).
* ``faiss``: ``models.training.index.TrajectoryIndex`` (exact and IVF) over ``FAISS_VECTORS``
  unit vectors of VTrajEmbed's embedding width, drawn around ``FAISS_CENTRES`` random centres
  (as embeddings of alike trajectories cluster; on uniform noise an IVF index has nothing to
  find), searched with ``FAISS_QUERIES`` queries; top 10 against an exact torch search on the
  device (recall@10). When the installed faiss has GPU support (``faiss.get_num_gpus()``) a GPU
  flat index is searched too ("faiss gpu"), else the line says "faiss cpu".

Each check prints one line with its time and peak GPU memory (torch's allocator in this process,
from the check's start); the figures are written to ``$OUT/gpu_smoke.json`` (or
``var/gpu_smoke.json``). Exit status 0 when everything held, 1 when a check failed, 2 when there
is no CUDA device. ``--device cpu`` runs the same script on the CPU (the CUDA-only checks left
out), to try the script itself on a machine without a GPU.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np

N_FRAMES, WIDTH, HEIGHT = 8, 320, 240
DEVICE = "cuda"
ROOT = Path(__file__).resolve().parents[2]
TRAIN_STEPS = 3                  # optimizer steps of each training check
TORCHRUN_TIMEOUT_S = 180         # the torchrun check fails past this
FAISS_VECTORS, FAISS_QUERIES, FAISS_CENTRES = 100_000, 1_000, 1_000
IVF_MIN_RECALL = 0.85            # IVF-Flat at its defaults (nlist √n, nprobe 32) on that data: about 0.95
# set unless the caller set them: no progress bars or tokenizer fork warnings in the output
QUIET = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error", "TOKENIZERS_PARALLELISM": "false"}


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
    state = tracker.init_state(frames)
    tracker.add_prompt(state, **prompt)
    _sync()
    t0 = time.perf_counter()
    n = sum(1 for _ in tracker.propagate(state))
    _sync()
    seconds = time.perf_counter() - t0
    proposals = tracker.proposals(state)
    _check_boxes(proposals)
    return {"frames": n, "seconds_per_frame": round(seconds / max(n, 1), 3), "trajectories": len(proposals)}


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
    return _tracked(figures, "TRAJLAB_SAM3_CHECKPOINT" if real else "tiny random weights")


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
    return _tracked(figures, "tiny random weights")


def _tracked(figures: dict, checkpoint: str) -> dict:
    return {"checkpoint": checkpoint, **figures, "detail": f"{figures['frames']} frames at {figures['seconds_per_frame']} "
            f"s/frame, {figures['trajectories']} trajectories ({checkpoint})"}


# -- training -----------------------------------------------------------------------------------------
@dataclass
class TinyData:
    """The tiny snapshot (``tests/gpu/tiny_data.py``), saved, and the text setting of every retriever."""

    snapshot: object                             # models.training.snapshot.RelationSnapshotData
    folder: Path                                 # where it is saved (RelationSnapshotData.save)
    sha: str                                     # its content hash
    text: dict                                   # TextEncoderConfig of the tiny random-weight text encoder


@functools.cache
def _tiny_data(root: Path) -> TinyData:
    """Built once per run under ``root``, for the training and torchrun checks."""
    from tests.gpu.tiny_data import save_snapshot, tiny_snapshot, tiny_text_encoder

    snapshot = tiny_snapshot(root / "video")
    sha = save_snapshot(snapshot, root / "snapshot")
    text = tiny_text_encoder(root / "text_encoder", [q.text for q in snapshot.queries])
    return TinyData(snapshot, root / "snapshot", sha, {"kind": "sentence-transformers", "path": str(text)})


def _train_config(data: TinyData, **overrides) -> dict:
    """A few bf16 steps of a retriever at its embedded default size (the tiny text encoder aside)."""
    return {"steps": TRAIN_STEPS, "batch_size": 4, "checkpoint_every": TRAIN_STEPS, "precision": "bf16",
            "eval_at_end": False, "model": {"text": data.text}, **overrides}


def _steps(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "steps.jsonl").read_text().splitlines() if line.strip()]


def smoke_train(kind: str, folder: Path) -> dict:
    """TRAIN_STEPS steps of ``kind`` through ``models.training.trainer.train`` in bf16 autocast."""
    import torch

    from models.training.trainer import train

    data = _tiny_data(folder.parent)
    outputs = {"bf16": 0, "all": 0}

    def count(module, args, output) -> None:
        if isinstance(output, torch.Tensor):
            outputs["all"] += 1
            outputs["bf16"] += output.dtype == torch.bfloat16

    hook = torch.nn.modules.module.register_module_forward_hook(count)
    try:
        result = train(data.snapshot, kind, _train_config(data, device=DEVICE, distributed="off"), folder / "run")
    finally:
        hook.remove()
    _sync()
    steps = _steps(folder / "run")
    ckpt = torch.load(folder / "run" / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert result["status"] == "finished" and result["step"] == TRAIN_STEPS, result
    assert result["precision"] == ckpt["train_config"]["precision"] == "bf16", "the run's precision is not recorded"
    losses = [r.get("loss") for r in steps]
    assert len(losses) == TRAIN_STEPS and all(v is not None and math.isfinite(v) for v in losses), losses
    assert outputs["bf16"] > 0, "no module gave a bfloat16 output: autocast did not reach the model"
    assert not torch.is_autocast_enabled(DEVICE), "the trainer left an autocast behind"
    dtypes = {str(v.dtype) for v in ckpt["model"].values() if v.is_floating_point()}
    assert dtypes == {"torch.float32"}, f"trained weights in {dtypes}: they must stay float32"
    moments = {str(v.dtype) for state in ckpt["optimizer"]["state"].values() for k, v in state.items()
               if k in ("exp_avg", "exp_avg_sq")}
    assert moments == {"torch.float32"}, f"AdamW state in {moments}: it must stay float32"
    assert result["device"].startswith(DEVICE), f"trained on {result['device']}"
    per_step = statistics.mean(r["seconds"] for r in steps[1:]) if len(steps) > 1 else steps[0]["seconds"]
    return {"steps": TRAIN_STEPS, "losses": losses, "seconds_per_step": round(per_step, 4),
            "bf16_outputs": outputs["bf16"], "module_outputs": outputs["all"], "device_trained": result["device"],
            "detail": f"{TRAIN_STEPS} bf16 steps on {result['device']}, {per_step:.3f} s/step after the first, "
                      f"loss {losses[0]:.4g} -> {losses[-1]:.4g}, {outputs['bf16']}/{outputs['all']} module "
                      f"outputs bf16, weights and AdamW state fp32"}


def smoke_torchrun(folder: Path) -> dict:
    """``workers.train_entry`` under torchrun: a process per CUDA device (NCCL), or two (gloo) on CPUs."""
    import torch

    from workers.train_entry import command

    data = _tiny_data(folder.parent)
    n = max(1, torch.cuda.device_count()) if DEVICE == "cuda" else 2
    config_file = folder / "train_config.json"
    config_file.write_text(json.dumps(_train_config(data, batch_size=2 * n, device="auto" if DEVICE == "cuda" else "cpu")))
    out_dir, progress, log = folder / "run", folder / "progress.jsonl", folder / "torchrun.log"
    cmd = command(nproc_per_node=n, snapshot_dir=str(data.folder), snapshot_sha=data.sha, model_kind="vtrajembed",
                  config_file=str(config_file), out_dir=str(out_dir), progress_file=str(progress))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "OMP_NUM_THREADS": "1"}
    used = (lambda: sum(t - f for f, t in map(torch.cuda.mem_get_info, range(n)))) if DEVICE == "cuda" else None
    before = peak = used() if used else 0
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TORCHRUN_TIMEOUT_S
        while proc.poll() is None and time.monotonic() < deadline:
            peak = max(peak, used()) if used else 0
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"torchrun ran past {TORCHRUN_TIMEOUT_S} s; its log:\n{log.read_text()[-3000:]}")
    assert proc.returncode == 0, f"torchrun exited with {proc.returncode}; its log:\n{log.read_text()[-3000:]}"
    result = json.loads((out_dir / "result.json").read_text())
    assert result["status"] == "finished" and result["step"] == TRAIN_STEPS, result
    assert result["world_size"] == n, f"world size {result['world_size']}, {n} processes launched"
    assert len(progress.read_text().splitlines()) == TRAIN_STEPS, "rank 0 did not report every step"
    assert result["device"].startswith(DEVICE), f"trained on {result['device']}"
    backend = "nccl" if DEVICE == "cuda" else "gloo"
    return {"processes": n, "backend": backend, "world_size": result["world_size"], "train_seconds": result["seconds"],
            "peak_gpu_mib": round((peak - before) / 2**20, 1) if used else None,
            "detail": f"{n} process(es) ({backend}), {TRAIN_STEPS} bf16 steps of vtrajembed, exit 0, result finished "
                      f"with world size {result['world_size']}" + (" (peak: rise of the device memory in use)" if used else "")}


# -- search -------------------------------------------------------------------------------------------
def smoke_faiss(folder: Path) -> dict:
    """TrajectoryIndex (exact, IVF) against an exact torch search, recall@10 (module docstring)."""
    import faiss
    import torch

    from models.retrievers.vtrajembed.model import VTrajEmbedConfig
    from models.training.index import IndexConfig, TrajectoryIndex

    dim, n, n_q, k = VTrajEmbedConfig().embed_dim, FAISS_VECTORS, FAISS_QUERIES, 10
    rng = np.random.default_rng(0)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    centres = unit(rng.standard_normal((FAISS_CENTRES, dim)))                            # [C, d]
    base = unit(centres[rng.integers(FAISS_CENTRES, size=n)] + 0.08 * rng.standard_normal((n, dim)))  # [n, d]
    queries = unit(centres[rng.integers(FAISS_CENTRES, size=n_q)] + 0.08 * rng.standard_normal((n_q, dim)))
    ids = np.arange(n, dtype=np.int64) + 1000                                            # [n]
    t0 = time.perf_counter()
    x = torch.from_numpy(base).to(DEVICE)                                                # [n, d]
    exact = torch.cat([(torch.from_numpy(queries[i:i + 256]).to(DEVICE) @ x.T).topk(k, dim=1).indices.cpu()
                       for i in range(0, n_q, 256)]).numpy() + 1000                      # [Q, k] ids
    _sync()
    figures = {"vectors": n, "dim": dim, "queries": n_q, "torch_exact_seconds": round(time.perf_counter() - t0, 3)}

    def recall(found: np.ndarray) -> float:
        return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found, exact)]))

    for kind in ("exact", "ivf"):
        t0 = time.perf_counter()
        index = TrajectoryIndex.build(base, ids, ids // 100, IndexConfig(dim=dim, kind=kind))
        built = time.perf_counter() - t0
        _, found = index.search(queries, k)                                              # [Q, k]
        figures[kind] = {"recall@10": round(recall(found), 4), "build_seconds": round(built, 3),
                         "search_seconds": round(time.perf_counter() - t0 - built, 3)}
    backend = "faiss cpu"
    if DEVICE == "cuda" and faiss.get_num_gpus() > 0:
        backend = "faiss gpu"
        t0 = time.perf_counter()
        flat = faiss.GpuIndexFlatIP(faiss.StandardGpuResources(), dim)
        flat.add(base)
        found = ids[flat.search(queries, k)[1]]
        figures["gpu_flat"] = {"recall@10": round(recall(found), 4), "seconds": round(time.perf_counter() - t0, 3)}
        assert figures["gpu_flat"]["recall@10"] >= 0.999, f"a GPU flat index missed exact neighbours: {figures}"
    assert figures["exact"]["recall@10"] >= 0.999, f"the exact index missed exact neighbours: {figures}"
    assert figures["ivf"]["recall@10"] >= IVF_MIN_RECALL, f"IVF recall@10 under {IVF_MIN_RECALL}: {figures}"
    gpu = f", gpu flat recall@10 {figures['gpu_flat']['recall@10']:.3f}" if "gpu_flat" in figures else ""
    return {"backend": backend, **figures,
            "detail": f"{backend}, {n} x {dim} unit vectors, {n_q} queries: exact recall@10 "
                      f"{figures['exact']['recall@10']:.3f}, ivf recall@10 {figures['ivf']['recall@10']:.3f} "
                      f"(build {figures['ivf']['build_seconds']:.2f} s, search {figures['ivf']['search_seconds']:.2f} s)"
                      f"{gpu}; torch exact search {figures['torch_exact_seconds']:.2f} s on {DEVICE}"}


# -- the run ------------------------------------------------------------------------------------------
CHECKS = (("sam3", smoke_sam3), ("sam2", smoke_sam2),
          *((f"train_{kind}", functools.partial(smoke_train, kind)) for kind in ("vtrajembed", "scout", "actpair")),
          ("torchrun", smoke_torchrun), ("faiss", smoke_faiss))


def _sync() -> None:
    if DEVICE == "cuda":
        import torch

        torch.cuda.synchronize()


def _run(check, folder: Path) -> dict:
    """One check's figures with its wall time and peak GPU memory (torch's allocator, this process;
    a check that measures its own, such as torchrun's, keeps it)."""
    import torch

    cuda = DEVICE == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    figures = check(folder)
    _sync()
    peak = round(torch.cuda.max_memory_allocated() / 2**20, 1) if cuda else None
    return {"seconds": round(time.perf_counter() - t0, 2), "peak_gpu_mib": figures.pop("peak_gpu_mib", peak), **figures}


def _line(name: str, r: dict) -> str:
    if not r["ok"]:
        return f"  {name}: FAILED {r['error']}"
    peak = "n/a" if r["peak_gpu_mib"] is None else f"{r['peak_gpu_mib']} MiB"
    return f"  {name}: ok, {r['seconds']} s, peak GPU {peak}; {r['detail']}"


def main(argv: list[str] | None = None) -> int:
    global DEVICE
    import torch

    parser = argparse.ArgumentParser(prog="python -m tests.gpu.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    DEVICE = parser.parse_args(argv).device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("gpu-smoke: no CUDA device here; run it on a GPU machine", file=sys.stderr)
        return 2
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
    result = {"device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu", "torch": torch.__version__,
              "cuda_devices": torch.cuda.device_count() if DEVICE == "cuda" else 0, "checks": {}}
    print(f"gpu-smoke on {result['device']} (torch {result['torch']})", flush=True)
    failed = False
    with tempfile.TemporaryDirectory(prefix="gpu_smoke_") as tmp:
        for name, check in CHECKS:
            folder = Path(tmp) / name
            folder.mkdir()
            try:
                result["checks"][name] = {"ok": True, **_run(check, folder)}
            except Exception as exc:  # report every check, then fail
                failed = True
                result["checks"][name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
                traceback.print_exc()
            print(_line(name, result["checks"][name]), flush=True)
        _tiny_data.cache_clear()
    out = Path(os.environ.get("OUT") or ROOT / "var")
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_smoke.json").write_text(json.dumps(result, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
