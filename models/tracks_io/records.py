"""What every track format parses into, and the checks every import passes.

A parser turns a file into rows (one box of one track on one frame, with the line it came from),
then :func:`assemble` groups them into :class:`ImportedTrack` records sorted by frame, refusing a
track id that appears twice on one frame. :func:`check_against_video` then checks the tracks
against the video they are imported onto: frame numbers past its last frame and boxes outside its
frame are refused (or, with ``clip``, boxes partly outside are clipped and only those wholly
outside are refused). Every refusal carries the line number; nothing is half-accepted.

Frame indices here are the platform's: 0-based physical frame indices. Boxes are ``x1, y1, x2, y2``
in original-image pixels (float64 here, stored as float32).
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from models.text import INT32_MAX, INT32_MIN, int_problem, text_problem

FORMATS = ("mot", "json", "csv", "cvat", "labelstudio")
MAX_PROBLEMS = 20          # a refusal lists at most this many problems (the first ones in the file)
EDGE_TOLERANCE = 1e-3      # pixels a box may poke past the frame edge (float rounding)
# What the stored records hold (trajectories.models.Trajectory): track ids in an integer column,
# frames as int32, scores as float32. A number outside them is refused with its line.
TRACK_ID_MAX = INT32_MAX
SCORE_MAX = float(np.finfo(np.float32).max)
MAX_NUMBER_CHARS = 64      # a number written with more characters is refused unread
MAX_TEXT_CHARS = 5000      # a caption or category longer than this is refused
_NUMERAL = re.compile(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?")


def shown(value, limit: int = 40) -> str:
    """``value`` as a message quotes it: its ``repr`` (escapes NULs and lone surrogates), cut to
    ``limit`` characters, so a huge or hostile value is never echoed whole."""
    text = repr(value.strip() if isinstance(value, str) else value)
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text)} characters)"


def stored_text_problem(value: str, *, what: str) -> str | None:
    """Why ``value`` cannot be stored as the text ``what`` (``models.text``: no NUL, no lone
    surrogate), or is longer than ``MAX_TEXT_CHARS``; ``None`` when it can."""
    problem = text_problem(value)
    if problem is not None:
        return f"{what} {problem}"
    if len(value) > MAX_TEXT_CHARS:
        return f"{what} is longer than {MAX_TEXT_CHARS} characters"
    return None


def track_id_problem(value: int, *, column: str) -> str | None:
    """Why ``value`` is no track id the database stores (a whole number from 0 to 2^31 - 1), or ``None``."""
    problem = int_problem(value, min_value=0, max_value=TRACK_ID_MAX)
    return None if problem is None else f"{column} {shown(value)} is out of range: a track id {problem}"


class TracksFormatError(ValueError):
    """A file that cannot be imported. ``problems`` are ``(line, message)`` pairs, first ones first;
    line 0 means the file as a whole."""

    def __init__(self, problems: list[tuple[int, str]], *, what: str = "file"):
        self.problems = list(problems)
        line, message = self.problems[0]
        where = f"line {line}: " if line else ""
        more = f" (and {len(self.problems) - 1} more problem(s))" if len(self.problems) > 1 else ""
        super().__init__(f"{what}: {where}{message}{more}")
        self.first_line = line


class Problems:
    """Collects ``(line, message)`` problems up to ``MAX_PROBLEMS``; :meth:`raise_if_any` refuses."""

    def __init__(self, what: str = "file"):
        self.items: list[tuple[int, str]] = []
        self.what = what

    def add(self, line: int, message: str) -> None:
        if len(self.items) < MAX_PROBLEMS:
            self.items.append((int(line), message))

    @property
    def full(self) -> bool:
        return len(self.items) >= MAX_PROBLEMS

    def raise_if_any(self) -> None:
        if self.items:
            raise TracksFormatError(sorted(self.items), what=self.what)


@dataclass
class Row:
    """One box of one track on one frame, as read from ``line``."""

    track_id: int
    frame: int                                 # 0-based
    box: tuple[float, float, float, float]     # x1, y1, x2, y2
    line: int
    score: float = 1.0
    category: str = "person"


@dataclass
class ImportedTrack:
    track_id: int
    category: str
    frames: np.ndarray                         # int64 [N], strictly increasing, 0-based
    boxes: np.ndarray                          # float64 [N, 4] xyxy
    scores: np.ndarray                         # float64 [N]
    lines: np.ndarray                          # int64 [N], the source line of each box
    caption: str = ""                          # an annotation's caption (tube formats only)

    @property
    def n_obs(self) -> int:
        return len(self.frames)


@dataclass
class ParsedTracks:
    format: str                                # one of FORMATS
    tracks: list[ImportedTrack]
    n_rows: int                                # boxes read (skipped rows excluded)
    skipped: dict[str, int] = field(default_factory=dict)   # rows left out on purpose, by reason
    noted: dict[str, int] = field(default_factory=dict)     # boxes kept with a note (interpolated, occluded, ...)
    meta: dict = field(default_factory=dict)   # what the file says about itself (e.g. seqinfo, video size)
    declared_video: dict = field(default_factory=dict)      # width/height/frame_count the file declares
    declared_line: int = 0                     # where it declares them
    frame_base: int = 0                        # how the file numbers frames (MOTChallenge: 1), for messages


def finite_number(text, *, line: int, column: str, problems: Problems, integer: bool = False):
    """``text`` (a cell's text, or a number a JSON file holds) as a finite float, or as an int in the
    int32 range of the stored frames and ids when ``integer``; a problem and ``None`` otherwise."""
    if type(text) is str and len(text) <= MAX_NUMBER_CHARS:     # the common case, kept fast
        try:
            value = float(text)
        except ValueError:
            problems.add(line, f"{column} is not a number: {shown(text)}")
            return None
        if not integer and math.isfinite(value):
            return value
    elif isinstance(text, bool):
        problems.add(line, f"{column} is not a number: {shown(text)}")
        return None
    elif isinstance(text, str) and len(text.strip()) > MAX_NUMBER_CHARS:
        kind = "is out of range" if _NUMERAL.fullmatch(text.strip()) else "is not a number"
        problems.add(line, f"{column} {kind}: {shown(text)}")
        return None
    else:
        try:
            value = float(text)
        except (TypeError, ValueError):
            problems.add(line, f"{column} is not a number: {shown(text)}")
            return None
        except OverflowError:                                 # an integer no float holds
            problems.add(line, f"{column} is out of range: {shown(text)}")
            return None
    if not math.isfinite(value):
        problems.add(line, f"{column} is not a finite number: {shown(text)}")
        return None
    if integer:
        if value != int(value):
            problems.add(line, f"{column} must be a whole number, got {shown(text)}")
            return None
        problem = int_problem(int(value), min_value=INT32_MIN, max_value=INT32_MAX)
        if problem is not None:
            problems.add(line, f"{column} {shown(text)} is out of range: it {problem}")
            return None
        return int(value)
    return value


def score_number(text, *, line: int, column: str, problems: Problems):
    """A finite score that float32 (the stored scores) holds; a problem and ``None`` otherwise."""
    value = finite_number(text, line=line, column=column, problems=problems)
    if value is not None and abs(value) > SCORE_MAX:
        problems.add(line, f"{column} {shown(text)} is out of range: scores are stored as 32-bit floats")
        return None
    return value


def box_row(values: dict, *, line: int, problems: Problems) -> tuple[float, float, float, float] | None:
    """An ``x1, y1, x2, y2`` box from already finite numbers; an empty or inverted box is a problem."""
    x1, y1, x2, y2 = (values[k] for k in ("x1", "y1", "x2", "y2"))
    if x2 <= x1 or y2 <= y1:
        problems.add(line, f"box [{x1:g}, {y1:g}, {x2:g}, {y2:g}] is empty or inverted (width and height must be > 0)")
        return None
    return (x1, y1, x2, y2)


def assemble(rows: Iterable[Row], *, problems: Problems, captions: dict[int, str] | None = None,
             categories: dict[int, str] | None = None) -> list[ImportedTrack]:
    """Group rows by track id, sort each track by frame, refuse a track id seen twice on one frame
    and a track whose rows name different categories."""
    by_track: dict[int, list[Row]] = {}
    for row in rows:
        by_track.setdefault(row.track_id, []).append(row)
    tracks = []
    for track_id in sorted(by_track):
        group = sorted(by_track[track_id], key=lambda r: (r.frame, r.line))
        seen: dict[int, int] = {}
        kept: list[Row] = []
        for r in group:
            if r.frame in seen:
                problems.add(r.line, f"track {track_id} appears twice on frame {r.frame} (first on line {seen[r.frame]})")
                continue
            seen[r.frame] = r.line
            kept.append(r)
        names = {r.category for r in kept}
        if len(names) > 1:
            problems.add(kept[0].line, f"track {track_id} mixes categories {sorted(names)}")
            continue
        if not kept:
            continue
        category = (categories or {}).get(track_id) or kept[0].category
        tracks.append(ImportedTrack(
            track_id=track_id, category=category,
            frames=np.array([r.frame for r in kept], np.int64),
            boxes=np.array([r.box for r in kept], np.float64).reshape(-1, 4),
            scores=np.array([r.score for r in kept], np.float64),
            lines=np.array([r.line for r in kept], np.int64),
            caption=(captions or {}).get(track_id, "")))
    return tracks


def check_against_video(parsed: ParsedTracks, *, width: int, height: int, frame_count: int,
                        clip: bool = False) -> dict[str, int]:
    """Refuse (``TracksFormatError``) frames past the video and boxes outside its frame, with line
    numbers; with ``clip``, boxes partly outside are clipped in place (their count is returned as
    ``clipped``) and boxes with no area inside the frame are still refused. A size the file
    declares must be the video's. Returns counts of what was changed."""
    problems = Problems("checked against the video")
    declared = parsed.declared_video
    for key, actual in (("width", width), ("height", height), ("frame_count", frame_count)):
        if key in declared and int(declared[key]) != int(actual):
            problems.add(parsed.declared_line, f"the file declares {key} {declared[key]} but the video has {actual}")
    clipped = 0
    for t in parsed.tracks:
        past = np.flatnonzero((t.frames < 0) | (t.frames >= frame_count))
        for i in past[:MAX_PROBLEMS]:
            base = parsed.frame_base
            problems.add(int(t.lines[i]), f"track {t.track_id}: frame {int(t.frames[i]) + base} is past the "
                                          f"video's last frame {frame_count - 1 + base} ({frame_count} frames"
                                          + (f", numbered from {base} in this file)" if base else ")"))
        b = t.boxes
        outside = ((b[:, 0] < -EDGE_TOLERANCE) | (b[:, 1] < -EDGE_TOLERANCE)
                   | (b[:, 2] > width + EDGE_TOLERANCE) | (b[:, 3] > height + EDGE_TOLERANCE))
        if clip and outside.any():
            inside = b.copy()
            inside[:, [0, 2]] = inside[:, [0, 2]].clip(0, width)
            inside[:, [1, 3]] = inside[:, [1, 3]].clip(0, height)
            empty = (inside[:, 2] <= inside[:, 0]) | (inside[:, 3] <= inside[:, 1])
            for i in np.flatnonzero(outside & empty)[:MAX_PROBLEMS]:
                problems.add(int(t.lines[i]), f"track {t.track_id}: box {np.round(b[i], 2).tolist()} on frame "
                                              f"{int(t.frames[i])} lies wholly outside the {width}x{height} frame")
            clipped += int((outside & ~empty).sum())
            t.boxes = np.where(outside[:, None] & ~empty[:, None], inside, b)
        elif outside.any():
            for i in np.flatnonzero(outside)[:MAX_PROBLEMS]:
                problems.add(int(t.lines[i]), f"track {t.track_id}: box {np.round(b[i], 2).tolist()} on frame "
                                              f"{int(t.frames[i])} lies outside the {width}x{height} frame"
                                              " (import with clipping to clip boxes partly outside)")
    problems.raise_if_any()
    return {"clipped": clipped}
