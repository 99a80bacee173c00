"""Does a tracks file belong to the video it is imported onto? What the outright checks
(:func:`~models.tracks_io.records.check_against_video`) let through but a person should confirm,
and the boxes of the file's first frames to show over the video's frames.

A file made for another video often passes the outright checks once its boxes are clipped: the
TUD-Campus ground truth (640x480, 71 frames) fits inside a 640x360, 120-frame video when 275 of its
359 boxes are cut at the bottom edge. Two findings catch it, each with the numbers a person needs:

- ``boxes_outside``: more than ``MAX_SHARE_PAST`` of the boxes reach past the frame, or the file's
  boxes reach past an edge by more than ``MAX_OVERSHOOT`` of the frame's width or height. Ground
  truth of the video itself has people half out of view at the edges (TUD-Campus on its own frame:
  5% of boxes, at most 41 px = 6% of its width), so neither alone is a finding.
- ``frames_short``: candidate tracks (not annotated tubes, which cover events) that end before
  ``MIN_FRAME_SHARE`` of the video's frames.

Both work on the boxes as the file gives them (call them before clipping).
"""
from __future__ import annotations

import numpy as np

from models.tracks_io.records import EDGE_TOLERANCE, ParsedTracks

MAX_SHARE_PAST = 0.2       # share of boxes reaching past the frame
MAX_OVERSHOOT = 0.15       # how far past an edge, as a share of the frame's width or height
MIN_FRAME_SHARE = 0.8      # candidate tracks end on or after this share of the video's frames
PREVIEW_FRAMES = 3         # frames with boxes the preview shows
PREVIEW_BOXES = 200        # boxes per preview frame at most


def _all_boxes(parsed: ParsedTracks) -> np.ndarray:
    return np.concatenate([t.boxes for t in parsed.tracks]) if parsed.tracks else np.zeros((0, 4))  # [N, 4]


def file_extent(parsed: ParsedTracks) -> dict:
    """The frames and the area the file's boxes span, in the file's own numbering of frames."""
    boxes = _all_boxes(parsed)                                                       # [N, 4]
    first = min(int(t.frames[0]) for t in parsed.tracks)
    last = max(int(t.frames[-1]) for t in parsed.tracks)
    return {"first_frame": first + parsed.frame_base, "last_frame": last + parsed.frame_base,
            "box_extent": [round(float(v), 2) for v in (boxes[:, 0].min(), boxes[:, 1].min(),
                                                         boxes[:, 2].max(), boxes[:, 3].max())]}


def fit_findings(parsed: ParsedTracks, *, width: int, height: int, frame_count: int,
                 candidates: bool = True) -> list[dict]:
    """The findings (``code``, ``message``, and the numbers behind it) that call for a person's
    confirmation before ``parsed`` is imported onto a ``width`` x ``height`` video of
    ``frame_count`` frames; ``candidates``: the file holds candidate tracks, not event tubes."""
    boxes = _all_boxes(parsed)                                                       # [N, 4]
    findings: list[dict] = []
    past = ((boxes[:, 0] < -EDGE_TOLERANCE) | (boxes[:, 1] < -EDGE_TOLERANCE)
            | (boxes[:, 2] > width + EDGE_TOLERANCE) | (boxes[:, 3] > height + EDGE_TOLERANCE))  # [N]
    overshoot = max(-boxes[:, 0].min() / width, -boxes[:, 1].min() / height,
                    boxes[:, 2].max() / width - 1, boxes[:, 3].max() / height - 1)
    share = float(past.mean())
    if share > MAX_SHARE_PAST or overshoot > MAX_OVERSHOOT:
        x1, y1, x2, y2 = boxes[:, 0].min(), boxes[:, 1].min(), boxes[:, 2].max(), boxes[:, 3].max()
        findings.append({
            "code": "boxes_outside", "count": int(past.sum()), "total": len(boxes),
            "message": (f"{int(past.sum())} of {len(boxes)} boxes reach past the video's {width}x{height} frame "
                        f"(the file's boxes span x {x1:.0f} to {x2:.0f}, y {y1:.0f} to {y2:.0f}, up to "
                        f"{overshoot:.0%} past an edge): the file may belong to a video of another size")})
    last = max(int(t.frames[-1]) for t in parsed.tracks)
    if candidates and last + 1 < MIN_FRAME_SHARE * frame_count:
        base = parsed.frame_base
        findings.append({
            "code": "frames_short", "last_frame": last + base, "frame_count": frame_count,
            "message": (f"the file's tracks end on frame {last + base} (numbered from {base}) but the video has "
                        f"{frame_count} frames: they cover {(last + 1) / frame_count:.0%} of it, so the file may "
                        "belong to a shorter video")})
    return findings


def preview_frames(parsed: ParsedTracks, *, frames: int = PREVIEW_FRAMES,
                   max_boxes: int = PREVIEW_BOXES) -> list[dict]:
    """The first ``frames`` frames that hold boxes, each with its boxes as the file gives them
    (``frame`` is the video's 0-based index; ``box`` is ``x1, y1, x2, y2`` in pixels)."""
    firsts = sorted({int(f) for t in parsed.tracks for f in t.frames[:frames]})[:frames]
    out = []
    for frame in firsts:
        boxes = []
        for t in parsed.tracks:
            i = int(np.searchsorted(t.frames, frame))
            if i < len(t.frames) and t.frames[i] == frame and len(boxes) < max_boxes:
                boxes.append({"track_id": int(t.track_id), "category": t.category,
                              "box": [round(float(v), 2) for v in t.boxes[i]]})
        out.append({"frame": frame, "boxes": boxes})
    return out


__all__ = ["file_extent", "fit_findings", "preview_frames"]
