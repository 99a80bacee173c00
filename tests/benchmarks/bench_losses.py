"""The mask-guided contrastive loss, forward and backward: the vectorised ``mask_guided_loss``
against the plain-loop ``mask_guided_loss_reference`` on the same batch, in the same run.

The batch is VTrajEmbed's full-group layout (``models.training.batching`` without L_bi-only rows
or extra cross-video columns): B queries, each with a group of four records (clean GT, noisy GT,
matched raw positive: G = 1; confirmed negative: G = 0), so P = 4B records, unit embeddings of
width 256 and logit scale 20. The batch relations M hold each query's own positives (1) and
negative (0); across groups 1% of the pairs are verified matches, 7% verified mismatches and the
rest ⊥ (about 92% of the cross-group pairs unknown, as in a snapshot of mostly unverified
cross-video pairs).

Beside them, at every size: ``masked_lse_ms``, the same loss through its other path (one dense masked
log-sum-exp per line kind, six over the whole ``[B, P]`` matrix, the way it was computed before the
shared exponential and the way it still is when a line's positives sit too far below the top score),
and ``matmul_ms``, the score matrix ``logit_scale · q vᵀ`` alone (forward and backward), the floor
under any implementation; ``over_matmul`` is the loss's time over it. ``peak_rss_mb`` is the
process's peak resident memory while the vectorised loss runs at that size (reset before it with
Linux ``clear_refs``; ``peak_reset`` false where that is refused and the figure is the peak so far),
``extra_rss_mb`` its growth over the resident memory before (the inputs and torch already loaded).

Every time is the calling thread's CPU time (``time.thread_time``), the best of several runs for the
vectorised paths (300 at up to 64 groups: a half-millisecond run's CPU time still varies by half
from run to run on a shared virtual machine, and 30 runs did not always find its floor) and of
three for the loop (it is slow by design): on a shared machine a 50-ms loop
run is preempted far more often than a sub-millisecond one, so wall-clock time would flatter the
ratio. All implementations must agree on the loss and the gradients (float64 check at the smallest
size). Sizes: 32 groups (B = 32, P = 128) for all; 128 and 512 groups without the loop (and,
with ``TRAJLAB_BENCH_FULL=1``, the loop also at 64 groups and the loss at 2048). One thread. Figures
go to ``var/bench/losses.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import json
import math
import os
import platform
import resource
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch

from models.training import losses
from models.training.losses import mask_guided_loss, mask_guided_loss_reference

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
DIM = 256
LOGIT_SCALE = 20.0
P_CROSS_MATCH, P_CROSS_MISMATCH = 0.01, 0.07
LOOP_GROUPS = (32, 64) if FULL else (32,)
FAST_GROUPS = (32, 64, 128, 512, 2048) if FULL else (32, 128, 512)
LOOP_REPEATS = 3
MIN_SPEEDUP = 20.0
SEED = 41


def repeats(n_groups: int) -> int:
    """Timed runs of the vectorised paths at one size (best of them is reported)."""
    return 300 if n_groups <= 64 else 30 if n_groups <= 128 else 5 if n_groups <= 512 else 3


def batch(n_groups: int, dtype=torch.float32, seed: int = SEED) -> tuple[torch.Tensor, ...]:
    """Embeddings and labels of ``n_groups`` groups of four records, as in the module docstring."""
    rng = np.random.default_rng(seed)
    n_rows, n_cols = n_groups, 4 * n_groups
    owner = np.arange(n_cols) // 4                                          # [P] group of each record
    slot = np.arange(n_cols) % 4                                            # [P] position in the group
    own = owner[None, :] == np.arange(n_rows)[:, None]                      # [B, P]
    group = np.where(own, np.where(slot[None, :] < 3, 1, 0), -1)            # [B, P]
    u = rng.random((n_rows, n_cols))
    cross = np.where(u < P_CROSS_MATCH, 1, np.where(u < P_CROSS_MATCH + P_CROSS_MISMATCH, 0, -1))
    relation = np.where(own, group, cross)                                  # [B, P]
    q = rng.normal(size=(n_rows, DIM))
    v = rng.normal(size=(n_cols, DIM))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return (torch.tensor(q, dtype=dtype), torch.tensor(v, dtype=dtype),
            torch.tensor(group), torch.tensor(relation))


def forward_backward(fn, q, v, group, relation) -> tuple[dict, float, tuple[torch.Tensor, ...]]:
    q = q.clone().requires_grad_(True)
    v = v.clone().requires_grad_(True)
    scale = torch.tensor(LOGIT_SCALE, dtype=q.dtype, requires_grad=True)
    start = time.thread_time()
    out = fn(q, v, group, relation, scale)
    out["loss"].backward()
    return out, time.thread_time() - start, (q.grad, v.grad, scale.grad)


def best_time(fn, data, runs: int) -> float:
    return min(forward_backward(fn, *data)[1] for _ in range(runs))


@contextmanager
def masked_lse_path():
    """Within it, ``mask_guided_loss`` takes its masked log-sum-exp path (the shared exponential
    accepts no line)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(losses, "_shared_exp_floor", lambda dtype: math.inf)
        yield


def scores_only(q, v, group, relation, scale) -> dict:
    """The score matrix alone, summed: what every implementation pays for ``scale · q vᵀ``."""
    return {"loss": (scale * q @ v.T).sum()}


def reset_peak_rss() -> tuple[float, bool]:
    """Reset the process's peak RSS to its current RSS (Linux ``clear_refs`` 5) and return the
    current RSS in MB; where that is refused, the peak so far stands and the flag says so."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        reset = True
    except OSError:
        reset = False
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0, reset
    return peak_rss_mb(), False


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0     # Linux: KiB


def test_vectorised_mask_guided_loss_against_loop():
    torch.set_num_threads(1)
    # the three agree (float64, smallest size)
    data64 = batch(LOOP_GROUPS[0], torch.float64)
    slow, _, slow_grads = forward_backward(mask_guided_loss_reference, *data64)
    with masked_lse_path():
        masked = forward_backward(mask_guided_loss, *data64)
    for fast, _, fast_grads in (forward_backward(mask_guided_loss, *data64), masked):
        for key in ("loss", "group", "t2v", "v2t"):
            assert torch.allclose(fast[key], slow[key], rtol=1e-9), key
        for a, b in zip(fast_grads, slow_grads):
            assert torch.allclose(a, b, rtol=1e-7, atol=1e-12)

    rows = []
    for n_groups in FAST_GROUPS:
        data = batch(n_groups)
        out, _, _ = forward_backward(mask_guided_loss, *data)
        rss_mb, peak_reset = reset_peak_rss()
        fast_s = best_time(mask_guided_loss, data, repeats(n_groups))
        peak_mb = peak_rss_mb()
        with masked_lse_path():
            masked_s = best_time(mask_guided_loss, data, repeats(n_groups))
        matmul_s = best_time(scores_only, data, repeats(n_groups))
        loop_s = best_time(mask_guided_loss_reference, data, LOOP_REPEATS) if n_groups in LOOP_GROUPS else None
        unknown = float((data[3] == -1).float().mean())
        rows.append({
            "groups": n_groups, "B": n_groups, "P": 4 * n_groups,
            "unknown_fraction": round(unknown, 4),
            "zero_neg_row_rate": round(out["zero_neg_row_rate"], 4),
            "zero_neg_col_rate": round(out["zero_neg_col_rate"], 4),
            "vectorised_ms": round(1000 * fast_s, 3),
            "masked_lse_ms": round(1000 * masked_s, 3),
            "matmul_ms": round(1000 * matmul_s, 3),
            "over_matmul": round(fast_s / matmul_s, 2),
            "peak_rss_mb": round(peak_mb, 1),
            "extra_rss_mb": round(peak_mb - rss_mb, 1),
            "peak_reset": peak_reset,
            "loop_ms": round(1000 * loop_s, 1) if loop_s is not None else None,
            "speedup": round(loop_s / fast_s, 1) if loop_s is not None else None,
        })

    result = {
        "mode": "full" if FULL else "quick",
        "what": "forward + backward, float32, d=256, one thread, thread CPU time",
        "sizes": rows,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
    }
    out_dir = REPO / "var" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "losses.json").write_text(json.dumps(result, indent=2) + "\n")

    print(f"\nmask-guided loss, forward + backward ({result['mode']} size, float32, d={DIM}, 1 thread)")
    print(f"{'B':>6}{'P':>7}{'⊥ share':>9}{'vectorised ms':>15}{'masked lse ms':>15}{'matmul ms':>11}"
          f"{'× matmul':>10}{'extra MB':>10}{'loop ms':>11}{'speedup':>9}")
    for r in rows:
        loop = f"{r['loop_ms']:>11.1f}{r['speedup']:>8.1f}x" if r["loop_ms"] is not None else f"{'-':>11}{'-':>9}"
        print(f"{r['B']:>6}{r['P']:>7}{r['unknown_fraction']:>9.3f}{r['vectorised_ms']:>15.3f}"
              f"{r['masked_lse_ms']:>15.3f}{r['matmul_ms']:>11.3f}{r['over_matmul']:>10.2f}"
              f"{r['extra_rss_mb']:>10.1f}{loop}")
    for r in rows:
        if r["speedup"] is not None:
            assert r["speedup"] >= MIN_SPEEDUP, f"vectorised loss only {r['speedup']}x faster at B={r['B']}"
