"""How well a tracker's trajectories cover the people of a rendered scene (box IoU against the
ground truth's amodal boxes).
"""
from __future__ import annotations

import numpy as np

from models.world.scene import GroundTruth


# -- evaluation helpers --------------------------------------------------------------------------
def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU between every box of ``a`` [n, 4] and of ``b`` [m, 4] (xyxy) -> [n, m]."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    ix = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    iy = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = ix * iy                                                        # [n, m]
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])                     # [n]
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])                     # [m]
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-9)


def people_coverage(gt: GroundTruth, tracks: list[tuple[np.ndarray, np.ndarray]], *, iou: float = 0.5,
                    min_visible: float = 0.5, min_fraction: float = 0.5) -> dict:
    """How many people some single track follows for most of the time they are visible.

    ``tracks`` are ``(frames [N], boxes [N, 4])`` pairs. A person counts as covered when one track
    has a box with IoU >= ``iou`` against the person's box on at least ``min_fraction`` of the
    frames where the person's visible fraction is >= ``min_visible``. Frames a track has no
    observation on count as misses (nothing is interpolated). People never that visible are not
    counted. Returns ``{"covered", "counted", "coverage", "per_person": {id: best fraction}}``.
    """
    per_person: dict[int, float] = {}
    index = []
    for frames, boxes in tracks:
        index.append({int(f): np.asarray(b, np.float64) for f, b in zip(np.asarray(frames).reshape(-1), np.asarray(boxes).reshape(-1, 4))})
    for p in gt.people:
        visible_frames = [f for f in range(gt.n_frames) if p.boxes[f] is not None and p.visible[f] >= min_visible]
        if not visible_frames:
            continue
        best = 0.0
        for obs in index:
            hits = 0
            for f in visible_frames:
                box = obs.get(f)
                if box is not None and box_iou(box, np.asarray(p.boxes[f]))[0, 0] >= iou:
                    hits += 1
            best = max(best, hits / len(visible_frames))
        per_person[p.id] = best
    covered = sum(1 for v in per_person.values() if v >= min_fraction)
    counted = len(per_person)
    return {"covered": covered, "counted": counted, "coverage": covered / counted if counted else float("nan"),
            "per_person": per_person}
