"""Identity with and without appearance: the CPU trackers' ID switches and IDF1 (``motmetrics``) on
the rendered scenes, with ByteTrack's IoU association alone and with the ImageNet MobileNetV2
appearance term (``{"appearance": "mobilenetv2-imagenet"}``), and what appearance costs on vtest.avi.

Variants (:data:`VARIANTS`): each CPU backend at its defaults and the same with appearance. On the
rendered scenes (the truth is what was drawn) every variant gets CLEAR MOT and identity figures over
every frame, counted as ``bench_tracking.py`` counts them (IoU >= 0.5, people less than half
visible are "don't care"). vtest.avi ships no ground truth, so it gives speed only: video frames
per second end to end in a fresh process (the embedder's loading included), against the CPU
tracker's target of 20. The figures are written into ``var/bench/tracking.json``: an ``identity``
section under ``backends.<variant>`` (a variant ``bench_tracking.py`` did not run gets its own
entry) and a top-level ``identity`` that says what was measured.

Quick size (the test suite): ``hog-bytetrack`` with and without appearance on the ``crossing``
scene and 30 frames of vtest.avi. ``TRAJLAB_BENCH_FULL=1``: every variant, every demo scene, 300
frames of vtest.avi.
"""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import time

import motmetrics as mm
import pytest

from models.backends.tracking import build_tracker, resolve_tracker_settings
from models.backends.tracking.base import run_tracker
from models.backends.tracking.dnn_bytetrack import dnn_model_available
from models.media.video import FrameReader
from models.world.renderer import render_scene
from models.world.scene import demo_scenes
from tests.benchmarks.bench_tracking import (
    FULL,
    TARGET_FPS,
    VTEST,
    HeadFrames,
    mot_accumulator,
    out_dir,
    peak_rss_mb,
)

APPEARANCE = {"appearance": "mobilenetv2-imagenet"}
# name -> (backend, tracker settings over its defaults)
VARIANTS: dict[str, tuple[str, dict]] = {
    "hog-bytetrack": ("hog-bytetrack", {}),
    "hog-bytetrack/appearance": ("hog-bytetrack", APPEARANCE),
    "dnn-bytetrack": ("dnn-bytetrack", {}),
    "dnn-bytetrack/appearance": ("dnn-bytetrack", APPEARANCE),
}
QUICK = ("hog-bytetrack", "hog-bytetrack/appearance")
QUICK_SCENES = ("crossing",)
METRICS = ["idf1", "idp", "idr", "num_switches", "mota", "num_fragmentations", "num_unique_objects"]


def make_tracker(name: str):
    backend, settings = VARIANTS[name]
    return build_tracker(backend, resolve_tracker_settings(backend, categories=["person"], tracker_settings=settings))


def identity_on_rendered(name: str, videos: dict) -> dict:
    """Identity figures of one variant over the rendered scenes: overall and per scene."""
    accs, seconds = [], 0.0
    for path, gt in videos.values():
        with FrameReader(path) as reader:
            start = time.perf_counter()
            proposals = run_tracker(make_tracker(name), reader, ["person"])
            seconds += time.perf_counter() - start
        accs.append(mot_accumulator(gt, proposals, range(gt.n_frames)))
    summary = mm.metrics.create().compute_many(accs, names=list(videos), metrics=METRICS, generate_overall=True)
    figures = {row: {m: float(summary.loc[row, m]) for m in METRICS} for row in [*videos, "OVERALL"]}
    frames = sum(gt.n_frames for _, gt in videos.values())
    return {**figures.pop("OVERALL"), "seconds_per_frame": seconds / frames, "scenes": figures}


def vtest_speed(name: str, path: str, n_frames: int) -> dict:
    """One variant end to end on the first ``n_frames`` of ``path`` (run in a fresh process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    tracker = make_tracker(name)
    with FrameReader(path, cache_frames=0) as reader:
        head = HeadFrames(reader, n_frames)
        proposals = run_tracker(tracker, head, ["person"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"vtest_frames": head.frame_count, "fps": head.frame_count / wall, "cpu_fps": head.frame_count / cpu,
            "peak_rss_mb": peak_rss_mb(), "track_count": len(proposals)}


def timed_on_vtest(name: str, n_frames: int) -> dict:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(vtest_speed, name, str(VTEST), n_frames).result()


@pytest.mark.benchmark
def test_identity_with_and_without_appearance(tmp_path_factory):
    tmp_dir = tmp_path_factory.mktemp("bench_identity")
    videos = {}
    for spec in demo_scenes(seed=0):
        if FULL or spec.name in QUICK_SCENES:
            path = tmp_dir / f"{spec.name}.mp4"
            videos[spec.name] = (path, render_scene(spec, path))
    names = [n for n in VARIANTS if (FULL or n in QUICK) and (VARIANTS[n][0] != "dnn-bytetrack" or dnn_model_available())]
    identity = {name: identity_on_rendered(name, videos) for name in names}
    n_vtest = 300 if FULL else 30
    speed = {name: timed_on_vtest(name, n_vtest) for name in names} if VTEST.is_file() else {}
    for figures in speed.values():
        figures["meets_fps_target"] = bool(figures["fps"] >= TARGET_FPS)

    report_path = out_dir() / "tracking.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    backends = report.setdefault("backends", {})
    for name in names:
        entry = backends.setdefault(name, {"backend": VARIANTS[name][0], "settings": VARIANTS[name][1]})
        entry["identity"] = {"rendered": identity[name], **({"vtest": speed[name]} if name in speed else {})}
    report["identity"] = {
        "mode": "full" if FULL else "quick", "variants": {n: VARIANTS[n][1] for n in names},
        "rendered_scenes": list(videos), "target_fps": TARGET_FPS,
        "vtest": (f"{VTEST.name}, first {n_vtest} frames: speed only (no ground truth ships with it)"
                  if VTEST.is_file() else None)}
    report_path.write_text(json.dumps(report, indent=2))

    header = f"{'variant':<28} {'IDF1':>6} {'IDP':>6} {'IDR':>6} {'IDsw':>5} {'MOTA':>6} | {'vtest fps':>9} {'cpu fps':>7}"
    lines = ["", header, "-" * len(header)]
    for name in names:
        r, s = identity[name], speed.get(name, {})
        lines.append(f"{name:<28} {r['idf1']:>6.3f} {r['idp']:>6.3f} {r['idr']:>6.3f} {r['num_switches']:>5.0f} "
                     f"{r['mota']:>6.3f} | {s.get('fps', float('nan')):>9.1f} {s.get('cpu_fps', float('nan')):>7.1f}")
    print("\n".join(lines))
    assert all(identity[name]["idf1"] > 0 for name in names), identity  # every variant follows someone
    assert set(json.loads(report_path.read_text())["identity"]["variants"]) == set(names)
