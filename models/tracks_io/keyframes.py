"""Tracks that an annotation tool stores as keyframes, expanded to one box per frame the way the
tool itself shows them (CVAT for video, Label Studio's video rectangles).

A tool stores a track as keyframes sorted by frame. Each keyframe says whether the object is on its
own frame (``shown``) and whether the tool carries it on from there (``carry``): to the next keyframe
by linear interpolation of the tool's own parameters (box corners, or position, size and rotation),
and after the last keyframe by holding it to the end of the video. Each tool maps its flags onto
these two (its parser's docstring says how). Interpolated frames lie on the tool's frame grid
(``step``: CVAT's frame filter), strictly between two keyframes.

An expanded track can be far larger than its file (two keyframes a million frames apart), so the
parsers count the boxes first (:func:`expanded_count`) and refuse a file past ``max_boxes``
(:class:`TooManyBoxes`) before any array is built.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from models.tracks_io.records import ImportedTrack, Problems


@dataclass
class Keyframe:
    """One stored state of a track."""

    frame: int                       # 0-based video frame
    params: tuple[float, ...]        # what the tool interpolates, in its own units
    line: int                        # where the file states it
    shown: bool                      # the object is on this frame
    carry: bool                      # interpolated to the next keyframe (the last: held to the end)
    occluded: bool = False           # the tool marks it occluded (interpolated frames inherit it)


class TooManyBoxes(Exception):
    """The expanded tracks would hold more than ``limit`` boxes (``count`` so far)."""

    def __init__(self, count: int, limit: int):
        super().__init__(f"{count} boxes once expanded, more than {limit}")
        self.count, self.limit = count, limit


def _between(a: Keyframe, b: Keyframe | None, *, step: int, end: int | None) -> int:
    """How many frames the tool fills after ``a`` (before ``b``, or up to ``end`` after the last)."""
    if not a.carry:
        return 0
    if b is not None:
        return max(0, (b.frame - a.frame - 1) // step)
    if end is None or end <= a.frame:
        return 0
    return (end - a.frame) // step


def expanded_count(keyframes: list[Keyframe], *, step: int = 1, end: int | None = None) -> int:
    """Boxes of the track once expanded (``keyframes`` sorted by frame, frames distinct)."""
    total = 0
    for i, a in enumerate(keyframes):
        b = keyframes[i + 1] if i + 1 < len(keyframes) else None
        total += int(a.shown) + _between(a, b, step=step, end=end)
    return total


@dataclass
class Expanded:
    frames: np.ndarray        # int64 [N], strictly increasing
    params: np.ndarray        # float64 [N, P]
    lines: np.ndarray         # int64 [N], each box's line: a filled box's is the keyframe's it moves
                              # towards (where a box that leaves the frame is headed), a held one the last's
    occluded: np.ndarray      # bool [N]
    filled: np.ndarray        # bool [N]: interpolated or held, not stated by the file


def expand(keyframes: list[Keyframe], *, step: int = 1, end: int | None = None) -> Expanded:
    """The track on every frame the tool shows it (see the module docstring): the keyframes it
    shows as they are, the frames it fills a segment at a time, in arrays."""
    n_params = len(keyframes[0].params) if keyframes else 0
    shown = [k for k in keyframes if k.shown]
    frames = [np.array([k.frame for k in shown], np.int64)]                          # [S]
    params = [np.array([k.params for k in shown], np.float64).reshape(-1, n_params)]  # [S, P]
    lines = [np.array([k.line for k in shown], np.int64)]                            # [S]
    occluded = [np.array([k.occluded for k in shown], bool)]                         # [S]
    for i, a in enumerate(keyframes):
        b = keyframes[i + 1] if i + 1 < len(keyframes) else None
        n = _between(a, b, step=step, end=end)
        if n == 0:
            continue
        p0 = np.asarray(a.params, np.float64)                                        # [P]
        f = a.frame + step * np.arange(1, n + 1, dtype=np.int64)                     # [n]
        if b is not None:
            t = (f - a.frame) / (b.frame - a.frame)                                  # [n] in (0, 1)
            p = p0[None, :] + (np.asarray(b.params, np.float64) - p0)[None, :] * t[:, None]   # [n, P]
        else:
            p = np.repeat(p0[None, :], n, axis=0)                                    # [n, P]
        frames.append(f)
        params.append(p)
        lines.append(np.full(n, (b or a).line, np.int64))
        occluded.append(np.full(n, a.occluded))
    filled = np.concatenate([np.zeros(len(shown), bool)] + [np.ones(len(f), bool) for f in frames[1:]])  # [N]
    frames_all = np.concatenate(frames)                                              # [N]
    order = np.argsort(frames_all, kind="stable")                                    # frames are distinct
    return Expanded(frames_all[order], np.concatenate(params)[order], np.concatenate(lines)[order],
                    np.concatenate(occluded)[order], filled[order])


def sorted_keyframes(keyframes: list[Keyframe], *, track: str, problems: Problems,
                     frame_base: int = 0) -> list[Keyframe]:
    """``keyframes`` by frame; a frame stated twice is a problem on its second line (dropped from
    the result, which is then refused anyway). ``frame_base``: how the file numbers frames."""
    ordered = sorted(keyframes, key=lambda k: (k.frame, k.line))
    kept: list[Keyframe] = []
    for k in ordered:
        if kept and kept[-1].frame == k.frame:
            problems.add(k.line, f"{track} states frame {k.frame + frame_base} twice (first on line {kept[-1].line})")
            continue
        kept.append(k)
    return kept


def past_video(keyframes: list[Keyframe], *, frame_count: int | None, frame_base: int, track: str,
               problems: Problems) -> bool:
    """Whether a keyframe lies past the video's last frame (each one a problem on its line), so
    nothing is interpolated towards it."""
    if frame_count is None:
        return False
    past = [k for k in keyframes if k.frame >= frame_count]
    for k in past:
        problems.add(k.line, f"{track}: frame {k.frame + frame_base} is past the video's last frame "
                             f"{frame_count - 1 + frame_base} ({frame_count} frames"
                             + (f", numbered from {frame_base} in this file)" if frame_base else ")"))
    return bool(past)


class Budget:
    """The boxes the expanded tracks of one file may hold, spent track by track."""

    def __init__(self, limit: int | None):
        self.limit, self.spent = limit, 0

    def spend(self, count: int) -> None:
        self.spent += count
        if self.limit is not None and self.spent > self.limit:
            raise TooManyBoxes(self.spent, self.limit)


def expanded_track(keyframes: list[Keyframe], *, track_id: int, category: str, to_boxes: Callable,
                   step: int = 1, end: int | None = None) -> tuple[ImportedTrack | None, dict[str, int]]:
    """The :class:`ImportedTrack` of ``keyframes`` with boxes ``to_boxes(params [N, P]) -> [N, 4]``
    (``None`` when the tool shows it on no frame), and what was counted: ``interpolated`` (boxes the
    file does not state) and ``occluded`` (boxes marked occluded)."""
    out = expand(keyframes, step=step, end=end)
    if len(out.frames) == 0:
        return None, {}
    track = ImportedTrack(track_id=track_id, category=category, frames=out.frames, boxes=to_boxes(out.params),
                          scores=np.ones(len(out.frames)), lines=out.lines)
    return track, {"interpolated": int(out.filled.sum()), "occluded": int(out.occluded.sum())}


def add_counts(total: dict[str, int], counts: dict[str, int]) -> None:
    for key, value in counts.items():
        if value:
            total[key] = total.get(key, 0) + value


def rotated_hull(cx: np.ndarray, cy: np.ndarray, corners_x: np.ndarray, corners_y: np.ndarray,
                 degrees: np.ndarray) -> np.ndarray:
    """The axis-aligned box around corners ``(corners_x, corners_y)`` [N, 4] (offsets from the
    pivot ``(cx, cy)`` [N]) rotated by ``degrees`` [N] clockwise on screen (y pointing down)."""
    theta = np.deg2rad(degrees)[:, None]                                             # [N, 1]
    xs = cx[:, None] + corners_x * np.cos(theta) - corners_y * np.sin(theta)         # [N, 4]
    ys = cy[:, None] + corners_x * np.sin(theta) + corners_y * np.cos(theta)         # [N, 4]
    return np.stack([xs.min(1), ys.min(1), xs.max(1), ys.max(1)], axis=1)           # [N, 4]
