"""The SAM 2 tracker's pure helpers (no model): which frames are anchors, compact mask crops and
their IoU, and the merge of provisional (anchor, object) identities into track proposals (greedy,
best pairs first, by the median mask IoU over shared frames).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from models.backends.tracking.base import (
    TrackProposal,
)


# -- pure helpers (no model) -----------------------------------------------------------------------
def anchor_frames(frame_count: int, stride: int, max_anchors: int) -> list[int]:
    """Anchor frames of a video: 0, stride, 2*stride, ...; evenly spread if that is too many."""
    if frame_count <= 0:
        return []
    frames = list(range(0, frame_count, stride))
    if len(frames) > max_anchors:
        spread = np.linspace(0, frame_count - 1, max_anchors).round().astype(int)
        frames = sorted(set(spread.tolist()))
    return frames


@dataclass
class MaskCrop:
    """A binary mask stored as its bounding-box crop on a fixed grid (the model's mask grid)."""

    y0: int
    x0: int
    bits: np.ndarray  # [h, w] bool

    @property
    def area(self) -> int:
        return int(self.bits.sum())

    @classmethod
    def from_mask(cls, mask: np.ndarray) -> MaskCrop | None:
        ys, xs = np.nonzero(mask)
        if len(ys) == 0:
            return None
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        return cls(int(y0), int(x0), np.ascontiguousarray(mask[y0:y1, x0:x1], dtype=bool))


def mask_iou(a: MaskCrop | None, b: MaskCrop | None) -> float:
    """IoU of two cropped masks on the same grid (0 when either is empty)."""
    if a is None or b is None:
        return 0.0
    ya, xa = max(a.y0, b.y0), max(a.x0, b.x0)
    yb = min(a.y0 + a.bits.shape[0], b.y0 + b.bits.shape[0])
    xb = min(a.x0 + a.bits.shape[1], b.x0 + b.bits.shape[1])
    inter = 0
    if yb > ya and xb > xa:
        sa = a.bits[ya - a.y0:yb - a.y0, xa - a.x0:xb - a.x0]
        sb = b.bits[ya - b.y0:yb - b.y0, xa - b.x0:xb - b.x0]
        inter = int(np.logical_and(sa, sb).sum())
    union = a.area + b.area - inter
    return inter / union if union > 0 else 0.0


@dataclass
class Observation:
    box: np.ndarray            # [4] float32 xyxy, original pixels
    score: float               # object-presence probability
    mask: MaskCrop | None      # the mask on the model's low-res grid (for identity merging)


@dataclass
class AnchorIdentity:
    """One object prompted on one anchor frame, with its observations (frame -> Observation)."""

    pid: int
    anchor: int
    category: str
    observations: dict[int, Observation] = field(default_factory=dict)


def merge_anchor_identities(identities: list[AnchorIdentity], merge_iou: float) -> list[TrackProposal]:
    """Merge identities from different anchors that are the same object; return proposals.

    Two identities of one category from different anchors are candidates when they share
    observed frames; their agreement is the median mask IoU over those frames. Candidates with
    agreement >= ``merge_iou`` are joined greedily, best first, and a join that would put two
    identities of the same anchor into one track is skipped. On a frame covered by several
    members the member with the nearest anchor wins (then the higher score, then the lower id).
    A track takes the smallest member id; identities without observations are dropped.
    """
    live = sorted((i for i in identities if i.observations), key=lambda i: i.pid)
    pairs = []
    for ia, a in enumerate(live):
        for b in live[ia + 1:]:
            if a.anchor == b.anchor or a.category != b.category:
                continue
            shared = sorted(set(a.observations) & set(b.observations))
            if not shared:
                continue
            ious = [mask_iou(a.observations[f].mask, b.observations[f].mask) for f in shared]
            agreement = float(np.median(ious))
            if agreement >= merge_iou:
                pairs.append((-agreement, a.pid, b.pid))
    parent = {i.pid: i.pid for i in live}
    anchors = {i.pid: {i.anchor} for i in live}

    def root(pid: int) -> int:
        while parent[pid] != pid:
            parent[pid] = parent[parent[pid]]
            pid = parent[pid]
        return pid

    for _, pa, pb in sorted(pairs):
        ra, rb = root(pa), root(pb)
        if ra == rb or anchors[ra] & anchors[rb]:
            continue
        keep, gone = min(ra, rb), max(ra, rb)
        parent[gone] = keep
        anchors[keep] |= anchors.pop(gone)

    groups: dict[int, list[AnchorIdentity]] = {}
    for ident in live:
        groups.setdefault(root(ident.pid), []).append(ident)
    proposals = []
    for track_id in sorted(groups):
        members = groups[track_id]
        frames = sorted(set().union(*(m.observations for m in members)))
        boxes, scores = [], []
        for f in frames:
            best = min(
                (m for m in members if f in m.observations),
                key=lambda m: (abs(f - m.anchor), -m.observations[f].score, m.pid),
            )
            boxes.append(best.observations[f].box)
            scores.append(best.observations[f].score)
        proposals.append(TrackProposal(
            track_id=track_id,
            category=members[0].category,
            frames=np.asarray(frames, dtype=np.int32),
            boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
            scores=np.asarray(scores, dtype=np.float32),
            extra={"anchors": sorted({m.anchor for m in members}),
                   "members": [m.pid for m in members]},
        ))
    return proposals
