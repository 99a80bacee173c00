"""Reading track files and matching tubes, against the obvious ways, in the same run.

Parsing: ``models.tracks_io`` reads MOTChallenge, JSON tube and CSV files with a line number on
every box (so a refusal can name the line). The obvious ways read the same numbers without line
numbers or checks: ``numpy.loadtxt`` for MOT and CSV, ``json.loads`` for JSON. The figures say
what the line-numbered checks cost per box; both must give the same boxes.

Matching: ``models.curation.tube_matching.match_tubes`` (searchsorted and vectorised IoU per
tube-proposal pair) against a plain loop over frames with dictionaries, on random tubes and
proposals of one video; both must give the same ``maxIoU``, ``C_τ`` and ``meanIoU`` for every pair.

Quick size (default): 20,000 boxes per file, 20 tubes × 100 proposals over 300 frames. Full size
(``TRAJLAB_BENCH_FULL=1``): 200,000 boxes, 50 tubes × 300 proposals over 1,000 frames. Figures
go to ``var/bench/track_import.json``; run with ``-s`` to see the table.
"""
from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from models.curation.tube_matching import Track, TubeMatchConfig, match_tubes
from models.tracks_io import parse_tracks
from models.tracks_io.mot import format_mot
from models.tracks_io.records import ImportedTrack
from models.tracks_io.tubes_json import format_tubes_json

pytestmark = pytest.mark.benchmark

FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
REPO = Path(__file__).resolve().parents[2]
N_BOXES = 200_000 if FULL else 20_000
N_TUBES, N_PROPS, N_FRAMES = (50, 300, 1000) if FULL else (20, 100, 300)
SEED = 3


def _tracks(n_boxes: int, rng) -> list[ImportedTrack]:
    per = 500
    out = []
    for i in range(n_boxes // per):
        frames = np.arange(per)
        xy = rng.uniform(0, 500, size=(per, 2)).round(2)
        boxes = np.hstack([xy, xy + rng.uniform(10, 100, size=(per, 2)).round(2)])
        out.append(ImportedTrack(i + 1, "person", frames, boxes, np.ones(per), np.zeros(per, int)))
    return out


def _timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def _loop_overlap(tube: Track, prop: Track, tau: float) -> tuple[float, float, float]:
    boxes = {int(f): b for f, b in zip(prop.frames, prop.boxes)}
    a = []
    for f, t in zip(tube.frames, tube.boxes):
        p = boxes.get(int(f))
        if p is None:
            a.append(0.0)
            continue
        ix = max(0.0, min(t[2], p[2]) - max(t[0], p[0]))
        iy = max(0.0, min(t[3], p[3]) - max(t[1], p[1]))
        inter = ix * iy
        a.append(inter / ((t[2] - t[0]) * (t[3] - t[1]) + (p[2] - p[0]) * (p[3] - p[1]) - inter))
    return max(a), sum(x >= tau for x in a) / len(a), sum(a) / len(a)


def test_track_reading_and_tube_matching_against_the_obvious_ways():
    rng = np.random.default_rng(SEED)
    tracks = _tracks(N_BOXES, rng)
    mot_text = format_mot(tracks)
    json_text = format_tubes_json(tracks)
    csv_text = "track_id,frame,x1,y1,x2,y2\n" + "".join(
        f"{t.track_id},{f},{b[0]:.2f},{b[1]:.2f},{b[2]:.2f},{b[3]:.2f}\n" for t in tracks for f, b in zip(t.frames, t.boxes))
    rows = []

    parsed, ours = _timed(lambda: parse_tracks("mot", mot_text, gt=True))
    plain, obvious = _timed(lambda: np.loadtxt(io.StringIO(mot_text), delimiter=","))
    assert sum(t.n_obs for t in parsed.tracks) == len(plain) == N_BOXES
    rows.append(("MOT gt.txt", ours, obvious))

    parsed, ours = _timed(lambda: parse_tracks("json", json_text))
    plain, obvious = _timed(lambda: json.loads(json_text))
    assert sum(len(t["boxes"]) for t in plain["tubes"]) == sum(t.n_obs for t in parsed.tracks) == N_BOXES
    np.testing.assert_allclose(parsed.tracks[0].boxes, np.array(plain["tubes"][0]["boxes"])[:, 1:])
    rows.append(("JSON tubes", ours, obvious))

    parsed, ours = _timed(lambda: parse_tracks("csv", csv_text))
    plain, obvious = _timed(lambda: np.loadtxt(io.StringIO(csv_text), delimiter=",", skiprows=1))
    np.testing.assert_allclose(np.vstack([t.boxes for t in parsed.tracks]), plain[:, 2:])
    rows.append(("CSV", ours, obvious))

    def rand_track(i, n):
        frames = np.sort(rng.choice(N_FRAMES, size=n, replace=False))
        xy = rng.uniform(0, 300, size=(n, 2))
        return Track(i, frames, np.hstack([xy, xy + rng.uniform(20, 80, size=(n, 2))]))

    tubes = [rand_track(i, N_FRAMES // 5) for i in range(N_TUBES)]
    props = [rand_track(1000 + i, N_FRAMES // 2) for i in range(N_PROPS)]
    config = TubeMatchConfig(tau=0.3, min_coverage=0.3, min_mean_iou=0.3)
    report, ours = _timed(lambda: match_tubes(tubes, props, config))
    reference, obvious = _timed(lambda: {(t.id, p.id): _loop_overlap(t, p, config.tau) for t in tubes for p in props})
    for pair in report.pairs:
        expected = reference[(pair.tube, pair.trajectory)]
        assert (pair.max_iou, pair.coverage, pair.mean_iou) == pytest.approx(expected)
    rows.append((f"tube matching {N_TUBES}x{N_PROPS}", ours, obvious))

    out = REPO / "var" / "bench" / "track_import.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    figures = [{"what": w, "ours_s": round(a, 4), "obvious_s": round(b, 4), "ratio": round(a / b, 2)} for w, a, b in rows]
    out.write_text(json.dumps({"full": FULL, "boxes_per_file": N_BOXES, "figures": figures}, indent=2))
    print(f"\n{'':28s} {'ours (s)':>10s} {'obvious (s)':>12s} {'ours/obvious':>13s}")
    for w, a, b in rows:
        print(f"{w:28s} {a:10.3f} {b:12.3f} {a / b:13.2f}")
