"""Crop strips on a real video: made on request (each crop a seek, a decode, a crop and an encode,
the path a reviewer's screen took before) against made once when the run is stored and read from
their files (``trajectories.services.crops``), in the same run, byte for byte the same crops.

The video is ``../shared/data/vtest.avi`` (768×576 pedestrians, MPEG-4 Part 2 in AVI): its seeks
decode from the previous keyframe, which is what made crops cost seconds under load. The run's
trajectories are synthetic boxes spread over the whole video (the crops' cost does not depend on
what is in the box). Each crop of every trajectory's 12-crop strip is asked for once, as the
player's strip does, in a fresh process state (frame and JPEG caches emptied between the two paths).

Quick size: 6 trajectories; full size (``TRAJLAB_BENCH_FULL=1``): 40. Figures go to
``var/bench/crops.json``: per path ``p50_ms``, ``p95_ms``, ``total_s`` per crop request, and the
background cost of making the strips; with ``peak_rss_mb`` of the process.
"""
from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import numpy as np
import pytest
from django.conf import settings

from models.backends.tracking.base import TrackProposal
from tests.trajectories.factories import run_factory
from trajectories import selectors
from trajectories.models import Trajectory
from trajectories.services import crops
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import trajectories_store
from trajectories.services.splits import splits_assign

pytestmark = [pytest.mark.benchmark, pytest.mark.django_db]

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
N_TRAJECTORIES = 40 if FULL else 6
VTEST = Path(settings.BASE_DIR).parent / "shared" / "data" / "vtest.avi"
OUT = Path(settings.BASE_DIR) / "var" / "bench" / "crops.json"


def _proposals(n_frames: int, width: int, height: int, n: int) -> list[TrackProposal]:
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        length = int(rng.integers(60, 240))
        start = int(rng.integers(0, n_frames - length))
        frames = np.arange(start, start + length)
        x0, y0 = rng.uniform(0, width - 120), rng.uniform(0, height - 240)
        xs = np.clip(x0 + np.linspace(0, rng.uniform(-200, 200), length), 0, width - 60)
        boxes = np.stack([xs, np.full(length, y0), xs + 60, np.full(length, y0 + 150)], axis=1)
        out.append(TrackProposal(track_id=k + 1, category="person", frames=frames, boxes=boxes,
                                 scores=np.full(length, 0.9)))
    return out


def _fresh_process_state() -> None:
    """As a web process that has not served these frames: its decoders and JPEG cache empty."""
    selectors._readers.clear()
    selectors._encoded.clear()


def _serve_strips(trajectories: list[Trajectory]) -> tuple[list[float], list[bytes]]:
    """Every 12-crop strip asked for, one crop request at a time: (seconds each, the bytes)."""
    seconds, images = [], []
    for t in trajectories:
        for index in crops.strip_frames(t, 12):
            began = time.perf_counter()
            images.append(selectors.trajectory_crop_jpeg(trajectory=t, index=index, max_size=160))
            seconds.append(time.perf_counter() - began)
    return seconds, images


def _stats(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1000
    return {"requests": int(ms.size), "p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p95_ms": round(float(np.percentile(ms, 95)), 2), "max_ms": round(float(ms.max()), 2),
            "total_s": round(float(ms.sum() / 1000), 3)}


@pytest.mark.skipif(not VTEST.is_file(), reason="../shared/data/vtest.avi is not here")
def test_stored_crop_strips_against_crops_made_on_request(media_root, settings, capsys):
    settings.TRAJLAB_IMPORT_ROOTS = [str(VTEST.parent)]
    video = video_import(path=VTEST, source="vtest").video
    splits_assign(seed=0, ratios={"train": 1})
    run = run_factory(video=video)
    trajectories_store(run=run, proposals=_proposals(video.frame_count, video.width, video.height, N_TRAJECTORIES))
    trajectories = list(Trajectory.objects.filter(run=run).select_related("video").order_by("pk"))

    # the slow obvious way: each crop made when a screen asks for it (nothing stored yet)
    _fresh_process_state()
    on_request, made = _serve_strips(trajectories)
    for path in (Path(settings.MEDIA_ROOT) / "crops").rglob("*.jpg"):
        path.unlink()                                    # what the requests kept: made again below

    began = time.perf_counter()
    counts = crops.crop_strips_store(run=run)            # the background job of a stored run
    strips_s = time.perf_counter() - began
    _fresh_process_state()
    from_files, read = _serve_strips(trajectories)
    assert read == made                                  # the same crops, byte for byte
    assert counts["failed"] == 0 and counts["made"] >= len(made)

    figures = {
        "video": {"name": VTEST.name, "width": video.width, "height": video.height, "frames": video.frame_count},
        "trajectories": len(trajectories), "crops_per_strip": 12, "max_size": 160,
        "paths": {"on_request": _stats(on_request), "stored": _stats(from_files)},
        "strips_made": {**counts, "seconds": round(strips_s, 3),
                        "ms_per_crop": round(1000 * strips_s / max(counts["made"], 1), 2)},
        "speedup_p95": round(_stats(on_request)["p95_ms"] / max(_stats(from_files)["p95_ms"], 1e-3), 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "full": FULL,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    with capsys.disabled():
        print(f"\ncrop strips on {VTEST.name}: {len(trajectories)} trajectories, {len(made)} crop requests")
        for name, s in figures["paths"].items():
            print(f"  {name:<11} p50 {s['p50_ms']:8.2f} ms  p95 {s['p95_ms']:8.2f} ms  total {s['total_s']:7.3f} s")
        print(f"  strips made in the background: {strips_s:.2f} s ({figures['strips_made']['ms_per_crop']} ms/crop)")
    # a stored crop is a file read: far under the time a decode takes
    assert figures["paths"]["stored"]["p95_ms"] * 5 < figures["paths"]["on_request"]["p95_ms"]
