"""VTrajEmbed training on the CPU: training groups per second and step time of the trainer, whose
frozen features are computed once and packed (``model.prepare``), against the obvious way of
computing them inside the loop (each step reads its records' frames, encodes their crops and
context frames and its queries, then packs them), in the same run; and the retrieval figures of
the rendered demo benchmark.

Quick size (default): a demo benchmark of 12 training and 3 test videos at 192x108, 24 frames; a
VTrajEmbed of width 64 with 8 Fast observations; 150 steps of 16 groups at 5e-4, evaluated on the test
split next to the untrained model and the random baseline. The in-loop way runs 5 steps.

Full size (``TRAJLAB_BENCH_FULL=1``): the default demo benchmark (24 training, 4 dev and 6 + 3
test videos at 320x180, 40 frames, plus the three ``demo_scenes`` in the test split) and
``models.demo.benchmark.DEMO_TRAIN_CONFIG`` (300 steps of 16 groups, width 128, 32 Fast
observations). The in-loop way runs 10 steps. The paper's Table 3 ablations over three seeds, with
intervals, are ``bench_experiments.py``.

Step times are medians over the steps after the first three. One thread. Figures and every
config go to ``var/bench/training.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import copy
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from models.demo.benchmark import DEMO_TRAIN_CONFIG, build_demo_benchmark
from models.retrievers.vtrajembed.data import VTrajEmbedData, pack_tracks
from models.training.batching import BatchingConfig, TrainingPlan
from models.training.evaluation import evaluate, random_baseline
from models.training.trainer import StepContext, TrainConfig, build_model, train

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
if FULL:
    BENCH = {}
    TRAIN = copy.deepcopy(DEMO_TRAIN_CONFIG)
    IN_LOOP_STEPS = 10
else:
    BENCH = {"videos": {"train": 12, "dev": 0, "test": 3}, "include_demo_scenes": False, "width": 192, "height": 108,
             "n_frames": 24}
    TRAIN = {"steps": 150, "batch_size": 16, "lr": 5e-4, "warmup_steps": 10, "checkpoint_every": 150, "device": "cpu",
             "model": {"d_model": 64, "d_context": 64, "agg_width": 64, "agg_ff": 128, "agg_layers": 1, "embed_dim": 64,
                       "geo_hidden": 32, "heads": 2, "agg_heads": 2, "dropout": 0.0, "features": {"n_fast_max": 8}}}
    IN_LOOP_STEPS = 5
WARMUP = 3
MIN_SPEEDUP = 2.0


def figures(metrics: dict) -> dict:
    pick = lambda m: {k: round(m[k], 2) for k in ("R@1", "R@3", "mAP")} | {"n_queries": m["n_queries"]}  # noqa: E731
    return {"t2traj": pick(metrics["t2traj"]), "traj2t": pick(metrics["traj2t"]), "ocvr": pick(metrics["ocvr"])}


def in_loop_step_times(snapshot, cfg: dict, steps: int) -> list[float]:
    """The obvious way: every step computes its records' and queries' frozen features itself."""
    torch.manual_seed(0)
    model = build_model("vtrajembed", cfg["model"])
    plan = TrainingPlan(snapshot, BatchingConfig.from_dict(cfg.get("batching")), seed=0)
    variants = plan.variant_observations()
    tracks = {t.id: t for t in snapshot.tracks}
    videos = {v.id: v for v in snapshot.videos}
    queries = {q.id: q for q in snapshot.queries}
    fx = model.feature_extractor(None)                                  # no cache: computed every step
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg["lr"])
    model.train()
    times = []
    for step in range(steps):
        tick = time.perf_counter()
        batch = plan.batch(step, cfg["batch_size"])
        per_video: dict[int, dict] = {}
        for tid, k in set(batch.records):
            obs = variants[(tid, k)] if k else (tracks[tid].frames, tracks[tid].boxes)
            per_video.setdefault(tracks[tid].video_id, {})[(tid, k)] = obs
        feats = {}
        for vid, obs in per_video.items():
            feats.update(fx.video_tracks(videos[vid], obs))
        qids = sorted(set(batch.query_ids))
        text = fx.text_features(qids, [queries[q].text for q in qids])
        data = VTrajEmbedData(**pack_tracks(feats, model.n_max), text=text,
                              query_texts={q: queries[q].text for q in qids},
                              query_video={q: queries[q].video_id for q in qids})
        loss = model.training_loss(data, batch, StepContext(step=step))["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - tick)
    return times


def test_training_throughput_and_demo_figures(tmp_path):
    torch.set_num_threads(1)
    root = REPO / "var" / "bench" / "demo_benchmark"
    began = time.perf_counter()
    snaps = build_demo_benchmark(root, BENCH, save=False)
    build_s = time.perf_counter() - began


    # the trainer: features computed once, packed; steps timed by the trainer itself
    records: list[dict] = []
    began = time.perf_counter()
    result = train(snaps["train"], "vtrajembed", TRAIN, tmp_path / "full", eval_snapshot=snaps["test"],
                   on_step=records.append)
    run_s = time.perf_counter() - began
    step_s = float(np.median([r["seconds"] for r in records[WARMUP:]]))
    groups = TRAIN["batch_size"]
    plan = TrainingPlan(snaps["train"], BatchingConfig.from_dict(TRAIN.get("batching")), seed=0)
    records_per_step = float(np.mean([len(plan.batch(s, groups).records) for s in range(len(records))]))

    # the obvious way, same model, same batches
    loop = in_loop_step_times(snaps["train"], TRAIN, IN_LOOP_STEPS)
    loop_s = float(np.median(loop[min(WARMUP, len(loop) - 1):]))
    speedup = loop_s / step_s

    torch.manual_seed(TrainConfig.from_dict(TRAIN).seed)
    untrained = evaluate(build_model("vtrajembed", TRAIN["model"]), snaps["test"], cache_dir=str(tmp_path / "full" / "feature_cache"))
    runs = {"full model": {"config": TRAIN, **figures(result["metrics"]), "seconds": round(run_s, 1),
                           "last_loss": round(result["last"]["loss"], 4)}}
    runs["untrained"] = {"config": TRAIN["model"], **figures(untrained)}
    chance = random_baseline(snaps["test"])
    runs["random baseline (expected)"] = {"t2traj": {k: round(chance[k], 2) for k in ("R@1", "R@3", "mAP")}}

    out = {
        "mode": "full" if FULL else "quick",
        "benchmark": {s: {k: x.counts()[k] for k in ("n_videos", "n_tracks", "n_queries", "n_relations")}
                      for s, x in snaps.items()},
        "benchmark_build_s": round(build_s, 1),
        "train_config": TRAIN,
        "trainer": {"median_step_s": round(step_s, 4), "groups_per_s": round(groups / step_s, 1),
                    "records_per_s": round(records_per_step / step_s, 1), "steps": len(records)},
        "features_in_loop": {"median_step_s": round(loop_s, 4), "groups_per_s": round(groups / loop_s, 2),
                             "steps": len(loop)},
        "speedup": round(speedup, 1),
        "totals": result["totals"],
        "mean_zero_neg_row_rate": result["mean_zero_neg_row_rate"],
        "mean_zero_neg_col_rate": result["mean_zero_neg_col_rate"],
        "runs": runs,
        "python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
    }
    folder = REPO / "var" / "bench"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "training.json").write_text(json.dumps(out, indent=2) + "\n")

    print(f"\nVTrajEmbed training ({out['mode']} size), {groups} groups per step, one thread")
    print(f"{'way':<38}{'step s':>10}{'groups/s':>12}")
    print(f"{'trainer (features prepared once)':<38}{step_s:>10.3f}{groups / step_s:>12.1f}")
    print(f"{'features computed in the loop':<38}{loop_s:>10.3f}{groups / loop_s:>12.2f}")
    print(f"speedup {speedup:.1f}x")
    print(f"{'T2Traj on test':<34}{'R@1':>8}{'R@3':>8}{'mAP':>8}")
    for name, figs in runs.items():
        t = figs["t2traj"]
        print(f"{name:<34}{t['R@1']:>8.1f}{t['R@3']:>8.1f}{t['mAP']:>8.1f}")

    assert speedup >= MIN_SPEEDUP, f"prepared features only {speedup:.1f}x faster than computing them in the loop"
    trained = runs["full model"]["t2traj"]["R@1"]
    assert trained >= runs["untrained"]["t2traj"]["R@1"] + 20 and trained >= chance["R@1"] + 20
