"""Which pairs of trajectories can be duplicate candidates, found without comparing every pair.

``models.media.trajectory_ops.pair_signals`` gives a pair a reason in three ways, and each needs a
condition that arrays can test for all pairs at once:

1. Pairs that share a frame. ``overlap`` needs their mean IoU over the shared frames to reach
   ``min_mean_iou`` and ``appearance`` needs it to reach 0.05 (below, they are seen apart), so
   (with ``min_mean_iou > 0``) their boxes intersect on some shared frame. Those pairs come from
   a sweep along x within each frame: observations sorted by (frame, x1), held as complex numbers
   ``frame + 1j * x1`` so that one ``searchsorted`` of ``frame + 1j * x2`` finds every box that
   starts left of a box's right edge on its frame. IoU is summed per pair and divided by the
   pair's shared frames (counted run by run of consecutive frames) to test the mean.
2. Pairs where one ends before the other starts: the nearest observations are the end of one and
   the start of the other, and the gap, endpoint IoU, centre distance and appearance similarity are
   computed in arrays from those boxes. ``adjacent`` needs a gap of at most ``max_gap_frames`` and
   boxes that overlap or lie within ``max_endpoint_distance`` heights: partners are looked up on a
   grid of cells as wide as two boxes reach, among the tracks starting within the gap. ``appearance``
   needs alike descriptors: those pairs are found by multiplying the descriptors in blocks (BLAS),
   then kept when they lie within ``max_appearance_gap`` frames.
3. Pairs whose spans interleave without a shared frame (found among the pairs whose spans
   overlap): kept as they are, few in practice.

Thresholds are compared with a margin (``EPS``, ``APPEARANCE_EPS``), so float rounding never drops a
pair: the index returns a superset of the proposed pairs, and the exact signals and reasons come
from ``pair_signals`` on those pairs only. Work goes in chunks of at most ``CHUNK`` candidate pairs.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

EPS = 1e-6              # margin on IoU, distance and mean thresholds
APPEARANCE_EPS = 1e-4   # margin on the cosine of float32 descriptors
APART_IOU = 0.05        # pair_signals: co-visible tracks below this mean IoU are seen apart
CHUNK = 1 << 21         # candidate pairs handled at once
SIMILARITY_BLOCK = 1 << 24   # cosine similarities computed at once (64 MB of float32)


@dataclass(frozen=True)
class DuplicateSettings:
    """When two trajectories are proposed as duplicates (``trajectory_ops.propose_duplicates``)."""

    min_mean_iou: float = 0.25          # co-visible frames: propose when mean IoU reaches this
    min_covisible: int = 3              # ... over at least this many shared frames
    max_gap_frames: int = 30            # adjacent fragments: end of one to start of the other
    min_endpoint_iou: float = 0.05      # ... whose end and start boxes overlap this much
    max_endpoint_distance: float = 1.0  # ... or whose centres lie within this many box heights
    min_appearance: float = 0.95        # appearance-only proposals: cosine at least this ...
    max_appearance_gap: int = 100       # ... at most this many frames apart (or overlapping) ...
    max_speed: float = 0.12             # ... and reachable: end-to-start centre distance at most
                                        # 1 + max_speed * gap box heights (a brisk walk is ~0.1/frame at 10 fps)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(rows, positions)`` for every row ``i`` and position in ``[starts[i], ends[i])``, in chunks of
    about ``CHUNK`` pairs (a row with more than ``CHUNK`` positions is one chunk)."""
    counts = np.maximum(ends - starts, 0)                                  # [R]
    bounds = np.concatenate([[0], np.cumsum(counts)])                      # [R + 1]
    row = 0
    while row < len(counts):
        stop = max(int(np.searchsorted(bounds, bounds[row] + CHUNK, side="right")) - 1, row + 1)
        rows = np.arange(row, stop)
        c = counts[row:stop]
        total = int(c.sum())
        if total:
            rep = np.repeat(rows, c)                                       # [P]
            offset = np.arange(total) - np.repeat(bounds[row:stop] - bounds[row], c)
            yield rep, starts[rep] + offset
        row = stop


def _iou(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Intersection area and IoU of row-paired [P, 4] boxes (as ``box_iou`` computes them)."""
    ix = np.clip(np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]), 0, None)  # [P]
    iy = np.clip(np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]), 0, None)  # [P]
    inter = ix * iy
    union = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]) + (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) - inter
    return inter, np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


class _Tracks:
    """The tracks as flat arrays: observations sorted by (track, frame), runs of consecutive frames."""

    def __init__(self, frames: list[np.ndarray], boxes: list[np.ndarray], apps: list[np.ndarray | None]):
        self.n = len(frames)
        self.lengths = lengths = np.array([len(f) for f in frames], np.int64)   # [n]
        self.offset = np.concatenate([[0], np.cumsum(lengths)[:-1]])      # [n] first observation of each
        self.track = np.repeat(np.arange(self.n), lengths)                 # [N]
        self.frame = np.concatenate([np.asarray(f, np.int64) for f in frames])          # [N]
        self.box = np.concatenate([np.asarray(b, np.float64).reshape(-1, 4) for b in boxes])  # [N, 4]
        self.first = self.frame[self.offset]                               # [n]
        self.last = self.frame[self.offset + lengths - 1]                  # [n]
        self.fmin = int(self.frame.min())
        self.m = int(self.frame.max()) - self.fmin + 1
        self.key = self.track * self.m + (self.frame - self.fmin)          # [N] ascending
        brk = np.ones(len(self.frame), bool)                               # a run starts here
        brk[1:] = (self.track[1:] != self.track[:-1]) | (self.frame[1:] != self.frame[:-1] + 1)
        starts = np.flatnonzero(brk)                                       # [Q]
        ends = np.concatenate([starts[1:], [len(self.frame)]]) - 1
        self.run_lo, self.run_hi = self.frame[starts], self.frame[ends]    # [Q]
        self.run_n = np.bincount(self.track[starts], minlength=self.n)     # [n]
        self.run_off = np.concatenate([[0], np.cumsum(self.run_n)[:-1]])   # [n]
        dims = [0 if a is None else len(a) for a in apps]
        self.app_len = np.array(dims, np.int64)                            # [n], 0: none
        self.app = np.zeros((self.n, max(dims, default=0)), np.float64)     # [n, D], zero-padded
        for k, a in enumerate(apps):
            if a is not None and len(a):
                self.app[k, :len(a)] = a

    def shared(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """How many frames tracks ``a[p]`` and ``b[p]`` share, counted over the runs of the one with
        fewer runs (two binary searches per run)."""
        swap = self.run_n[b] < self.run_n[a]
        s, o = np.where(swap, b, a), np.where(swap, a, b)                  # [P] side walked, other side
        out = np.zeros(len(a), np.int64)
        for rows, runs in _ranges(self.run_off[s], self.run_off[s] + self.run_n[s]):
            base = o[rows] * self.m - self.fmin
            hi = np.searchsorted(self.key, base + self.run_hi[runs], side="right")
            lo = np.searchsorted(self.key, base + self.run_lo[runs], side="left")
            out += np.bincount(rows, weights=hi - lo, minlength=len(a)).astype(np.int64)
        return out

    def cosine(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Dot products of the pairs' appearance descriptors; NaN where a pair has none to compare."""
        if self.app.shape[1] == 0:
            return np.full(len(a), np.nan)
        ok = (self.app_len[a] > 0) & (self.app_len[a] == self.app_len[b])
        return np.where(ok, np.einsum("pd,pd->p", self.app[a], self.app[b]), np.nan)


def _intersecting(t: _Tracks, s: DuplicateSettings) -> tuple[np.ndarray, np.ndarray]:
    """Pair keys ``a * n + b`` (a < b) of tracks whose boxes intersect on a shared frame, and the
    sum of their IoU over those frames; among the tracks that can be co-visible duplicates: with
    ``min_covisible`` observations (``overlap``) or a descriptor (``appearance``)."""
    able = (t.lengths >= s.min_covisible) | (t.app_len > 0)                 # [n]
    obs = np.flatnonzero(able[t.track])                                     # [N'] their observations
    order = obs[np.lexsort((t.box[obs, 0], t.frame[obs]))]                  # by frame, then x1
    fr, bx, tr = t.frame[order].astype(np.float64), t.box[order], t.track[order]
    keys = fr + 1j * bx[:, 0]                                              # [N] lexicographic: frame, x1
    ends = np.searchsorted(keys, fr + 1j * bx[:, 2], side="left")          # [N] first box starting at or past x2
    found_keys, found_sums = [], []
    for i, j in _ranges(np.arange(len(fr)) + 1, ends):
        inter, iou = _iou(bx[i], bx[j])
        hit = (inter > 0) & (tr[i] != tr[j])
        a, b = tr[i][hit], tr[j][hit]
        k, inv = np.unique(np.minimum(a, b) * t.n + np.maximum(a, b), return_inverse=True)
        found_keys.append(k)
        found_sums.append(np.bincount(inv, weights=iou[hit], minlength=len(k)))
    if not found_keys:
        return np.zeros(0, np.int64), np.zeros(0)
    k, inv = np.unique(np.concatenate(found_keys), return_inverse=True)
    return k, np.bincount(inv, weights=np.concatenate(found_sums), minlength=len(k))


def _sorted_by_first(t: _Tracks) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(t.first, kind="stable")
    return order, t.first[order]


def _reach(t: _Tracks, s: DuplicateSettings) -> np.ndarray | None:
    """How far (in pixels, along x and along y) each box reaches for an adjacent fragment: the end
    and start boxes of two fragments pass the adjacency thresholds only if their centres are at
    most ``reach_a + reach_b`` apart along each axis. Intersecting boxes (IoU above
    ``min_endpoint_iou`` > 0) lie within half their widths and heights; a centre distance of ``d``
    box heights (the larger of the two) within ``d`` times the sum of their heights. ``None``: no
    bound (an endpoint IoU of 0 is enough)."""
    if s.min_endpoint_iou <= EPS:
        return None
    w, h = t.box[:, 2] - t.box[:, 0], t.box[:, 3] - t.box[:, 1]            # [N]
    return np.maximum(np.maximum(w, h) / 2, (s.max_endpoint_distance + EPS) * np.maximum(h, 1e-6))  # [N]


def _end_obs(t: _Tracks) -> np.ndarray:
    return t.offset + t.lengths - 1                                        # [n] last observation of each


def _adjacent_in_time(t: _Tracks, s: DuplicateSettings) -> Iterator[np.ndarray]:
    """Pair keys of tracks where one ends before the other starts within ``max_gap_frames`` and the
    end and start boxes pass the adjacency (or appearance) thresholds, with margins.

    Partners are looked up on a grid of cells at least twice the largest reach (:func:`_reach`)
    wide: a track's end box is compared with the start boxes in its cell and the 8 around it that
    start within the gap (tracks sorted by (cell, first frame), two binary searches per cell)."""
    horizon = s.max_gap_frames
    end_obs = _end_obs(t)
    end, start = t.box[end_obs], t.box[t.offset]                           # [n, 4]
    reach = _reach(t, s)
    centre = np.concatenate([(end[:, :2] + end[:, 2:]) / 2, (start[:, :2] + start[:, 2:]) / 2])  # [2n, 2]
    lo_xy = centre.min(axis=0)
    span = float((centre.max(axis=0) - lo_xy).max()) + 1.0
    cell = span if reach is None else min(span, max(2.0 * float(np.concatenate([reach[end_obs], reach[t.offset]]).max()),
                                                     span / 1024, 1e-6))
    cells = int(span // cell) + 1                                          # per axis, at most 1025
    cx = ((centre[:, 0] - lo_xy[0]) // cell).astype(np.int64)
    cy = ((centre[:, 1] - lo_xy[1]) // cell).astype(np.int64)
    end_cx, end_cy, start_cell = cx[:t.n], cy[:t.n], cy[t.n:] * cells + cx[t.n:]
    frames = int(t.last.max() - t.first.min()) + horizon + 2
    key = start_cell * frames + (t.first - t.first.min())                  # [n] by cell, then first frame
    order = np.argsort(key, kind="stable")
    keys = key[order]
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            nx, ny = end_cx + dx, end_cy + dy
            inside = (nx >= 0) & (nx < cells) & (ny >= 0) & (ny < cells)
            base = (ny * cells + nx) * frames - t.first.min()
            lo = np.where(inside, np.searchsorted(keys, base + t.last, side="right"), 0)       # starts after k ends
            hi = np.where(inside, np.searchsorted(keys, base + t.last + horizon, side="right"), 0)
            for k, pos in _ranges(lo, hi):
                yield _passing(t, s, k, order[pos], end_obs)


def _alike_in_time(t: _Tracks, s: DuplicateSettings) -> Iterator[np.ndarray]:
    """Pair keys of tracks with alike appearance (cosine at least ``min_appearance``, less a margin)
    where one ends before the other starts within ``max_appearance_gap`` and the end and start boxes
    pass the thresholds. Appearance may link fragments far apart in the frame, so the alike pairs
    are found first, by multiplying the descriptors in blocks (BLAS), per descriptor length."""
    end_obs = _end_obs(t)
    for dim in np.unique(t.app_len[t.app_len > 0]):
        idx = np.flatnonzero(t.app_len == dim)                             # [m] tracks with such descriptors
        a = t.app[idx, :dim].astype(np.float32)                            # [m, D]
        rows = max(1, SIMILARITY_BLOCK // len(idx))
        for top in range(0, len(idx), rows):
            sim = a[top:top + rows] @ a.T                                  # [rows, m]
            r, c = np.nonzero(sim >= s.min_appearance - APPEARANCE_EPS)
            once = top + r < c
            p, q = idx[top + r[once]], idx[c[once]]
            k = np.where(t.last[p] < t.first[q], p, q)                     # the one that ends first
            m = np.where(k == p, q, p)
            apart = (t.last[k] < t.first[m]) & (t.first[m] - t.last[k] <= s.max_appearance_gap)
            yield _passing(t, s, k[apart], m[apart], end_obs)


def _passing(t: _Tracks, s: DuplicateSettings, k: np.ndarray, m: np.ndarray, end_obs: np.ndarray) -> np.ndarray:
    """Pair keys of the pairs (``k`` ends before ``m`` starts) whose end and start boxes pass the
    adjacency or appearance thresholds, computed as ``pair_signals`` computes them (with margins)."""
    gap = (t.first[m] - t.last[k]).astype(np.float64)                      # [P] >= 1
    end, start = t.box[end_obs[k]], t.box[t.offset[m]]                     # [P, 4]
    _, eiou = _iou(end, start)
    height = np.maximum.reduce([end[:, 3] - end[:, 1], start[:, 3] - start[:, 1], np.full(len(k), 1e-6)])
    dist = np.hypot((end[:, 0] + end[:, 2] - start[:, 0] - start[:, 2]) / 2,
                    (end[:, 1] + end[:, 3] - start[:, 1] - start[:, 3]) / 2) / height
    adjacent = (gap <= s.max_gap_frames) & ((eiou >= s.min_endpoint_iou - EPS)
                                            | (dist <= s.max_endpoint_distance + EPS))
    cos = t.cosine(k, m)
    with np.errstate(invalid="ignore"):
        alike = ((gap <= s.max_appearance_gap) & (cos >= s.min_appearance - APPEARANCE_EPS)
                 & (dist <= 1.0 + s.max_speed * gap + EPS))
    keep = adjacent | alike
    a, b = k[keep], m[keep]
    return np.minimum(a, b) * t.n + np.maximum(a, b)


def _spans_overlapping(t: _Tracks, s: DuplicateSettings) -> Iterator[np.ndarray]:
    """Pair keys of tracks whose spans overlap but share no frame (interleaved fragments), and, when
    ``min_mean_iou`` is not above 0, of every pair sharing at least ``min_covisible`` frames."""
    order, firsts = _sorted_by_first(t)
    ends = np.searchsorted(firsts, t.last[order], side="right")            # [n] positions starting within
    for i, j in _ranges(np.arange(t.n) + 1, ends):
        a, b = order[i], order[j]
        shared = t.shared(a, b)
        keep = shared == 0
        if s.min_mean_iou <= EPS:
            keep |= shared >= max(s.min_covisible, 1)
        yield np.minimum(a[keep], b[keep]) * t.n + np.maximum(a[keep], b[keep])


def candidate_pairs(frames: list[np.ndarray], boxes: list[np.ndarray], apps: list[np.ndarray | None],
                    settings: DuplicateSettings) -> list[tuple[int, int]]:
    """Index pairs ``(i, j)``, ``i < j``, of the tracks given by ``frames`` (each strictly increasing),
    ``boxes`` and ``apps`` (appearance descriptors or ``None``): a superset of the pairs
    ``pair_signals`` gives a reason (module docstring)."""
    if len(frames) < 2:
        return []
    t = _Tracks(frames, boxes, apps)
    found: list[np.ndarray] = []
    keys, sums = _intersecting(t, settings)
    if len(keys):
        a, b = keys // t.n, keys % t.n
        shared = t.shared(a, b)
        mean = sums / np.maximum(shared, 1)
        cos = t.cosine(a, b)
        with np.errstate(invalid="ignore"):
            keep = (((shared >= settings.min_covisible) & (mean >= settings.min_mean_iou - EPS))
                    | ((mean >= APART_IOU - EPS) & (cos >= settings.min_appearance - APPEARANCE_EPS)))
        found.append(keys[keep])
    found.extend(_adjacent_in_time(t, settings))
    found.extend(_alike_in_time(t, settings))
    found.extend(_spans_overlapping(t, settings))
    keys = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
    return list(zip((keys // t.n).tolist(), (keys % t.n).tolist()))

