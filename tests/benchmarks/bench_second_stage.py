"""The papers' second-stage comparisons as experiments (DESIGN 4.5) on the rendered benchmark, over
three seeds, evaluated on the test split with paired bootstrap 95 % intervals over queries:

- ``actpair-views`` (ActPair Table 3): the original query, its template rewrite (the query text and
  the canonical action and scene vocabularies only), and dual-view fusion, on the same weights;
- ``actpair-rerank`` (ActPair Table 5): the dual-view top-10 without reranking, with one absolute
  score per candidate (the pointwise twin of the pairwise head, the reference) and with the trained
  Bradley–Terry pairwise head under pivot-promote (Algorithm 1), with the requests each makes per
  query;
- ``scout-batch-sweep`` (SCOUT §5): the per-forward batch B = 32, 64 and 128 (the default), with
  in-batch negatives only;
- ``scout-rerank`` (SCOUT §6.2, §7.1-7.2): the SCOUT model alone, CombSUM with a second fusion
  member (a VTrajEmbed run trained here on the same snapshot, with the members' per-query
  Spearman decorrelation) and RRF over the same two (k = 60, the rank-only control), then the
  fused top-20 + the VLM term, + ScoutITM trained on identity-hard and mined negatives, and the
  full blend.

The embedded backends do the work (the template rewriter, the heuristic pixel scorer). Also timed
in the same run: the pairwise reranker against the pointwise one per query (requests and
seconds), and the comparator calls pivot-promote makes against the M(M-1)/2 of comparing every
pair.

Quick size (default, CI): 6 training and 3 test videos at 192x108, 24 frames; small models, 20
steps, two seeds (enough for the spread over seeds and the interval over seeds and queries). Full size (``TRAJLAB_BENCH_FULL=1``): 24 training and 6 test videos at 320x180, 40 frames
(plus the three demo scenes), 300 steps of 16 groups. One thread. Tables and figures go to
``var/bench/second_stage.json``; run with ``-s``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from models.demo.benchmark import DEMO_TRAIN_CONFIG, build_demo_benchmark
from models.experiments.grid import encoder_overrides, merge
from tests.workers.factories import register_snapshot
from workers.execute import evaluation_run_execute, training_run_execute
from workers.experiments import experiment_create, experiment_pending, experiment_refresh
from workers.management.commands.experiment import format_table
from workers.training import training_run_create

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
SEEDS = [0, 1, 2] if FULL else [0, 1]
if FULL:
    BENCH = {"videos": {"train": 24, "dev": 0, "test": 6}}
    STEPS = {"steps": 300, "batch_size": 16, "lr": 1e-3, "warmup_steps": 20, "checkpoint_every": 300, "device": "cpu"}
    ACTPAIR = {"model": {"d_model": 128, "d_embed": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 2}}
    SCOUT = {"predictor": {"d_model": 128, "n_layers": 2, "n_heads": 4, "ff_mult": 2, "n_prompts": 8,
                           "batch_size": 16},
             "itm": {"enabled": True, "steps": 200, "batch_size": 64, "n_negatives": 8}}
else:
    BENCH = {"videos": {"train": 6, "dev": 0, "test": 3}, "include_demo_scenes": False, "width": 192, "height": 108,
             "n_frames": 24}
    STEPS = {"steps": 20, "batch_size": 8, "lr": 1e-3, "warmup_steps": 2, "checkpoint_every": 20, "device": "cpu"}
    ACTPAIR = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2},
               "features": {"n_fast_max": 8}}
    SCOUT = {"predictor": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2, "n_prompts": 4, "batch_size": 8},
             "features": {"n_fast_max": 8},
             "itm": {"enabled": True, "steps": 20, "batch_size": 16, "n_negatives": 4,
                     "model": {"d_model": 32, "n_layers": 1, "n_heads": 2, "ff_mult": 2}}}
# SCOUT's B sweep (the preset sets the predictor's batch; in-batch negatives only, no ITM)
SWEEP = {"predictor": {k: v for k, v in SCOUT["predictor"].items() if k != "batch_size"},
         **({"features": SCOUT["features"]} if "features" in SCOUT else {})}
PRESETS = {"actpair-views": ACTPAIR, "actpair-rerank": ACTPAIR, "scout-rerank": SCOUT, "scout-batch-sweep": SWEEP}
# SCOUT's second fusion member: a VTrajEmbed run on the same snapshot
MEMBER = dict(DEMO_TRAIN_CONFIG) if FULL else {
    **STEPS, "model": {"d_model": 32, "d_context": 32, "agg_width": 32, "agg_ff": 64, "agg_layers": 1, "embed_dim": 32,
                       "geo_hidden": 16, "heads": 2, "agg_heads": 2, "features": {"n_fast_max": 8}}}

# TRAJLAB_BENCH_ENCODER=mobilenetv2-imagenet (or random-init, handcrafted): every frozen image encoder of
# every preset and of the fusion member that kind (models.experiments.grid.encoder_overrides); figures to
# second_stage_<kind>.json. TRAJLAB_BENCH_PRESETS=actpair-rerank,scout-rerank runs only those presets.
ENCODER = os.environ.get("TRAJLAB_BENCH_ENCODER", "").strip()
if ENCODER:
    PRESETS = {name: merge(model, encoder_overrides("actpair" if name.startswith("actpair") else "scout",
                                                    ENCODER)["model"]) for name, model in PRESETS.items()}
    MEMBER = merge(MEMBER, encoder_overrides("vtrajembed", ENCODER))
CHOSEN = [p.strip() for p in os.environ.get("TRAJLAB_BENCH_PRESETS", "").split(",") if p.strip()]
if CHOSEN:
    assert set(CHOSEN) <= set(PRESETS), f"TRAJLAB_BENCH_PRESETS: known presets are {', '.join(PRESETS)}"
    PRESETS = {name: PRESETS[name] for name in CHOSEN}


def _run(experiment) -> dict:
    """Train, then evaluate every pipeline, one at a time; seconds of each evaluation by variant."""
    runs, _ = experiment_pending(experiment)
    for run in runs:
        assert training_run_execute(run=run).status == "succeeded", (run.variant, run.error)
    experiment_refresh(experiment_id=experiment.pk)
    seconds: dict[str, list[float]] = {}
    for cell in experiment.cells.exclude(evaluation=None).select_related("evaluation"):
        if cell.evaluation.status == "succeeded":
            continue
        tick = time.perf_counter()
        done = evaluation_run_execute(run=cell.evaluation)
        assert done.status == "succeeded", (cell.variant, done.error)
        seconds.setdefault(cell.variant, []).append(time.perf_counter() - tick)
    return seconds


def test_second_stage_presets_over_seeds(tmp_path, settings):
    torch.set_num_threads(1)
    settings.VAR_DIR = tmp_path / "var"
    root = REPO / "var" / "bench" / ("second_stage_full" if FULL else "second_stage_quick")
    build_demo_benchmark(root, BENCH)
    train = register_snapshot(root / "snapshots" / "train")
    test = register_snapshot(root / "snapshots" / "test")
    out = {"mode": "full" if FULL else "quick", "benchmark": BENCH, "seeds": SEEDS, "steps": STEPS, "presets": {}}
    extra = {}
    if "scout-rerank" in PRESETS:
        member = training_run_create(snapshot=train, eval_snapshot=test, model_kind="vtrajembed", config=MEMBER,
                                     queue=False)
        assert training_run_execute(run=member).status == "succeeded"
        extra = {"scout-rerank": {"fuse_runs": [member.pk]}}
    out["encoder"] = ENCODER or "default"
    for preset, model in PRESETS.items():
        tick = time.perf_counter()
        steps = {k: v for k, v in STEPS.items() if k != "batch_size"} if preset == "scout-batch-sweep" else STEPS
        experiment = experiment_create(snapshot=train, eval_snapshot=test, queue=False,
                                       grid={"preset": preset, "seeds": SEEDS, "base": {**steps, "model": model},
                                             **extra.get(preset, {})})
        if preset == "scout-batch-sweep":                  # each variant trains at its own B
            batches = {r.variant: r for r in experiment.runs.all()}
        seconds = _run(experiment)
        experiment = experiment_refresh(experiment_id=experiment.pk)
        assert experiment.status == "succeeded", experiment.status
        if preset == "scout-batch-sweep":
            for variant, run in batches.items():
                run.refresh_from_db()
                assert run.result["model_defaults"].get("batch_size") == int(variant[1:]), run.result["model_defaults"]
        result = experiment.result
        out["presets"][preset] = {"seconds": round(time.perf_counter() - tick, 1), "trainings": experiment.runs.count(),
                                  "evaluation_seconds": {v: round(float(np.mean(s)), 2) for v, s in seconds.items()},
                                  "requests": result["requests"], "table": result}
        print(f"\n{preset} ({out['mode']} size), {len(SEEDS)} seeds, {experiment.runs.count()} trainings, test split "
              f"({test.counts.get('n_queries')} queries): mean ± std over seeds "
              "(delta from the reference [95 % paired bootstrap interval])")
        print(format_table(result))
        for cell in experiment.cells.filter(variant="combsum").select_related("evaluation"):
            for pair, rho in cell.evaluation.metrics["pipeline"].get("decorrelation", {}).items():
                print(f"  decorrelation {pair} (seed {cell.seed}): per-query Spearman mean {rho['mean']:.3f}, "
                      f"median {rho['median']:.3f} over {rho['n_queries']} queries")
                out["presets"][preset].setdefault("decorrelation", {})[f"{pair} seed {cell.seed}"] = rho
        for variant, counts in result["requests"].items():
            per = {k: round(v["per_query_mean"], 2) for k, v in counts.items() if k != "n_seeds"}
            print(f"  requests per query, {variant}: {per}; evaluation {out['presets'][preset]['evaluation_seconds'].get(variant, 0):.1f} s")
        for block in result["tables"]:
            for row in block["rows"]:
                assert row["n_seeds"] == len(SEEDS)
                if not row["reference"]:
                    assert row["low"] <= row["high"]
    if "actpair-rerank" in out["presets"]:
        rerank = out["presets"]["actpair-rerank"]["requests"]
        m = 10
        pairwise = rerank["pairwise"]["comparator_requests"]
        pointwise = rerank["pointwise"]["model_requests"]["per_query_mean"]
        out["pivot_promote"] = {"comparisons_per_query": pairwise["per_query_mean"], "all_pairs": m * (m - 1) // 2,
                                "pointwise_requests_per_query": pointwise}
        print(f"pivot-promote: {pairwise['per_query_mean']:.2f} comparisons per query (max "
              f"{pairwise['per_query_max']}) against {m * (m - 1) // 2} for every pair of the top-{m}; pointwise: "
              f"{pointwise:.2f} requests per query")
        assert pairwise["per_query_max"] <= m * (m - 1) // 2
    folder = REPO / "var" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"second_stage_{ENCODER}.json" if ENCODER else "second_stage.json"
    (folder / name).write_text(json.dumps(out, indent=2) + "\n")
