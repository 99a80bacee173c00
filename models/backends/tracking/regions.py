"""Where a detector looks: regions of a frame around moving things and around earlier detections.

A sliding-window detector's cost grows with the pixels it scans. On a static camera most of a
frame is background that did not change, so the HOG people detector can scan only

- the foreground blobs of a background model (:class:`MotionBlobs`: OpenCV's MOG2 on a copy of
  the frame shrunk ``downscale`` times; a walker, but also a waving flag or a shadow), and
- the boxes it found on the frames before (people who stand still fade into the background),

each grown to the room a person of that size needs (:func:`person_regions`), overlapping ones
merged (:func:`merge_regions`). What it misses there (a person who was standing still before the
detector started looking) is found by a scan of the whole frame every so often; the detector
decides when (:class:`models.backends.tracking.detectors.HogPersonDetector`).

Boxes here are ``[x1, y1, x2, y2]`` float64 in original-frame pixels.
"""
from __future__ import annotations

import cv2
import numpy as np

_SQUARE = np.ones((3, 3), np.uint8)


class MotionBlobs:
    """Foreground blobs of a MOG2 background model run on shrunk frames.

    Frames come in the order of the video (gaps are fine); :meth:`reset` before another video.
    The model starts empty and learns with OpenCV's automatic rate (1/frames seen, then
    1/``history``), so on the first frames everything is foreground.
    """

    def __init__(self, downscale: int, var_threshold: float, history: int = 100):
        if not (isinstance(downscale, int) and not isinstance(downscale, bool) and downscale >= 1):
            raise ValueError(f"downscale must be an int >= 1, got {downscale!r}")
        if not (isinstance(var_threshold, (int, float)) and var_threshold > 0):
            raise ValueError(f"var_threshold must be a number > 0, got {var_threshold!r}")
        self.downscale, self.var_threshold, self.history = downscale, float(var_threshold), int(history)
        self.reset()

    def reset(self) -> None:
        self._mog = cv2.createBackgroundSubtractorMOG2(history=self.history, varThreshold=self.var_threshold,
                                                       detectShadows=False)
        self.size: tuple[int, int] | None = None

    def update(self, frame_bgr: np.ndarray, min_area: float = 1.0) -> np.ndarray:
        """Learn from one frame and return its foreground blobs [n, 4] (blobs of fewer than
        ``min_area`` shrunk pixels are dropped)."""
        height, width = frame_bgr.shape[:2]
        if self.size is None:
            self.size = (height, width)
        elif self.size != (height, width):
            raise ValueError(f"frame size {width}x{height} differs from the first frame's "
                             f"{self.size[1]}x{self.size[0]}; reset() before another video")
        d = self.downscale
        small = frame_bgr if d == 1 else cv2.resize(frame_bgr, (max(1, width // d), max(1, height // d)),
                                                     interpolation=cv2.INTER_AREA)
        mask = (self._mog.apply(small) == 255).astype(np.uint8)                 # [h, w] 0/1
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, _SQUARE)                 # drop speckle, rain streaks
        mask = cv2.dilate(mask, _SQUARE)                                        # join a body's parts
        _, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
        stats = stats[1:]                                                       # [n, 5] x, y, w, h, area
        stats = stats[stats[:, 4] >= min_area]
        sx, sy = width / small.shape[1], height / small.shape[0]
        x, y, w, h = (stats[:, k].astype(np.float64) for k in range(4))
        return np.stack([x * sx, y * sy, (x + w) * sx, (y + h) * sy], axis=1).reshape(-1, 4)


def person_regions(boxes: np.ndarray, *, min_height: float, margin: float, width: int, height: int) -> np.ndarray:
    """Each box [n, 4] grown to where a person it belongs to could be: a box less tall than
    ``min_height`` counts as that tall (part of a person), and every side moves out by ``margin``
    times that height; clipped to the frame. Returns [n, 4]."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)                   # [n, 4]
    tall = np.maximum(boxes[:, 3] - boxes[:, 1], float(min_height))        # [n]
    pad = float(margin) * tall                                             # [n]
    cy = (boxes[:, 1] + boxes[:, 3]) / 2                                   # [n]
    out = np.stack([boxes[:, 0] - pad, cy - tall / 2 - pad, boxes[:, 2] + pad, cy + tall / 2 + pad], axis=1)
    out[:, [0, 2]] = np.clip(out[:, [0, 2]], 0, width)
    out[:, [1, 3]] = np.clip(out[:, [1, 3]], 0, height)
    return out


def merge_regions(boxes: np.ndarray) -> np.ndarray:
    """Merge overlapping boxes [n, 4] where their bounding box is no larger than the two together
    (so no pixel is scanned twice where one region would do, and no empty corner is scanned for
    nothing), until no such pair is left. Returns [m, 4], m <= n, ordered by (y1, x1); the result
    covers every input box."""
    regions = [tuple(map(float, b)) for b in np.asarray(boxes, np.float64).reshape(-1, 4)]

    def area(r) -> float:
        return (r[2] - r[0]) * (r[3] - r[1])

    merged = True
    while merged:
        merged = False
        out: list[tuple[float, ...]] = []
        for r in regions:
            for k, q in enumerate(out):
                if r[0] < q[2] and q[0] < r[2] and r[1] < q[3] and q[1] < r[3]:
                    union = (min(r[0], q[0]), min(r[1], q[1]), max(r[2], q[2]), max(r[3], q[3]))
                    if area(union) <= area(r) + area(q):
                        out[k], merged = union, True
                        break
            else:
                out.append(r)
        regions = out
    regions.sort(key=lambda r: (r[1], r[0]))
    return np.asarray(regions, np.float64).reshape(-1, 4)


def scanned_fraction(regions: np.ndarray, width: int, height: int) -> float:
    """The area of ``regions`` [n, 4] over the frame's (overlaps counted as often as scanned)."""
    r = np.asarray(regions, np.float64).reshape(-1, 4)
    return float(np.sum((r[:, 2] - r[:, 0]) * (r[:, 3] - r[:, 1]))) / float(width * height)
