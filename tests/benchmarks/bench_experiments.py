"""The VTrajEmbed paper's Table 3 as an experiment (DESIGN 4.5) on the rendered benchmark: the
``vtrajembed-table3`` preset (full model, without Slow, without Fast, 16 Fast observations, without
``L_bi``, without ``L_group``) over three seeds, through the experiment service and ordinary
training runs, evaluated on the test split; the table of each variant's difference from the full
model with its paired bootstrap 95 % interval over queries.

Also timed in the same run: a cell whose frozen features are computed (the first) against cells
that reuse the shared feature cache, and the paired bootstrap (vectorised resampling) against the
obvious Python loop over resamples on the table's own per-query values.

Quick size (default, CI): 8 training and 3 test videos at 192x108, 24 frames; a VTrajEmbed of
width 32 with 8 Fast observations (4 in the ``obs16`` variant: half the base's), 30 steps of 8 groups,
two seeds (the spread and the interval over seeds and queries need two).
Full size (``TRAJLAB_BENCH_FULL=1``): the default demo benchmark (24 training videos at 320x180,
40 frames, test split with the three demo scenes) and ``models.demo.benchmark.DEMO_TRAIN_CONFIG``
(the demo budget: 300 steps of 16 groups, width 128, 32 Fast observations, 16 in ``obs16``). One thread. Figures, the table and the
timings go to ``var/bench/experiments.json`` (and the table's CSV next to it); run with ``-s``.
"""
from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from models.demo.benchmark import DEMO_TRAIN_CONFIG, build_demo_benchmark
from models.experiments.grid import encoder_overrides, merge
from models.experiments.table import table_csv
from models.metrics import paired_bootstrap
from tests.workers.factories import register_snapshot
from workers.execute import training_run_execute
from workers.experiments import experiment_create, experiment_refresh
from workers.management.commands.experiment import format_table
from workers.models import EvaluationRun

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
SEEDS = [0, 1, 2] if FULL else [0, 1]
if FULL:
    BENCH = {"videos": {"train": 24, "dev": 0, "test": 6}}
    BASE = copy.deepcopy(DEMO_TRAIN_CONFIG)
else:
    BENCH = {"videos": {"train": 8, "dev": 0, "test": 3}, "include_demo_scenes": False, "width": 192, "height": 108,
             "n_frames": 24}
    BASE = {"steps": 30, "batch_size": 8, "lr": 1e-3, "warmup_steps": 3, "checkpoint_every": 30, "device": "cpu",
            "model": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 32,
                      "geo_hidden": 16, "heads": 2, "agg_heads": 2, "dropout": 0.0, "features": {"n_fast_max": 8}}}

# TRAJLAB_BENCH_ENCODER=mobilenetv2-imagenet (or random-init, handcrafted): every frozen image encoder of
# the grid that kind (models.experiments.grid.encoder_overrides); figures to experiments_<kind>.json
ENCODER = os.environ.get("TRAJLAB_BENCH_ENCODER", "").strip()
if ENCODER:
    BASE = merge(BASE, encoder_overrides("vtrajembed", ENCODER))


def python_loop_bootstrap(a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int = 0) -> tuple[float, float]:
    """The obvious way: one Python-level resample at a time."""
    rng = np.random.default_rng(seed)
    d = list(b - a)
    n = len(d)
    means = []
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        means.append(sum(d[i] for i in idx) / n)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def test_table3_over_seeds(tmp_path, settings):
    torch.set_num_threads(1)
    settings.VAR_DIR = tmp_path / "var"
    root = REPO / "var" / "bench" / ("experiments_full" if FULL else "experiments_quick")   # the rendered videos
    began = time.perf_counter()
    build_demo_benchmark(root, BENCH)
    build_s = time.perf_counter() - began
    train = register_snapshot(root / "snapshots" / "train")
    test = register_snapshot(root / "snapshots" / "test")
    experiment = experiment_create(snapshot=train, eval_snapshot=test, queue=False,
                                   grid={"preset": "vtrajembed-table3", "base": BASE, "seeds": SEEDS})
    cell_s = []
    for run in experiment.runs.order_by("id"):
        tick = time.perf_counter()
        run = training_run_execute(run=run)
        cell_s.append(round(time.perf_counter() - tick, 2))
        assert run.status == "succeeded", (run.variant, run.error)
    experiment = experiment_refresh(experiment_id=experiment.pk)
    assert experiment.status == "succeeded" and experiment.cells_done == 6 * len(SEEDS)
    result = experiment.result

    # the bootstrap, vectorised against the Python loop, on the table's own per-query values
    runs = {(r.variant, r.config["seed"]): r.pk for r in experiment.runs.all()}
    rows = dict(EvaluationRun.objects.filter(training_run_id__in=runs.values()).values_list("training_run_id",
                                                                                            "per_query"))
    a = np.asarray(rows[runs[("full", 0)]]["t2traj"]["AP"])
    b = np.asarray(rows[runs[("without_slow", 0)]]["t2traj"]["AP"])
    tick = time.perf_counter()
    fast = paired_bootstrap(a, b, n_resamples=10000)
    fast_s = time.perf_counter() - tick
    tick = time.perf_counter()
    slow = python_loop_bootstrap(a, b, 10000)
    slow_s = time.perf_counter() - tick

    out = {"mode": "full" if FULL else "quick", "benchmark": {"config": BENCH, "build_s": round(build_s, 1),
                                                             "train": train.counts, "test": test.counts},
           "base_config": BASE, "seeds": SEEDS, "cell_seconds": cell_s,
           "first_cell_s": cell_s[0], "median_later_cell_s": float(np.median(cell_s[1:])),
           "bootstrap": {"n_queries": int(a.size), "n_resamples": 10000, "vectorised_s": round(fast_s, 4),
                         "python_loop_s": round(slow_s, 4), "speedup": round(slow_s / max(fast_s, 1e-9), 1),
                         "vectorised_interval": [fast["low"], fast["high"]], "python_loop_interval": list(slow)},
           "encoder": ENCODER or "default", "slow_retained": result.get("slow_retained"), "table": result}
    folder = REPO / "var" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"experiments_{ENCODER}" if ENCODER else "experiments"
    (folder / f"{stem}.json").write_text(json.dumps(out, indent=2) + "\n")
    (folder / f"{stem}_table.csv").write_text(table_csv(result))

    print(f"\nTable 3 ({out['mode']} size), {len(SEEDS)} seeds, evaluated on the test split "
          f"({test.counts.get('n_queries')} queries); mean ± std over seeds, "
          "(delta from full [95 % paired bootstrap interval])")
    print(format_table(result))
    print(f"cells: first {cell_s[0]:.1f} s (features computed), later median {out['median_later_cell_s']:.1f} s "
          f"(shared feature cache); bootstrap of {a.size} queries × 10000: vectorised {fast_s * 1000:.1f} ms, "
          f"Python loop {slow_s * 1000:.0f} ms")
    for block in result["tables"]:
        for row in block["rows"]:
            if not row["reference"]:
                assert row["low"] <= row["high"] and row["n_seeds"] == len(SEEDS)
    assert slow_s > fast_s
