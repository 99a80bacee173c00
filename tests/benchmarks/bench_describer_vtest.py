"""The heuristic describer on real footage: clothing colours of the people of vtest.avi against a
truth labelled by eye (``tests/fixtures/vtest_people.json``).

The rendered world's truth is what the renderer drew; this truth is what a person sees. Thirteen
people of the video's first 300 frames were labelled from an enlarged crop at one anchor frame each
(basic colour terms; every term a careful reader could give is accepted where a garment sits between
two). The CPU trackers run on those frames (the default one; ``TRAJLAB_BENCH_FULL=1`` adds the DNN
detector's); each labelled person is matched to the track whose box
at the anchor frame (or the nearest observed frame within ``NEAR`` frames) overlaps the labelled
box most, at IoU >= ``MIN_IOU``; that track is described and its known colour facts are scored:

- **precision** of a type: known facts of the type whose value is one of the accepted terms, over
  the known facts of the type;
- **recall** of a type: matched people with such a correct known fact, over the matched people;
- **end-to-end recall**: the same over every labelled person (a person no track found is a miss);
- beside them, what a describer that always says the most common term (black) would score: the
  share of the labelled people whose accepted terms include it.

Figures per tracker go to ``var/bench/describer_vtest.json``; run with ``-s`` to see the table.
There is no floor to meet: the figures are reported as they are.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from models.backends.tracking import build_tracker, resolve_tracker_settings
from models.backends.tracking.base import run_tracker
from models.backends.tracking.dnn_bytetrack import dnn_model_available
from models.backends.vlm import DescribeRequest
from models.backends.vlm.heuristic import HeuristicDescriber
from models.media.video import FrameReader
from tests.benchmarks.bench_tracking import HeadFrames

pytestmark = pytest.mark.benchmark

REPO = Path(__file__).resolve().parents[2]
VTEST = Path(os.environ.get("TRAJLAB_VTEST", REPO.parent / "shared" / "data" / "vtest.avi"))
TRUTH = REPO / "tests" / "fixtures" / "vtest_people.json"
FULL = os.environ.get("TRAJLAB_BENCH_FULL", "").strip().lower() in {"1", "true", "yes", "on"}
TYPES = ("upper_colour", "lower_colour")
MIN_IOU = 0.3
NEAR = 3                                         # frames from the anchor a track's box may be taken at


def iou(a: np.ndarray, b: np.ndarray) -> float:
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def match(person: dict, proposals) -> tuple[object | None, float]:
    """The proposal whose box near the person's anchor frame overlaps the labelled box most."""
    box = np.asarray(person["box"], np.float64)
    best, best_iou = None, 0.0
    for p in proposals:
        gap = np.abs(p.frames.astype(np.int64) - person["anchor_frame"])              # [N]
        if gap.size == 0 or gap.min() > NEAR:
            continue
        overlap = iou(p.boxes[int(np.argmin(gap))].astype(np.float64), box)
        if overlap > best_iou:
            best, best_iou = p, overlap
    return (best, best_iou) if best_iou >= MIN_IOU else (None, best_iou)


def score(truth: dict, proposals, reader) -> dict:
    describer = HeuristicDescriber()
    counts = {t: {"known": 0, "correct": 0, "people_correct": 0, "unknown": 0} for t in TYPES}
    matched, rows = 0, []
    for person in truth["people"]:
        track, overlap = match(person, proposals)
        row = {"anchor_frame": person["anchor_frame"], "iou": round(overlap, 3), "said": {}}
        rows.append(row)
        if track is None:
            continue
        matched += 1
        result = describer.describe(DescribeRequest(str(VTEST), track.frames, track.boxes), reader=reader)
        assert not result.failed, result.errors
        for name in TYPES:
            facts = [f for f in result.description.facts if f.name == name]
            known = [f for f in facts if f.known]
            right = [f for f in known if f.value in person[name]]
            c = counts[name]
            c["known"] += len(known)
            c["correct"] += len(right)
            c["unknown"] += len(facts) - len(known)
            c["people_correct"] += bool(right)
            row["said"][name] = [f.value for f in known]
    n = len(truth["people"])
    report = {}
    for name, c in counts.items():
        report[name] = {**c, "precision": round(c["correct"] / c["known"], 3) if c["known"] else None,
                        "recall": round(c["people_correct"] / matched, 3) if matched else None,
                        "end_to_end_recall": round(c["people_correct"] / n, 3)}
    return {"n_people": n, "matched": matched, "facts": report, "people": rows}


def test_heuristic_describer_colours_on_vtest():
    if not VTEST.is_file():
        pytest.skip(f"{VTEST} is not there (set TRAJLAB_VTEST to its path)")
    truth = json.loads(TRUTH.read_text())
    backends = ["hog-bytetrack", *(["dnn-bytetrack"] if FULL and dnn_model_available() else [])]
    results = {}
    with FrameReader(VTEST) as reader:
        head = HeadFrames(reader, truth["frames"])
        for backend in backends:
            tracker = build_tracker(backend, resolve_tracker_settings(backend, categories=["person"],
                                                                      tracker_settings={}))
            proposals = run_tracker(tracker, head, ["person"])
            results[backend] = score(truth, proposals, reader)
    out = REPO / "var" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    always = {t: round(sum("black" in p[t] for p in truth["people"]) / len(truth["people"]), 3) for t in TYPES}
    (out / "describer_vtest.json").write_text(json.dumps({"truth": TRUTH.name, "trackers": results,
                                                          "always_black_precision": always}, indent=2) + "\n")
    print(f"\nheuristic describer on vtest.avi, {truth['frames']} frames, {len(truth['people'])} people labelled by eye")
    print(f"{'tracker':<15}{'matched':>8}" + "".join(f"{t + ' P':>16}{t + ' R':>16}" for t in TYPES))
    for backend, r in results.items():
        cells = "".join(f"{_fmt(r['facts'][t]['precision']):>16}{_fmt(r['facts'][t]['recall']):>16}" for t in TYPES)
        print(f"{backend:<15}{r['matched']:>5}/{r['n_people']:<2}{cells}")
    print(f"{'always black':<23}" + "".join(f"{_fmt(always[t]):>16}{'':>16}" for t in TYPES))
    for r in results.values():                  # the scoring saw what it claims to have seen
        assert r["matched"] <= r["n_people"]
        for t in TYPES:
            assert r["facts"][t]["correct"] <= r["facts"][t]["known"]


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"
