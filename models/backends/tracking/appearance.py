"""ByteTrack with an appearance term in its first association, DeepSORT-style.

``AppearanceByteTrack`` is supervision's ``ByteTrack`` (its ``STrack``, Kalman filter, thresholds,
lost-track buffer, low-score second association and bookkeeping, as in supervision 0.30) with one
change: each high-score detection comes with a
unit appearance vector (a crop embedded by a frozen network), each track keeps an exponential
moving average of its matched detections' vectors (``ema``, as in StrongSORT, Du et al. 2023), and
the first association is a cascade in the manner of DeepSORT (Wojke et al., ICIP 2017):

1. **appearance and motion**: cost ``(1 - weight) * (1 - IoU * score) + weight * d_cos``, where a
   pair whose cosine distance exceeds ``gate``, or whose ``1 - IoU * score`` of the (buffered)
   boxes exceeds ByteTrack's ``minimum_matching_threshold``, is not allowed (DeepSORT's two gates,
   appearance and motion: appearance chooses among the pairs motion allows, and never joins boxes
   that IoU alone would keep apart); accepted up to that same threshold;
2. **motion alone**: the tracks and detections left over are matched by ByteTrack's own cost
   ``1 - IoU * score``, so a person whose look changes (turning, a shadow) keeps the identity IoU
   alone would have given them.

Low-score detections (the second association) and unconfirmed tracks are matched by IoU as in
ByteTrack. A track's vector is updated from high-score detections only, and only from those whose
box overlaps no other detection of the frame by more than :data:`CLEAN_IOU` (a crop that shows two
people is matched on, but would teach each track the other's look while they stand together). ``update_with_detections`` reports for every output track the
input row it was matched to on this frame (``data["row"]`` kept), not a box re-matched by IoU, so
two people standing in the same place are not swapped on the way out.
"""
from __future__ import annotations

import numpy as np
import supervision as sv
from supervision.tracker.byte_tracker import matching
from supervision.tracker.byte_tracker.core import joint_tracks, remove_duplicate_tracks, sub_tracks
from supervision.tracker.byte_tracker.kalman_filter import KalmanFilter
from supervision.tracker.byte_tracker.single_object_track import STrack, TrackState
from supervision.tracker.byte_tracker.utils import IdCounter

# The appearance embedders a tracker setting may name (``appearance``), with None: IoU only.
APPEARANCE_EMBEDDERS: tuple[str, ...] = ("mobilenetv2-imagenet",)
GATED = 2.0  # the cost of a pair the gates rule out: above every matching threshold (those are <= 1)
CLEAN_IOU = 0.2  # a detection overlapping another one by more IoU than this does not update its track's vector


def cosine_distances(tracks: np.ndarray, detections: np.ndarray) -> np.ndarray:
    """``1 - cos`` between unit rows: tracks [T, d], detections [D, d] -> [T, D] float32."""
    tracks = np.asarray(tracks, np.float32).reshape(len(tracks), -1)          # [T, d]
    detections = np.asarray(detections, np.float32).reshape(len(detections), -1)  # [D, d]
    return (1.0 - tracks @ detections.T).astype(np.float32)                    # [T, D]


def fused_cost(motion: np.ndarray, appearance: np.ndarray, *, weight: float, gate: float,
               motion_gate: float) -> np.ndarray:
    """The first pass's cost (see the module docstring).

    ``motion`` [T, D] ByteTrack's ``1 - IoU * score``; ``appearance`` [T, D] cosine distances.
    Pairs beyond either gate (``appearance > gate``, ``motion > motion_gate``) cost :data:`GATED`.
    """
    cost = (1.0 - weight) * motion + weight * appearance                       # [T, D]
    return np.where((appearance > gate) | (motion > motion_gate), GATED, cost).astype(np.float32)


class AppearanceTrack(STrack):
    """An ``STrack`` with an appearance vector (the EMA of its matches') and the input row it was
    last matched to."""

    def __init__(self, *args, feature: np.ndarray | None, row: int, ema: float, clean: bool = True):
        super().__init__(*args)
        self.feature, self.detection_feature, self.row, self.ema = feature, feature, row, ema
        self.clean = clean                       # this detection's crop shows one person (see CLEAN_IOU)

    def _take(self, new_track: AppearanceTrack) -> None:
        self.row = new_track.row
        new = new_track.detection_feature
        if new is None or (self.feature is not None and not new_track.clean):
            return
        if self.feature is None:
            self.feature = new
            return
        blended = self.ema * self.feature + (1.0 - self.ema) * new                 # [d]
        self.feature = blended / max(float(np.linalg.norm(blended)), 1e-12)

    def update(self, new_track: STrack, frame_id: int) -> None:
        super().update(new_track, frame_id)
        self._take(new_track)

    def re_activate(self, new_track: STrack, frame_id: int) -> None:
        super().re_activate(new_track, frame_id)
        self._take(new_track)


class AppearanceByteTrack:
    """ByteTrack whose first association also weighs appearance (see the module docstring); the
    state has the names of ``sv.ByteTrack``'s (``tracked_tracks``, ``lost_tracks``, ...)."""

    def __init__(self, *, weight: float, gate: float, ema: float, track_activation_threshold: float = 0.25,
                 lost_track_buffer: int = 30, minimum_matching_threshold: float = 0.8, frame_rate: float = 30,
                 minimum_consecutive_frames: int = 1):
        if not 0.0 <= weight <= 1.0:
            raise ValueError(f"appearance weight must be in [0, 1], got {weight!r}")
        if not 0.0 < gate <= 2.0:
            raise ValueError(f"appearance gate must be in (0, 2], got {gate!r}")
        if not 0.0 <= ema < 1.0:
            raise ValueError(f"appearance ema must be in [0, 1), got {ema!r}")
        self.weight, self.gate, self.ema = float(weight), float(gate), float(ema)
        # sv.ByteTrack's settings and state, as its __init__ sets them
        self.track_activation_threshold = track_activation_threshold
        self.minimum_matching_threshold = minimum_matching_threshold
        self.det_thresh = track_activation_threshold + 0.1 if track_activation_threshold + 0.1 <= 1.0 \
            else track_activation_threshold
        self.max_time_lost = int(frame_rate / 30.0 * lost_track_buffer)
        self.minimum_consecutive_frames = minimum_consecutive_frames
        self.kalman_filter, self.shared_kalman = KalmanFilter(), KalmanFilter()
        self.frame_id = 0
        self.tracked_tracks: list[STrack] = []
        self.lost_tracks: list[STrack] = []
        self.removed_tracks: list[STrack] = []
        self.internal_id_counter = IdCounter()
        self.external_id_counter = IdCounter(start_id=1)

    def update_with_detections(self, detections: sv.Detections, features: np.ndarray | None = None) -> sv.Detections:
        """Track ``detections`` with their appearance ``features`` [n, d] (unit rows; None: IoU only).

        Returns the matched detections (input rows, ``data`` kept) with ``tracker_id`` set.
        """
        if detections.confidence is None:
            raise ValueError("Detections confidence must be provided for tracking.")
        if features is not None and len(features) != len(detections):
            raise ValueError(f"{len(features)} appearance features for {len(detections)} detections")
        tensors = np.hstack((detections.xyxy, detections.confidence[:, None])).astype(np.float32)  # [n, 5]
        tracks = self.update_with_features(tensors, features)
        rows = np.array([t.row for t in tracks], dtype=int)                         # [m]
        out = detections[rows] if len(rows) else sv.Detections.empty()
        out.tracker_id = np.array([t.external_track_id for t in tracks], dtype=int)
        return out

    def _tracks(self, tensors: np.ndarray, features: np.ndarray | None, rows: np.ndarray,
                clean: np.ndarray | None = None) -> list[AppearanceTrack]:
        return [AppearanceTrack(STrack.tlbr_to_tlwh(tensors[r, :4]), float(tensors[r, 4]), self.minimum_consecutive_frames,
                                self.shared_kalman, self.internal_id_counter, self.external_id_counter,
                                feature=None if features is None else features[r], row=int(r), ema=self.ema,
                                clean=True if clean is None else bool(clean[r]))
                for r in rows]

    def _first_association(self, pool: list[STrack], detections: list[AppearanceTrack]):
        """Appearance and motion, then motion alone: (matches [(track, det)], unmatched track
        indices, unmatched detection indices)."""
        motion = matching.fuse_score(matching.iou_distance(pool, detections), detections)  # [T, D]
        pairs: list[tuple[int, int]] = []
        left_t, left_d = list(range(len(pool))), list(range(len(detections)))
        with_features = [i for i, t in enumerate(pool) if getattr(t, "feature", None) is not None]
        d_with = [j for j, d in enumerate(detections) if d.detection_feature is not None]
        if with_features and d_with:
            appearance = cosine_distances(np.stack([pool[i].feature for i in with_features]),
                                          np.stack([detections[j].detection_feature for j in d_with]))  # [T', D']
            cost = fused_cost(motion[np.ix_(with_features, d_with)], appearance, weight=self.weight, gate=self.gate,
                              motion_gate=self.minimum_matching_threshold)
            found, _, _ = matching.linear_assignment(cost, thresh=self.minimum_matching_threshold)
            pairs += [(with_features[a], d_with[b]) for a, b in found]
            left_t = [i for i in left_t if i not in {p[0] for p in pairs}]
            left_d = [j for j in left_d if j not in {p[1] for p in pairs}]
        found, u_t, u_d = matching.linear_assignment(motion[np.ix_(left_t, left_d)], thresh=self.minimum_matching_threshold)
        pairs += [(left_t[a], left_d[b]) for a, b in found]
        return pairs, [left_t[a] for a in u_t], [left_d[b] for b in u_d]

    def update_with_features(self, tensors: np.ndarray, features: np.ndarray | None) -> list[STrack]:
        """ByteTrack's ``update_with_tensors`` (supervision 0.30) with the cascade above as its first
        association. ``tensors`` [n, 5] xyxy + score; ``features`` [n, d] or None."""
        self.frame_id += 1
        activated, refound, lost, removed = [], [], [], []
        boxes = tensors[:, :4]                                                       # [n, 4]
        valid = np.isfinite(tensors).all(axis=1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        scores = tensors[:, 4]                                                       # [n]
        high = np.flatnonzero(valid & (scores >= self.track_activation_threshold))
        low = np.flatnonzero(valid & (scores > 0.1) & (scores < self.track_activation_threshold))
        overlap = sv.box_iou_batch(boxes[valid], boxes[valid]) if valid.any() else np.zeros((0, 0))  # [v, v]
        np.fill_diagonal(overlap, 0.0)
        clean = np.ones(len(tensors), bool)                                          # [n]
        clean[valid] = overlap.max(axis=1, initial=0.0) <= CLEAN_IOU
        detections = self._tracks(tensors, features, high, clean)
        unconfirmed = [t for t in self.tracked_tracks if not t.is_activated]
        tracked = [t for t in self.tracked_tracks if t.is_activated]

        # first association: high-score detections, appearance and motion then motion alone
        pool = joint_tracks(tracked, self.lost_tracks)
        STrack.multi_predict(pool, self.shared_kalman)
        pairs, u_track, u_detection = self._first_association(pool, detections)
        for i, j in pairs:
            track = pool[i]
            if track.state == TrackState.Tracked:
                track.update(detections[j], self.frame_id)
                activated.append(track)
            else:
                track.re_activate(detections[j], self.frame_id)
                refound.append(track)

        # second association: low-score detections by IoU, no appearance update
        second = self._tracks(tensors, None, low)
        remaining = [pool[i] for i in u_track if pool[i].state == TrackState.Tracked]
        found, u_remaining, _ = matching.linear_assignment(matching.iou_distance(remaining, second), thresh=0.5)
        for i, j in found:
            remaining[i].update(second[j], self.frame_id)
            activated.append(remaining[i])
        for i in u_remaining:
            if remaining[i].state != TrackState.Lost:
                remaining[i].state = TrackState.Lost
                lost.append(remaining[i])

        # unconfirmed tracks (seen once) against the detections left, by IoU
        detections = [detections[j] for j in u_detection]
        dists = matching.fuse_score(matching.iou_distance(unconfirmed, detections), detections)
        found, u_unconfirmed, u_detection = matching.linear_assignment(dists, thresh=0.7)
        for i, j in found:
            unconfirmed[i].update(detections[j], self.frame_id)
            activated.append(unconfirmed[i])
        for i in u_unconfirmed:
            unconfirmed[i].state = TrackState.Removed
            removed.append(unconfirmed[i])

        # new tracks, then the bookkeeping of supervision's ByteTrack
        for j in u_detection:
            if detections[j].score >= self.det_thresh:
                detections[j].activate(self.kalman_filter, self.frame_id)
                activated.append(detections[j])
        for track in self.lost_tracks:
            if self.frame_id - track.frame_id > self.max_time_lost:
                track.state = TrackState.Removed
                removed.append(track)
        self.tracked_tracks = [t for t in self.tracked_tracks if t.state == TrackState.Tracked]
        self.tracked_tracks = joint_tracks(joint_tracks(self.tracked_tracks, activated), refound)
        self.lost_tracks = sub_tracks(self.lost_tracks, self.tracked_tracks)
        self.lost_tracks.extend(lost)
        self.lost_tracks = sub_tracks(self.lost_tracks, self.removed_tracks)
        self.removed_tracks = removed
        self.tracked_tracks, self.lost_tracks = remove_duplicate_tracks(self.tracked_tracks, self.lost_tracks)
        return [t for t in self.tracked_tracks if t.is_activated]
