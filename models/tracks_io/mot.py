"""MOTChallenge sequences: ``gt/gt.txt`` or a tracker's output file, ``seqinfo.ini``, and the
frames (``img1/``) or a video next to them.

Each line is ``frame, id, bb_left, bb_top, bb_width, bb_height, ...`` with 1-based frame numbers
and 1-based pixel coordinates. A ground-truth file (``gt=True``) has 9 columns (MOT16/17/20:
``..., considered, class, visibility``) or 10 (MOT15: ``..., considered, -1, -1, -1``); rows whose
``considered`` flag is 0 are skipped and counted. A tracker's output has 7 to 10 columns
(``..., conf[, x, y, z]``). Boxes become ``x1 = bb_left - 1``, ``y1 = bb_top - 1``,
``x2 = x1 + width``, ``y2 = y1 + height`` on frame index ``frame - 1``.
"""
from __future__ import annotations

import configparser
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from models.text import INT32_MAX
from models.tracks_io.records import (
    ImportedTrack,
    ParsedTracks,
    Problems,
    Row,
    TracksFormatError,
    assemble,
    box_row,
    finite_number,
    score_number,
    shown,
    stored_text_problem,
)

# MOT16/17/20 ground-truth classes (the ``class`` column).
MOT_CLASSES = {1: "person", 2: "person_on_vehicle", 3: "car", 4: "bicycle", 5: "motorbike",
               6: "non_motorized_vehicle", 7: "static_person", 8: "distractor", 9: "occluder",
               10: "occluder_on_ground", 11: "occluder_full", 12: "reflection"}
SEQINFO_KEYS = {"name": str, "imDir": str, "frameRate": float, "seqLength": int, "imWidth": int,
                "imHeight": int, "imExt": str}
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")
# The columns after the box: ground truth (MOT16/17/20, MOT15) and a tracker's output.
GT_COLUMNS = {9: ("considered", "class", "visibility"), 10: ("considered", "x", "y", "z")}
TRACKER_COLUMNS = ("conf", "x", "y", "z")


def parse_mot(text: str, *, gt: bool = False) -> ParsedTracks:
    """Parse a MOTChallenge ground-truth (``gt``) or tracker-output file."""
    problems = Problems("MOT file")
    columns = (9, 10) if gt else (7, 8, 9, 10)
    rows: list[Row] = []
    skipped: dict[str, int] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if problems.full:
            break
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in columns:
            kind = "a ground-truth line" if gt else "a tracker-output line"
            problems.add(line_no, f"{kind} needs {' or '.join(map(str, columns))} comma-separated columns, "
                                  f"found {len(parts)}")
            continue
        frame = finite_number(parts[0], line=line_no, column="frame", problems=problems, integer=True)
        track_id = finite_number(parts[1], line=line_no, column="id", problems=problems, integer=True)
        nums = [finite_number(p, line=line_no, column=c, problems=problems)
                for p, c in zip(parts[2:6], ("bb_left", "bb_top", "bb_width", "bb_height"))]
        names = GT_COLUMNS[len(parts)] if gt else TRACKER_COLUMNS
        rest = [(score_number if c == "conf" else finite_number)(p, line=line_no, column=c, problems=problems)
                for p, c in zip(parts[6:], names)]
        if frame is None or track_id is None or None in nums or None in rest:
            continue
        if frame < 1:
            problems.add(line_no, f"frame numbers start at 1, got {frame}")
            continue
        if track_id < 0:
            problems.add(line_no, f"id {track_id} is not a track identity (detection files have no ids)")
            continue
        category, score = "person", 1.0
        if gt:
            if rest[0] == 0:
                skipped["not_considered"] = skipped.get("not_considered", 0) + 1
                continue
            if len(parts) == 9:
                if rest[1] not in MOT_CLASSES:
                    problems.add(line_no, f"unknown class {shown(parts[7])}; MOTChallenge classes are 1-12")
                    continue
                category = MOT_CLASSES[int(rest[1])]
        else:
            score = rest[0]
        left, top, w, h = nums
        box = box_row({"x1": left - 1, "y1": top - 1, "x2": left - 1 + w, "y2": top - 1 + h}, line=line_no,
                      problems=problems)
        if box is None:
            continue
        rows.append(Row(track_id=track_id, frame=frame - 1, box=box, line=line_no, score=score, category=category))
    tracks = assemble(rows, problems=problems)
    problems.raise_if_any()
    return ParsedTracks(format="mot", tracks=tracks, n_rows=len(rows), skipped=skipped, meta={"gt": gt},
                        frame_base=1)


def _key_lines(text: str) -> dict[str, int]:
    """The line each ``key = value`` of an ini text is on (the first, for a repeated key)."""
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = re.match(r"\s*([^=:\s\[;#][^=:]*?)\s*[=:]", line)
        if match:
            lines.setdefault(match.group(1), number)
    return lines


def parse_seqinfo(text: str) -> dict:
    """The ``[Sequence]`` section of a ``seqinfo.ini`` with typed values; refused when a key is
    missing or malformed. Values are read as written (no ``%(name)s`` interpolation)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # keys are camelCase
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TracksFormatError([(getattr(exc, "lineno", 0) or 0, message[:300])], what="seqinfo.ini") from None
    if "Sequence" not in parser:
        raise TracksFormatError([(0, "no [Sequence] section")], what="seqinfo.ini")
    section, info, problems = parser["Sequence"], {}, Problems("seqinfo.ini")
    lines = _key_lines(text)
    for key, kind in SEQINFO_KEYS.items():
        line = lines.get(key, 0)
        if key not in section:
            if key in ("imDir", "imExt", "name"):
                continue
            problems.add(0, f"missing {key}")
            continue
        value = section[key]
        if kind is str:
            if (problem := stored_text_problem(value, what=key)) is not None:
                problems.add(line, problem)
            else:
                info[key] = value
            continue
        try:
            number = kind(value) if len(value) <= 64 else None
        except ValueError:
            number = None
        if number is None or not math.isfinite(number) or not 0 < number <= INT32_MAX:
            problems.add(line, f"{key} = {shown(value)} is not a positive {'whole ' if kind is int else ''}number"
                               f"{'' if kind is float else f' up to {INT32_MAX}'}")
            continue
        info[key] = number
    problems.raise_if_any()
    return info


@dataclass
class MotSequence:
    """What a MOTChallenge folder holds."""

    tracks_path: Path           # gt/gt.txt or the tracker-output file
    gt: bool                    # the file is ground truth
    seqinfo: dict | None        # parsed seqinfo.ini, when present
    frames_dir: Path | None     # img1/ (or seqinfo's imDir), when it holds frames
    video_path: Path | None     # a video file in the folder, when there is one


def find_sequence(path: str | os.PathLike) -> MotSequence:
    """Locate the parts of a MOTChallenge sequence: ``path`` is its folder (``gt/gt.txt`` preferred,
    else the one ``.txt`` file at its top) or a tracks file inside one."""
    path = Path(path)
    if path.is_file():
        folder = path.parent.parent if path.parent.name == "gt" else path.parent
        tracks_path, gt = path, path.parent.name == "gt"
    elif path.is_dir():
        folder = path
        if (path / "gt" / "gt.txt").is_file():
            tracks_path, gt = path / "gt" / "gt.txt", True
        else:
            txts = sorted(p for p in path.glob("*.txt") if p.is_file())
            if len(txts) != 1:
                raise TracksFormatError([(0, f"{path} has no gt/gt.txt and {len(txts)} .txt files at its top; "
                                             "name the tracks file itself")], what="MOTChallenge folder")
            tracks_path, gt = txts[0], False
    else:
        raise TracksFormatError([(0, f"{path} does not exist")], what="MOTChallenge folder")
    seqinfo = parse_seqinfo((folder / "seqinfo.ini").read_text()) if (folder / "seqinfo.ini").is_file() else None
    frames_dir = folder / ((seqinfo or {}).get("imDir") or "img1")
    videos = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES)
    return MotSequence(tracks_path=tracks_path, gt=gt, seqinfo=seqinfo,
                       frames_dir=frames_dir if frames_dir.is_dir() and any(frames_dir.iterdir()) else None,
                       video_path=videos[0] if videos else None)


def declare_seqinfo(parsed: ParsedTracks, seqinfo: dict | None) -> ParsedTracks:
    """Let ``seqinfo.ini``'s size and length be checked against the video like a declared size."""
    if seqinfo:
        parsed.meta["seqinfo"] = seqinfo
        parsed.declared_video = {"width": seqinfo["imWidth"], "height": seqinfo["imHeight"],
                                 "frame_count": seqinfo["seqLength"]}
    return parsed


def format_mot(tracks: list[ImportedTrack], *, gt: bool = True) -> str:
    """The MOTChallenge text of ``tracks`` (the inverse of :func:`parse_mot`): ground truth with
    9 columns (considered 1, class from the category, visibility 1) or tracker output with 10."""
    class_of = {name: cid for cid, name in MOT_CLASSES.items()}
    lines = []
    for t in tracks:
        for f, (x1, y1, x2, y2), s in zip(t.frames, t.boxes, t.scores):
            head = f"{int(f) + 1},{t.track_id},{x1 + 1:.2f},{y1 + 1:.2f},{x2 - x1:.2f},{y2 - y1:.2f}"
            lines.append((int(f), t.track_id, head + (f",1,{class_of.get(t.category, 1)},1" if gt
                                                      else f",{s:.3f},-1,-1,-1")))
    return "".join(line + "\n" for _, _, line in sorted(lines))


def format_seqinfo(*, name: str, fps: float, frame_count: int, width: int, height: int,
                   im_dir: str = "img1", im_ext: str = ".jpg") -> str:
    return (f"[Sequence]\nname={name}\nimDir={im_dir}\nframeRate={fps:g}\nseqLength={frame_count}\n"
            f"imWidth={width}\nimHeight={height}\nimExt={im_ext}\n")


__all__ = ["MOT_CLASSES", "MotSequence", "declare_seqinfo", "find_sequence", "format_mot", "format_seqinfo",
           "parse_mot", "parse_seqinfo"]
