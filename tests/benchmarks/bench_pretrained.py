"""Pretrained against random crop encoders (DESIGN 4.5) on the rendered benchmark: the
``vtrajembed-encoders``, ``scout-encoders`` and ``actpair-encoders`` presets, each the same trained
heads over three frozen image encoders (the ImageNet MobileNetV2, the same network at random
initialisation as the reference, the handcrafted descriptor) with the packaged MiniLM as the text
tower, over three seeds, through the experiment service and ordinary training runs, evaluated on the
test split with paired bootstrap 95 % intervals over queries.

Quick size (default, CI): 8 training and 3 test videos at 192x108, 24 frames; small heads, 40 steps of
8 groups, 8 Fast observations, one seed, no tower comparison: it shows that every preset runs. Demo size (``TRAJLAB_BENCH_FULL=1``): the default rendered benchmark
(24 training videos at 320x180, 40 frames; the test split with the three demo scenes) with
``models.demo.benchmark.DEMO_TRAIN_CONFIG``'s steps and widths (SCOUT and ActPair at width 128).
One thread. ``TRAJLAB_BENCH_MODELS`` (comma-separated kinds), ``TRAJLAB_BENCH_VARIANTS`` and
``TRAJLAB_BENCH_SEEDS`` run a subset. SCOUT (whose
predictions live in the frozen text space) over the ImageNet crops at 128 x 64 with the packaged
MiniLM (the reference of ``scout-towers``) is also compared with the same text architecture at
random initialisation, with crops at 64 x 32 and with the raw (not unit) crop activations (at the
full size; ``TRAJLAB_BENCH_TEXT=0`` leaves it out there, ``=1`` adds it at the quick size). Tables and timings go to ``var/bench/pretrained.json`` (``pretrained_towers.json`` when
``TRAJLAB_BENCH_MODELS`` is empty);
run with ``-s``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from models.demo.benchmark import DEMO_TRAIN_CONFIG, build_demo_benchmark
from models.experiments.grid import encoder_overrides, merge
from models.experiments.table import table_csv
from tests.workers.factories import register_snapshot
from workers.execute import evaluation_run_execute, training_run_execute
from workers.experiments import experiment_create, experiment_pending, experiment_refresh
from workers.management.commands.experiment import format_table

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
TEXT = os.environ.get("TRAJLAB_BENCH_TEXT", "1" if FULL else "0").strip().lower() not in {"0", "false", "no", "off"}
KINDS = [k.strip() for k in os.environ.get("TRAJLAB_BENCH_MODELS", "vtrajembed,scout,actpair").split(",") if k.strip()]
REPO = Path(__file__).resolve().parents[2]
# three seeds at the full size; one at the quick size (CI), which shows that every preset runs
SEEDS = [int(s) for s in os.environ.get("TRAJLAB_BENCH_SEEDS", "0,1,2" if FULL else "0").split(",")]
VARIANTS = [v.strip() for v in os.environ.get("TRAJLAB_BENCH_VARIANTS", "").split(",") if v.strip()]
if FULL:
    BENCH: dict = {"videos": {"train": 24, "dev": 0, "test": 6}}
    STEPS = {k: v for k, v in DEMO_TRAIN_CONFIG.items() if k != "model"} | {"checkpoint_every": 300}
    MODELS = {"vtrajembed": dict(DEMO_TRAIN_CONFIG["model"]),
              "scout": {"predictor": {"d_model": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 2, "n_prompts": 8,
                                      "batch_size": 16}},
              "actpair": {"model": {"d_model": 128, "d_embed": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 2}}}
else:
    BENCH = {"videos": {"train": 8, "dev": 0, "test": 3}, "include_demo_scenes": False, "width": 192, "height": 108,
             "n_frames": 24}
    STEPS = {"steps": 40, "batch_size": 8, "lr": 1e-3, "warmup_steps": 4, "checkpoint_every": 40, "device": "cpu"}
    MODELS = {"vtrajembed": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1,
                             "embed_dim": 32, "geo_hidden": 16, "heads": 2, "agg_heads": 2, "dropout": 0.0,
                             "features": {"n_fast_max": 8}},
              "scout": {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2, "n_prompts": 4,
                                      "batch_size": 8}, "features": {"n_fast_max": 8}},
              "actpair": {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2},
                          "features": {"n_fast_max": 8}}}


def _grid(kind: str) -> dict:
    if kind == "scout-towers":
        visual = encoder_overrides("scout", "mobilenetv2-imagenet")
        small = {"model": {"appearance": {"mobilenetv2": {"input_height": 64, "input_width": 32}}}}
        return {"model_kind": "scout", "reference": "minilm", "seeds": SEEDS,
                "base": merge({**STEPS, "model": MODELS["scout"]}, visual),
                "variants": {"minilm": {}, "random_text": {"model": {"text": {"kind": "random-init"}}},
                             "crops_64x32": small,
                             "raw_activations": {"model": {"appearance": {"mobilenetv2": {"unit": False}}}}}}
    return {"preset": f"{kind}-encoders", "seeds": SEEDS, "base": {**STEPS, "model": MODELS[kind]},
            **({"variants": VARIANTS} if VARIANTS else {})}


def test_pretrained_against_random_encoders(tmp_path, settings):
    torch.set_num_threads(1)
    settings.VAR_DIR = tmp_path / "var"
    root = REPO / "var" / "bench" / ("pretrained_full" if FULL else "pretrained_quick")
    build_demo_benchmark(root, BENCH)
    train = register_snapshot(root / "snapshots" / "train")
    test = register_snapshot(root / "snapshots" / "test")
    name = "pretrained" if KINDS else "pretrained_towers"
    out = {"mode": "full" if FULL else "quick", "benchmark": BENCH, "seeds": SEEDS, "steps": STEPS, "models": {}}
    folder = REPO / "var" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    for kind in KINDS + (["scout-towers"] if TEXT else []):
        tick = time.perf_counter()
        experiment = experiment_create(snapshot=train, eval_snapshot=test, queue=False, grid=_grid(kind))
        runs, _ = experiment_pending(experiment)
        cell_s: dict[str, list[float]] = {}
        for run in runs:
            began = time.perf_counter()
            done = training_run_execute(run=run)
            assert done.status == "succeeded", (run.variant, done.error)
            cell_s.setdefault(run.variant, []).append(round(time.perf_counter() - began, 1))
        experiment_refresh(experiment_id=experiment.pk)
        for cell in experiment.cells.exclude(evaluation=None).select_related("evaluation"):
            if cell.evaluation.status != "succeeded":
                assert evaluation_run_execute(run=cell.evaluation).status == "succeeded", cell.variant
        experiment = experiment_refresh(experiment_id=experiment.pk)
        assert experiment.status == "succeeded", experiment.status
        result = experiment.result
        recorded = {r.variant: {role: r.config["model"][role] for role in ("fast", "slow", "appearance", "text")
                                if role in r.config["model"]} for r in experiment.runs.all()}
        out["models"][kind] = {"seconds": round(time.perf_counter() - tick, 1), "cell_seconds": cell_s,
                               "encoders": recorded, "table": result}
        (folder / f"{name}.json").write_text(json.dumps(out, indent=2) + "\n")
        (folder / f"pretrained_{kind}.csv").write_text(table_csv(result))
        print(f"\n{kind if kind == 'scout-towers' else kind + '-encoders'} ({out['mode']} size), {len(SEEDS)} seeds, test split "
              f"({test.counts.get('n_queries')} queries): mean ± std over seeds "
              "(delta from the reference [95 % paired bootstrap interval]); "
              f"{out['models'][kind]['seconds']:.0f} s, cells {cell_s}")
        print(format_table(result))
        for block in result["tables"]:
            for row in block["rows"]:
                assert row["n_seeds"] == len(SEEDS)
                if not row["reference"]:
                    assert row["low"] <= row["high"]
