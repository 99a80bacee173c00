"""Tracking accuracy and speed of the default tracker on the rendered demo scenes.

Every demo scene is scored on every run (the coverage requirement is checked in CI); the speed
on vtest.avi uses its first 30 frames, or 150 with ``TRAJLAB_BENCH_FULL=1``.

Figures (CLEAR MOT and identity metrics from ``motmetrics``) are computed on the processed
frames. A person counts on a frame where its visible fraction is at least 0.5; people less visible
than that are "don't care": a track box matching one of them (IoU >= 0.5) and no counted person is
neither a hit nor a false positive. Coverage: the fraction of people that one proposal follows
(IoU >= 0.5) on at least half the frames where they are visible. The table is printed and written
to ``var/bench/tracking.json``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import motmetrics as mm
import numpy as np
import pytest

from models.backends.tracking.base import run_tracker
from models.backends.tracking.hog_bytetrack import HogByteTrackTracker, default_config
from models.demo.coverage import box_iou, people_coverage
from models.demo.renderer import render_scene
from models.demo.scene import demo_scenes
from models.media.video import FrameReader

REPO = Path(__file__).resolve().parents[2]
VTEST = Path(os.environ.get("TRAJLAB_VTEST", REPO.parent / "shared" / "data" / "vtest.avi"))
FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
MIN_COVERAGE = 0.9
IOU = 0.5
MIN_VISIBLE = 0.5
METRICS = ["mota", "motp", "idf1", "num_switches", "precision", "recall", "num_false_positives",
           "num_misses", "num_fragmentations", "mostly_tracked", "num_unique_objects"]


def out_dir() -> Path:
    var = Path(os.environ.get("TRAJLAB_VAR_DIR", REPO / "var"))
    path = var / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


class HeadFrames:
    """The first ``n`` frames of a FrameSource."""

    def __init__(self, source, n: int):
        self.source, self.frame_count = source, min(int(n), int(source.frame_count))
        self.fps, self.width, self.height = source.fps, source.width, source.height

    def read(self, index: int) -> np.ndarray:
        if not 0 <= index < self.frame_count:
            raise IndexError(index)
        return self.source.read(index)

    def iter_frames(self, start=0, stop=None, step=1):
        stop = self.frame_count if stop is None else min(stop, self.frame_count)
        return self.source.iter_frames(start, stop, step)


def mot_accumulator(gt, proposals, frames) -> mm.MOTAccumulator:
    """Accumulate matches frame by frame (IoU >= 0.5, 1 - IoU as the distance)."""
    acc = mm.MOTAccumulator(auto_id=False)
    by_frame: dict[int, list[tuple[int, np.ndarray]]] = {}
    for p in proposals:
        for f, box in zip(p.frames, p.boxes):
            by_frame.setdefault(int(f), []).append((p.track_id, box))
    for f in frames:
        counted = [(p.id, p.boxes[f]) for p in gt.people if p.boxes[f] is not None and p.visible[f] >= MIN_VISIBLE]
        dont_care = [p.boxes[f] for p in gt.people if p.boxes[f] is not None and p.visible[f] < MIN_VISIBLE]
        hyps = by_frame.get(f, [])
        g = np.array([b for _, b in counted], np.float64).reshape(-1, 4)
        h = np.array([b for _, b in hyps], np.float64).reshape(-1, 4)
        if len(h) and dont_care:
            iou_counted = box_iou(h, g).max(axis=1) if len(g) else np.zeros(len(h))
            iou_ignored = box_iou(h, np.array(dont_care, np.float64)).max(axis=1)
            keep = ~((iou_ignored >= IOU) & (iou_counted < IOU))
            hyps = [x for x, k in zip(hyps, keep) if k]
            h = h[keep]
        iou = box_iou(g, h)                                            # [n_gt, n_hyp]
        dist = np.where(iou >= IOU, 1.0 - iou, np.nan)
        acc.update([i for i, _ in counted], [i for i, _ in hyps], dist, frameid=f)
    return acc


def evaluate_scene(spec, tmp_dir: Path) -> tuple[dict, mm.MOTAccumulator]:
    gt = render_scene(spec, tmp_dir / f"{spec.name}.mp4")
    config = default_config()
    with FrameReader(tmp_dir / f"{spec.name}.mp4") as reader:
        start = time.perf_counter()
        proposals = run_tracker(HogByteTrackTracker(config), reader, config.categories)
        seconds = time.perf_counter() - start
    processed = list(range(0, gt.n_frames, config.anchor_stride))
    coverage = people_coverage(gt, [(p.frames, p.boxes) for p in proposals], iou=IOU, min_visible=MIN_VISIBLE)
    row = {
        "frames": gt.n_frames, "size": f"{gt.width}x{gt.height}", "people": len(gt.people),
        "tracks": len(proposals), "coverage": coverage["coverage"], "covered": coverage["covered"],
        "counted": coverage["counted"],
        "per_person": {str(k): round(v, 3) for k, v in coverage["per_person"].items()},
        "seconds_per_frame": seconds / len(processed),
    }
    return row, mot_accumulator(gt, proposals, processed)


def vtest_speed(n_frames: int) -> dict | None:
    if not VTEST.is_file():
        return None
    config = default_config()
    with FrameReader(VTEST) as reader:
        head = HeadFrames(reader, n_frames)
        start = time.perf_counter()
        proposals = run_tracker(HogByteTrackTracker(config), head, config.categories)
        seconds = time.perf_counter() - start
    return {"frames": head.frame_count, "size": f"{head.width}x{head.height}", "tracks": len(proposals),
            "tracks_10_plus": sum(len(p.frames) >= 10 for p in proposals),
            "seconds_per_frame": seconds / len(range(0, head.frame_count, config.anchor_stride))}


@pytest.mark.benchmark
def test_default_tracker_on_demo_scenes(tmp_path_factory):
    tmp_dir = tmp_path_factory.mktemp("bench_tracking")
    scenes = demo_scenes(seed=0)
    rows, accs = {}, []
    for spec in scenes:
        row, acc = evaluate_scene(spec, tmp_dir)
        rows[spec.name] = row
        accs.append(acc)
    summary = mm.metrics.create().compute_many(accs, names=list(rows), metrics=METRICS, generate_overall=True)
    for name in [*list(rows), "OVERALL"]:
        figures = {m: float(summary.loc[name, m]) for m in METRICS}
        if name == "OVERALL":
            covered = sum(r["covered"] for r in rows.values())
            counted = sum(r["counted"] for r in rows.values())
            frames = sum(r["frames"] for r in rows.values())
            rows[name] = {"frames": frames, "covered": covered, "counted": counted,
                          "coverage": covered / counted,
                          "seconds_per_frame": sum(r["seconds_per_frame"] * r["frames"] for r in rows.values()) / frames}
        rows[name].update(figures)
    vtest = vtest_speed(150 if FULL else 30)
    report = {"mode": "full" if FULL else "quick", "config": default_config().to_dict(),
              "iou": IOU, "min_visible": MIN_VISIBLE, "scenes": rows, "vtest": vtest}
    (out_dir() / "tracking.json").write_text(json.dumps(report, indent=2))

    header = f"{'scene':<12} {'frames':>6} {'MOTA':>6} {'IDF1':>6} {'IDs':>4} {'prec':>6} {'rec':>6} {'MT':>3} {'cover':>7} {'s/frame':>8}"
    lines = ["", header, "-" * len(header)]
    for name, r in rows.items():
        lines.append(f"{name:<12} {r['frames']:>6} {r['mota']:>6.3f} {r['idf1']:>6.3f} {int(r['num_switches']):>4} "
                     f"{r['precision']:>6.3f} {r['recall']:>6.3f} {int(r['mostly_tracked']):>3} "
                     f"{r['covered']:>3}/{r['counted']:<3} {r['seconds_per_frame']:>8.3f}")
    if vtest:
        lines.append(f"vtest.avi: {vtest['frames']} frames {vtest['size']}, {vtest['tracks']} tracks "
                     f"({vtest['tracks_10_plus']} with >= 10 observations), {vtest['seconds_per_frame']:.3f} s/frame")
    print("\n".join(lines))

    overall = rows["OVERALL"]
    assert overall["coverage"] >= MIN_COVERAGE, rows
