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
import os
from dataclasses import dataclass
from pathlib import Path

from models.tracks_io.records import (
    ImportedTrack,
    ParsedTracks,
    Problems,
    Row,
    TracksFormatError,
    assemble,
    box_row,
    finite_number,
)

# MOT16/17/20 ground-truth classes (the ``class`` column).
MOT_CLASSES = {1: "person", 2: "person_on_vehicle", 3: "car", 4: "bicycle", 5: "motorbike",
               6: "non_motorized_vehicle", 7: "static_person", 8: "distractor", 9: "occluder",
               10: "occluder_on_ground", 11: "occluder_full", 12: "reflection"}
SEQINFO_KEYS = {"name": str, "imDir": str, "frameRate": float, "seqLength": int, "imWidth": int,
                "imHeight": int, "imExt": str}
VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm")


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
        rest = [finite_number(p, line=line_no, column=f"column {i + 7}", problems=problems)
                for i, p in enumerate(parts[6:])]
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
                class_id = int(rest[1])
                if class_id not in MOT_CLASSES:
                    problems.add(line_no, f"unknown class {class_id}; MOTChallenge classes are 1-12")
                    continue
                category = MOT_CLASSES[class_id]
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


def parse_seqinfo(text: str) -> dict:
    """The ``[Sequence]`` section of a ``seqinfo.ini`` with typed values; refused when a key is
    missing or malformed."""
    parser = configparser.ConfigParser()
    parser.optionxform = str  # keys are camelCase
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise TracksFormatError([(getattr(exc, "lineno", 0) or 0, str(exc).splitlines()[0])], what="seqinfo.ini") from None
    if "Sequence" not in parser:
        raise TracksFormatError([(0, "no [Sequence] section")], what="seqinfo.ini")
    section, info, problems = parser["Sequence"], {}, Problems("seqinfo.ini")
    for key, kind in SEQINFO_KEYS.items():
        if key not in section:
            if key in ("imDir", "imExt", "name"):
                continue
            problems.add(0, f"missing {key}")
            continue
        try:
            info[key] = kind(section[key])
        except ValueError:
            problems.add(0, f"{key} = {section[key]!r} is not a {kind.__name__}")
    problems.raise_if_any()
    if info["seqLength"] < 1 or info["imWidth"] < 1 or info["imHeight"] < 1 or info["frameRate"] <= 0:
        raise TracksFormatError([(0, "seqLength, imWidth, imHeight and frameRate must be positive")], what="seqinfo.ini")
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
