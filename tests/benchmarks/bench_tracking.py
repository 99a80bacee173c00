"""Tracking accuracy and speed of the CPU trackers, on the rendered demo scenes and on vtest.avi.

Settings (:data:`SETTINGS`, the keys of ``backends`` in the report): each backend at its default
(``hog-bytetrack``: HOG on every 2nd frame (the anchors) around movement and its last boxes, the
whole frame every 16th anchor, Kalman boxes between; ``dnn-bytetrack``: SSD-MobileNet-v2 on every
2nd frame); HOG on every anchor's whole frame (``hog-bytetrack/whole-frame``, the default before
motion regions); each detector on every frame, whole, its boxes matched as they are
(``.../every-frame``: ``anchor_stride`` 1, ``match_buffer`` 0; the slow obvious way); and the DNN's
fast setting (``dnn-bytetrack/stride-4``). Every setting run gets ``coverage`` (rendered scenes)
and ``fps`` (vtest.avi) and ``meets_target`` (``fps`` >= 20 and ``coverage`` >= 0.9: issue 31's
row for the CPU tracker). The quick size (CI) runs :data:`QUICK` only (the default, whose coverage
requirement is checked on every run, the DNN's fast setting and the every-frame DNN that vtest
coverage is measured against, on vtest.avi's first 30 frames and, but for that reference, on
every demo scene); ``TRAJLAB_BENCH_FULL=1`` runs every setting on every scene and 300 frames of
vtest.avi (the fast settings also with OpenCV on one thread).

Rendered scenes: figures (CLEAR MOT and identity metrics from ``motmetrics``) over every frame. A
person counts on a frame where its visible fraction is at least 0.5; people less visible than that
are "don't care": a track box matching one of them (IoU >= 0.5) and no counted person is neither a
hit nor a false positive. Coverage: the fraction of people that one proposal follows (IoU >= 0.5)
on at least half the frames where they are visible.

vtest.avi (no ground truth): ``fps`` is video frames per second end to end (the tracker built, the
video opened and decoded, every frame's boxes out), measured in a fresh process that reports its
peak RSS; ``cpu_fps`` divides by the process's CPU time instead (less sensitive to other work on a
shared machine). ``vtest_coverage``: the fraction of the tracks found by the DNN tracker run on
every frame (those with at least 10 observations, 1 s of vtest.avi) that one track of the setting
follows (IoU >= 0.5) on at least half of their frames. The table is printed and written to
``var/bench/tracking.json``.
"""
from __future__ import annotations

import concurrent.futures
import json
import multiprocessing
import os
import resource
import time
from pathlib import Path

import cv2
import motmetrics as mm
import numpy as np
import pytest

from models.backends.tracking import build_tracker, resolve_tracker_settings
from models.backends.tracking.base import run_tracker
from models.backends.tracking.dnn_bytetrack import dnn_model_available
from models.backends.tracking.hog_bytetrack import default_config
from models.demo.coverage import box_iou, people_coverage
from models.media.video import FrameReader
from models.world.renderer import render_scene
from models.world.scene import demo_scenes

REPO = Path(__file__).resolve().parents[2]
VTEST = Path(os.environ.get("TRAJLAB_VTEST", REPO.parent / "shared" / "data" / "vtest.avi"))
FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
MIN_COVERAGE = 0.9
IOU = 0.5
MIN_VISIBLE = 0.5
REFERENCE_MIN_LENGTH = 10
METRICS = ["mota", "motp", "idf1", "num_switches", "precision", "recall", "num_false_positives",
           "num_misses", "num_fragmentations", "mostly_tracked", "num_unique_objects"]
EVERY_FRAME = {"anchor_stride": 1, "match_buffer": 0.0}
WHOLE_FRAME = {"detectors": {"person": {"regions": "frame"}}}
# name -> (backend, tracker settings over the backend's defaults)
SETTINGS: dict[str, tuple[str, dict]] = {
    "hog-bytetrack": ("hog-bytetrack", {}),
    "hog-bytetrack/whole-frame": ("hog-bytetrack", WHOLE_FRAME),
    "hog-bytetrack/every-frame": ("hog-bytetrack", {**EVERY_FRAME, **WHOLE_FRAME}),
    "dnn-bytetrack": ("dnn-bytetrack", {}),
    "dnn-bytetrack/every-frame": ("dnn-bytetrack", EVERY_FRAME),
    "dnn-bytetrack/stride-4": ("dnn-bytetrack", {"anchor_stride": 4}),
}
REFERENCE = "dnn-bytetrack/every-frame"
QUICK = ("hog-bytetrack", "dnn-bytetrack/stride-4", REFERENCE)
# Issue 31's row for the CPU tracker: video frames per second on vtest.avi, rendered coverage.
TARGET_FPS, TARGET_COVERAGE = 20.0, 0.9
ONE_THREAD = ("hog-bytetrack", "dnn-bytetrack/stride-4")


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


def make_tracker(name: str):
    """The tracker of a named setting (:data:`SETTINGS`)."""
    backend, settings = SETTINGS[name]
    return build_tracker(backend, resolve_tracker_settings(backend, categories=["person"], tracker_settings=settings))


def available(name: str) -> bool:
    return SETTINGS[name][0] != "dnn-bytetrack" or dnn_model_available()


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


def track_coverage(reference: list[tuple[np.ndarray, np.ndarray]], tracks: list[tuple[np.ndarray, np.ndarray]],
                   *, iou: float = IOU, min_fraction: float = 0.5, min_length: int = 1) -> dict:
    """How many reference tracks one track follows on at least ``min_fraction`` of their frames.

    Both are ``(frames [N], boxes [N, 4])`` pairs; a reference frame is followed where the track has
    a box with IoU >= ``iou`` against the reference box. Reference tracks with fewer than
    ``min_length`` observations are not counted. Returns ``{"covered", "counted", "coverage"}``.
    """
    index = [{int(f): np.asarray(b, np.float64) for f, b in zip(frames, boxes)} for frames, boxes in tracks]
    covered = counted = 0
    for frames, boxes in reference:
        if len(frames) < min_length:
            continue
        counted += 1
        best = 0
        for obs in index:
            hits = sum(1 for f, b in zip(frames, boxes)
                       if int(f) in obs and box_iou(obs[int(f)], b)[0, 0] >= iou)
            best = max(best, hits)
        covered += best >= min_fraction * len(frames)
    return {"covered": covered, "counted": counted, "coverage": covered / counted if counted else float("nan")}


def time_on_vtest(name: str, n_frames: int, threads: int | None = None) -> dict:
    """Run one setting on vtest.avi's first ``n_frames`` frames (in a fresh process: see
    :func:`vtest_run`), returning its figures and tracks."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(vtest_run, name, str(VTEST), n_frames, threads).result()


def vtest_run(name: str, path: str, n_frames: int, threads: int | None) -> dict:
    """One setting end to end on the first ``n_frames`` frames of ``path``: wall and CPU time,
    peak RSS of this process, the tracks as plain arrays."""
    if threads is not None:
        cv2.setNumThreads(int(threads))
    wall, cpu = time.perf_counter(), time.process_time()
    tracker = make_tracker(name)
    with FrameReader(path, cache_frames=0) as reader:
        head = HeadFrames(reader, n_frames)
        proposals = run_tracker(tracker, head, ["person"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"frames": head.frame_count, "size": f"{head.width}x{head.height}", "seconds": wall,
            "fps": head.frame_count / wall, "cpu_fps": head.frame_count / cpu,
            "seconds_per_frame": wall / head.frame_count, "opencv_threads": cv2.getNumThreads(),
            "peak_rss_mb": peak_rss_mb(),
            "tracks": [(p.frames, p.boxes) for p in proposals]}


def peak_rss_mb() -> float:
    """This process's peak resident set since it started (VmHWM; ``ru_maxrss`` would count the
    parent's memory at the fork that started it)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rendered_figures(name: str, videos: dict) -> tuple[dict, dict]:
    """Coverage and MOT figures of one setting over the rendered scenes: (overall, per scene)."""
    rows, accs = {}, []
    for scene, (path, gt) in videos.items():
        with FrameReader(path) as reader:
            start = time.perf_counter()
            proposals = run_tracker(make_tracker(name), reader, ["person"])
            seconds = time.perf_counter() - start
        coverage = people_coverage(gt, [(p.frames, p.boxes) for p in proposals], iou=IOU, min_visible=MIN_VISIBLE)
        rows[scene] = {"frames": gt.n_frames, "size": f"{gt.width}x{gt.height}", "people": len(gt.people),
                       "tracks": len(proposals), "coverage": coverage["coverage"], "covered": coverage["covered"],
                       "counted": coverage["counted"],
                       "per_person": {str(k): round(v, 3) for k, v in coverage["per_person"].items()},
                       "seconds_per_frame": seconds / gt.n_frames}
        accs.append(mot_accumulator(gt, proposals, range(gt.n_frames)))
    summary = mm.metrics.create().compute_many(accs, names=list(rows), metrics=METRICS, generate_overall=True)
    for scene in rows:
        rows[scene].update({m: float(summary.loc[scene, m]) for m in METRICS})
    frames = sum(r["frames"] for r in rows.values())
    covered, counted = sum(r["covered"] for r in rows.values()), sum(r["counted"] for r in rows.values())
    overall = {"frames": frames, "covered": covered, "counted": counted, "coverage": covered / counted,
               "seconds_per_frame": sum(r["seconds_per_frame"] * r["frames"] for r in rows.values()) / frames,
               **{m: float(summary.loc["OVERALL", m]) for m in METRICS}}
    return overall, rows


@pytest.mark.benchmark
def test_cpu_trackers_on_demo_scenes_and_vtest(tmp_path_factory):
    tmp_dir = tmp_path_factory.mktemp("bench_tracking")
    videos = {}
    for spec in demo_scenes(seed=0):
        path = tmp_dir / f"{spec.name}.mp4"
        videos[spec.name] = (path, render_scene(spec, path))
    names = [n for n in SETTINGS if available(n) and (FULL or n in QUICK)]
    backends: dict[str, dict] = {n: {"backend": SETTINGS[n][0], "settings": SETTINGS[n][1]} for n in names}
    scenes = {}
    for name in names if FULL else [n for n in names if n != REFERENCE]:
        overall, rows = rendered_figures(name, videos)
        backends[name]["rendered"] = overall
        backends[name]["coverage"] = overall["coverage"]
        if name == "hog-bytetrack":
            scenes = {**rows, "OVERALL": overall}

    n_vtest = 300 if FULL else 30
    load_before = os.getloadavg()
    if VTEST.is_file():
        runs = {n: time_on_vtest(n, n_vtest) for n in names}
        for name in ONE_THREAD if FULL else ():
            if name in names:
                runs[f"{name}/1-thread"] = time_on_vtest(name, n_vtest, threads=1)
                backends[f"{name}/1-thread"] = {**backends[name], "opencv_threads": 1}
        reference = runs.get(REFERENCE, {}).get("tracks")
        for name, figures in runs.items():
            tracks = figures.pop("tracks")
            figures["track_count"] = len(tracks)
            if reference is not None:
                figures["vtest_coverage"] = track_coverage(reference, tracks, min_length=REFERENCE_MIN_LENGTH)["coverage"]
                figures["vtest_coverage_all_tracks"] = track_coverage(reference, tracks)["coverage"]
            backends[name].update({k: v for k, v in figures.items() if k not in ("frames", "size")})
            backends[name]["vtest_frames"] = figures["frames"]
    for b in backends.values():
        if "fps" in b and "coverage" in b:
            b["meets_target"] = bool(b["fps"] >= TARGET_FPS and b["coverage"] >= TARGET_COVERAGE)
    report = {"mode": "full" if FULL else "quick", "config": default_config().to_dict(),
              "iou": IOU, "min_visible": MIN_VISIBLE, "reference": REFERENCE,
              "reference_min_length": REFERENCE_MIN_LENGTH,
              "target": {"fps": TARGET_FPS, "coverage": TARGET_COVERAGE},
              "machine": {"cpus": os.cpu_count(), "load_average_before_vtest": list(load_before)},
              "backends": backends, "scenes": scenes,
              "vtest": {"path": VTEST.name, "frames": n_vtest} if VTEST.is_file() else None}
    (out_dir() / "tracking.json").write_text(json.dumps(report, indent=2))

    header = (f"{'setting':<32} {'cover':>7} {'MOTA':>6} {'IDF1':>6} {'IDsw':>4} | {'vtest fps':>9} {'cpu fps':>7} "
              f"{'vs dnn':>6} {'peak RSS':>8}")
    lines = ["", header, "-" * len(header)]
    for name, b in backends.items():
        r = b.get("rendered")
        line = f"{name:<32} " + (f"{r['covered']:>3}/{r['counted']:<3} {r['mota']:>6.3f} {r['idf1']:>6.3f} "
                                 f"{r['num_switches']:>4.0f} | " if r else f"{'':>7} {'':>6} {'':>6} {'':>4} | ")
        if "fps" in b:
            line += (f"{b['fps']:>9.1f} {b['cpu_fps']:>7.1f} {b.get('vtest_coverage', float('nan')):>6.3f} "
                     f"{b['peak_rss_mb']:>6.0f}MB")
        lines.append(line)
    print("\n".join(lines))

    assert scenes["OVERALL"]["coverage"] >= MIN_COVERAGE, scenes
