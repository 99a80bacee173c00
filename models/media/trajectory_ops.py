"""Pure functions over trajectories: validation, quality signals, overlap and duplicate proposals.

A trajectory here is ``(frames [N] int, boxes [N, 4] float xyxy)`` with strictly increasing
frames. No Django: the services call these and the tests check them directly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import cv2
import numpy as np

from models.media.pair_index import DuplicateSettings, candidate_pairs


class TrajectoryError(ValueError):
    """Observations that cannot be stored; ``details`` lists the offending items."""

    def __init__(self, message: str, details: list | None = None):
        super().__init__(message)
        self.details = details or []


def validate_observations(frames, boxes, *, width: int, height: int, frame_count: int,
                          scores=None, label: str = "trajectory") -> None:
    """Refuse NaN/inf, empty or inverted boxes, boxes outside the frame, bad frame indices."""
    frames = np.asarray(frames)
    boxes = np.asarray(boxes, dtype=np.float64)
    if frames.ndim != 1 or len(frames) == 0:
        raise TrajectoryError(f"{label}: needs at least one observation")
    if boxes.shape != (len(frames), 4):
        raise TrajectoryError(f"{label}: boxes must have shape [{len(frames)}, 4], got {list(boxes.shape)}")
    if scores is not None:
        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (len(frames),) or not np.isfinite(scores).all():
            raise TrajectoryError(f"{label}: scores must be {len(frames)} finite numbers")
    problems: list[str] = []
    if not np.issubdtype(frames.dtype, np.integer):
        raise TrajectoryError(f"{label}: frame indices must be integers")
    if (np.diff(frames) <= 0).any():
        problems.append("frame indices are not strictly increasing")
    bad_idx = np.flatnonzero((frames < 0) | (frames >= frame_count))
    if len(bad_idx):
        problems.append(f"frame {int(frames[bad_idx[0]])} is outside 0..{frame_count - 1}")
    nonfinite = np.flatnonzero(~np.isfinite(boxes).all(axis=1))
    if len(nonfinite):
        problems.append(f"box on frame {int(frames[nonfinite[0]])} is not finite: {boxes[nonfinite[0]].tolist()}")
    finite = np.isfinite(boxes).all(axis=1)
    b = np.where(finite[:, None], boxes, 0.0)
    inverted = np.flatnonzero(finite & ((b[:, 2] <= b[:, 0]) | (b[:, 3] <= b[:, 1])))
    if len(inverted):
        problems.append(f"box on frame {int(frames[inverted[0]])} is empty or inverted: {boxes[inverted[0]].tolist()}")
    eps = 1e-3
    outside = np.flatnonzero(finite & ((b[:, 0] < -eps) | (b[:, 1] < -eps) | (b[:, 2] > width + eps) | (b[:, 3] > height + eps)))
    if len(outside):
        problems.append(
            f"box on frame {int(frames[outside[0]])} lies outside the {width}x{height} frame: {boxes[outside[0]].tolist()}"
            + (f" (and {len(outside) - 1} more)" if len(outside) > 1 else "")
        )
    if problems:
        raise TrajectoryError(f"{label}: " + "; ".join(problems), problems)


@dataclass(frozen=True)
class QualitySignals:
    n_obs: int
    first_frame: int
    last_frame: int
    temporal_coverage: float   # observations / frames in [first, last]
    longest_run: int           # longest run of consecutive frames
    median_area: float         # median box area, pixels
    abrupt_changes: int        # jumps in position or scale between consecutive observations
    mean_score: float


def longest_run(frames: np.ndarray) -> int:
    if len(frames) == 0:
        return 0
    breaks = np.flatnonzero(np.diff(frames) != 1)
    edges = np.concatenate([[-1], breaks, [len(frames) - 1]])
    return int(np.diff(edges).max())


def quality_signals(frames, boxes, scores=None, *, jump: float = 0.5, scale_jump: float = 1.5) -> QualitySignals:
    """Quality signals of one trajectory.

    An abrupt change is a step between consecutive observations whose centre moves more than
    ``jump`` box diagonals per frame of gap, or whose area changes by more than ``scale_jump``x.
    """
    frames = np.asarray(frames, dtype=np.int64)
    boxes = np.asarray(boxes, dtype=np.float64)
    w = boxes[:, 2] - boxes[:, 0]
    h = boxes[:, 3] - boxes[:, 1]
    area = w * h
    span = int(frames[-1] - frames[0] + 1)
    abrupt = 0
    if len(frames) > 1:
        centres = np.stack([(boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2], axis=1)
        step = np.linalg.norm(np.diff(centres, axis=0), axis=1)
        gap = np.diff(frames).astype(np.float64)
        diag = np.sqrt(w * w + h * h)[:-1]
        ratio = area[1:] / np.maximum(area[:-1], 1e-9)
        abrupt = int(((step / gap > jump * diag) | (ratio > scale_jump) | (ratio < 1 / scale_jump)).sum())
    return QualitySignals(
        n_obs=len(frames), first_frame=int(frames[0]), last_frame=int(frames[-1]),
        temporal_coverage=len(frames) / span, longest_run=longest_run(frames),
        median_area=float(np.median(area)), abrupt_changes=abrupt,
        mean_score=float(np.mean(scores)) if scores is not None and len(scores) else 1.0,
    )


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise IoU of two [N, 4] xyxy arrays."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)
    inter = ix * iy
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


# -- appearance ---------------------------------------------------------------------------------
APPEARANCE_BINS = (8, 4)  # hue x saturation bins per half box


def appearance_descriptor(frame_bgr: np.ndarray, box) -> np.ndarray:
    """Hue/saturation histograms of the upper and lower half of a box (L2-normalised, float32).

    Upper and lower halves are kept apart so that a red shirt over blue trousers differs from
    the reverse. Pixels that are nearly grey or black get little hue weight through saturation.
    """
    h, w = frame_bgr.shape[:2]
    x1, y1, x2, y2 = (round(float(v)) for v in box)
    x1, y1, x2, y2 = max(0, x1), max(0, y1), min(w, x2), min(h, y2)
    parts = []
    if x2 - x1 < 2 or y2 - y1 < 2:
        return np.zeros(2 * APPEARANCE_BINS[0] * APPEARANCE_BINS[1] + 6, dtype=np.float32)
    hsv = cv2.cvtColor(frame_bgr[y1:y2, x1:x2], cv2.COLOR_BGR2HSV)
    mid = hsv.shape[0] // 2
    value = []
    for half in (hsv[:mid], hsv[mid:]):
        hist = cv2.calcHist([half], [0, 1], None, list(APPEARANCE_BINS), [0, 180, 0, 256]).ravel()
        parts.append(hist / max(hist.sum(), 1.0))
        value.extend([half[..., 2].mean() / 255.0, half[..., 2].std() / 255.0, half[..., 1].mean() / 255.0])
    # Brightness/saturation statistics help with grey and black clothing, where hue says little;
    # they are down-weighted so that colour histograms dominate the similarity.
    vec = np.concatenate([*parts, 0.25 * np.asarray(value)]).astype(np.float32)
    return vec / max(float(np.linalg.norm(vec)), 1e-9)


def _appearance_picks(n: int, samples: int) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, num=min(samples, n)).round().astype(int))


def _mean_descriptor(vecs) -> np.ndarray:
    mean = np.mean(vecs, axis=0)
    return (mean / max(float(np.linalg.norm(mean)), 1e-9)).astype(np.float32)


def trajectory_appearance(read_frame, frames, boxes, *, samples: int = 6) -> np.ndarray:
    """Mean appearance descriptor over up to ``samples`` observations spread over the track."""
    frames = np.asarray(frames)
    picks = _appearance_picks(len(frames), samples)
    return _mean_descriptor([appearance_descriptor(read_frame(int(frames[i])), boxes[i]) for i in picks])


def trajectories_appearance(read_frame, tracks: list[tuple[np.ndarray, np.ndarray]], *, samples: int = 6,
                            progress=None) -> list[np.ndarray]:
    """:func:`trajectory_appearance` of every ``(frames, boxes)`` track, each frame read once: the
    sampled observations of all tracks are visited in frame order (thousands of short tracks on a
    few hundred frames read a few hundred frames, in order). ``progress(fraction)`` is told as
    frames are read."""
    picks = [_appearance_picks(len(f), samples) for f, _ in tracks]
    wanted = sorted((int(f[i]), k, n) for k, ((f, _), p) in enumerate(zip(tracks, picks)) for n, i in enumerate(p))
    vecs: list[list] = [[None] * len(p) for p in picks]
    frame_no, image = None, None
    for done, (f, k, n) in enumerate(wanted):
        if f != frame_no:
            frame_no, image = f, read_frame(f)
            if progress is not None:
                progress(done / len(wanted))
        vecs[k][n] = appearance_descriptor(image, tracks[k][1][picks[k][n]])
    return [_mean_descriptor(v) for v in vecs]


# -- duplicate proposals ------------------------------------------------------------------------
DEFAULT_DUPLICATES = DuplicateSettings()


@dataclass
class PairSignals:
    a: int
    b: int
    reasons: list[str] = field(default_factory=list)
    mean_iou: float | None = None
    covisible: int = 0
    gap_frames: int | None = None
    endpoint_iou: float | None = None
    appearance: float | None = None


def _nearest_in_time(fa: np.ndarray, fb: np.ndarray) -> tuple[int, int, int]:
    """Indices ``(i, j)`` of the observations of two disjoint frame lists closest in time, and
    their distance in frames (>= 1)."""
    pos = np.searchsorted(fb, fa)                                  # [Na] where each fa frame falls in fb
    best = (0, 0, np.iinfo(np.int64).max)
    for candidate in (pos - 1, pos):                               # the fb neighbours on each side
        ok = (candidate >= 0) & (candidate < len(fb))
        if not ok.any():
            continue
        ia = np.flatnonzero(ok)
        jb = candidate[ok]
        d = np.abs(fb[jb].astype(np.int64) - fa[ia].astype(np.int64))
        k = int(np.argmin(d))
        if d[k] < best[2]:
            best = (int(ia[k]), int(jb[k]), int(d[k]))
    return best


def pair_signals(fa, ba, fb, bb, appa=None, appb=None, settings: DuplicateSettings = DEFAULT_DUPLICATES,
                 a: int = 0, b: int = 1) -> PairSignals:
    """The signals that relate two trajectories, and the reasons they would be proposed."""
    sig = PairSignals(a=a, b=b)
    common, ia, ib = np.intersect1d(fa, fb, assume_unique=True, return_indices=True)
    sig.covisible = len(common)
    if len(common):
        sig.mean_iou = float(box_iou(ba[ia], bb[ib]).mean())
        if sig.covisible >= settings.min_covisible and sig.mean_iou >= settings.min_mean_iou:
            sig.reasons.append("overlap")
    reachable = True
    if not len(common):
        # Fragments that share no frame: compare the two observations nearest in time (the end of
        # one and the start of the other, or the closest pair when their spans interleave).
        i, j, gap = _nearest_in_time(fa, fb)
        end_box, start_box = ba[i], bb[j]
        sig.gap_frames = gap
        sig.endpoint_iou = float(box_iou(end_box, start_box)[0])
        height = max(end_box[3] - end_box[1], start_box[3] - start_box[1], 1e-6)
        dist = np.hypot((end_box[0] + end_box[2] - start_box[0] - start_box[2]) / 2,
                        (end_box[1] + end_box[3] - start_box[1] - start_box[3]) / 2) / height
        if gap <= settings.max_gap_frames and (sig.endpoint_iou >= settings.min_endpoint_iou or dist <= settings.max_endpoint_distance):
            sig.reasons.append("adjacent")
        reachable = dist <= 1.0 + settings.max_speed * gap
    if appa is not None and appb is not None and len(appa) and len(appa) == len(appb):
        sig.appearance = float(np.dot(appa, appb))
        near = sig.gap_frames is None or sig.gap_frames <= settings.max_appearance_gap
        # Two tracks seen side by side at once are two objects; appearance alone only links
        # tracks that are not simultaneously visible apart from each other.
        apart = sig.covisible > 0 and (sig.mean_iou or 0.0) < 0.05
        if sig.appearance >= settings.min_appearance and near and reachable and not apart:
            sig.reasons.append("appearance")
    return sig


class TooManyPairs(ValueError):
    """More duplicate pairs than the caller stores (``limit``)."""

    def __init__(self, limit: int):
        super().__init__(f"more than {limit} duplicate pairs")
        self.limit = limit


def propose_duplicate_pairs(tracks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray | None]],
                            settings: DuplicateSettings = DEFAULT_DUPLICATES, *, max_pairs: int | None = None,
                            progress=None) -> list[PairSignals]:
    """All pairs ``(id_a < id_b)`` with at least one reason. ``tracks``: (id, frames, boxes, appearance).

    The pairs that can have a reason are found in arrays (``models.media.pair_index``: boxes that
    intersect on a shared frame, ends and starts within the horizon, interleaved fragments), and
    only those are compared by :func:`pair_signals`; the result is the pairwise comparison's
    (:func:`propose_duplicate_pairs_pairwise`, the tests' oracle and the benchmark's baseline).
    ``max_pairs``: :class:`TooManyPairs` as soon as more pairs than that are found.
    ``progress(fraction)`` is told as the candidates are compared.
    """
    pairs = candidate_pairs([t[1] for t in tracks], [t[2] for t in tracks], [t[3] for t in tracks], settings)
    out = []
    for n, (i, j) in enumerate(pairs):
        first, second = (tracks[i], tracks[j]) if tracks[i][0] < tracks[j][0] else (tracks[j], tracks[i])
        sig = pair_signals(first[1], first[2], second[1], second[2], first[3], second[3], settings,
                           a=first[0], b=second[0])
        if sig.reasons:
            out.append(sig)
            if max_pairs is not None and len(out) > max_pairs:
                raise TooManyPairs(max_pairs)
        if progress is not None and n % 4096 == 0:
            progress(n / len(pairs))
    return sorted(out, key=lambda p: (p.a, p.b))


def propose_duplicate_pairs_pairwise(tracks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray | None]],
                                     settings: DuplicateSettings = DEFAULT_DUPLICATES) -> list[PairSignals]:
    """:func:`propose_duplicate_pairs` the obvious way: :func:`pair_signals` on every pair."""
    out = []
    for i, first in enumerate(tracks):
        for second in tracks[i + 1:]:
            a, b = (first, second) if first[0] < second[0] else (second, first)
            sig = pair_signals(a[1], a[2], b[1], b[2], a[3], b[3], settings, a=a[0], b=b[0])
            if sig.reasons:
                out.append(sig)
    return sorted(out, key=lambda p: (p.a, p.b))
