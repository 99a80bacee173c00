"""The Trajlab JSON tube format (``trajlab-tubes/1``), documented in the README ("Importing tracks
and tubes") with an HC-STVG-style example in ``docs/examples/tubes_hcstvg_style.json``::

    {"format": "trajlab-tubes/1",
     "frame_base": 0,                      # optional: 0 (default) or 1, how "boxes" number frames
     "box_format": "xyxy",                 # optional: "xyxy" (default) or "xywh"
     "video": {"width": 640, "height": 360, "frame_count": 120},   # optional, checked
     "tubes": [{"id": 1, "category": "person", "caption": "The man in red walks left.",
                "boxes": [[10, 100, 50, 140, 210], [11, 102, 50, 142, 210]]}]}

Each box is ``[frame, a, b, c, d]`` (``x1, y1, x2, y2`` or ``x, y, w, h``). ``category`` defaults to
``person``; ``caption`` is optional. Problems are reported with the line of the offending value.
"""
from __future__ import annotations

import bisect
import json
import re
from itertools import accumulate
from json import decoder as json_decoder
from json import scanner as json_scanner

from models.text import INT32_MAX
from models.tracks_io.records import (
    MAX_NUMBER_CHARS,
    ParsedTracks,
    Problems,
    Row,
    TracksFormatError,
    assemble,
    box_row,
    finite_number,
    shown,
    stored_text_problem,
    track_id_problem,
)

FORMAT_NAME = "trajlab-tubes/1"
MAX_DEPTH = 16            # arrays and objects inside each other; the format nests 4 deep
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
TOP_KEYS = {"format", "frame_base", "box_format", "video", "tubes", "source", "notes"}
TUBE_KEYS = {"id", "category", "caption", "boxes"}
VIDEO_KEYS = {"width", "height", "frame_count", "fps", "name"}


class _List(list):
    line = 0


class _Dict(dict):
    line = 0


class LongNumber(str):
    """A JSON integer written with more digits than any number the format holds, kept as its text
    (Python refuses to convert one of more than 4,300 digits, and no column holds one of 65)."""


def _parse_int(text: str):
    return int(text) if len(text) <= MAX_NUMBER_CHARS else LongNumber(text)


def too_deep_line(text: str) -> int | None:
    """The line of the first array or object nested deeper than ``MAX_DEPTH`` (brackets inside
    strings do not count), or ``None``. The depth is measured at C speed; the line is looked for
    only in a file that is too deep."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if max(accumulate(map(_STEP.__getitem__, brackets)), default=0) <= MAX_DEPTH:
        return None
    depth = 0
    for match in _TOKEN.finditer(text):
        depth += _STEP.get(match.group(), 0)
        if depth > MAX_DEPTH:
            return text.count("\n", 0, match.start()) + 1
    return 1


def load_with_lines(text: str, *, what: str = "JSON tube file"):
    """``json.loads`` whose lists and objects carry the ``line`` they start on; integers too long for
    any column stay :class:`LongNumber` text; a file nested deeper than ``MAX_DEPTH`` is refused."""
    deep = too_deep_line(text)
    if deep is not None:
        raise TracksFormatError([(deep, f"arrays and objects nest deeper than {MAX_DEPTH} levels")], what=what)
    newlines = [m.start() for m in re.finditer("\n", text)]

    def line_of(pos: int) -> int:
        return bisect.bisect_left(newlines, pos) + 1

    dec = json.JSONDecoder(parse_int=_parse_int)

    def parse_array(s_and_end, scan_once):
        values, end = json_decoder.JSONArray(s_and_end, scan_once)
        out = _List(values)
        out.line = line_of(s_and_end[1] - 1)
        return out, end

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        values, end = json_decoder.JSONObject(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo)
        out = _Dict(values)
        out.line = line_of(s_and_end[1] - 1)
        return out, end

    dec.parse_array, dec.parse_object = parse_array, parse_object
    dec.scan_once = json_scanner.py_make_scanner(dec)
    try:
        return dec.decode(text)
    except json.JSONDecodeError as exc:
        raise TracksFormatError([(exc.lineno, f"not valid JSON: {exc.msg} (column {exc.colno})")],
                                what=what) from None


def _line(value, fallback: int) -> int:
    return getattr(value, "line", 0) or fallback


def parse_tubes_json(text: str) -> ParsedTracks:
    data = load_with_lines(text)
    problems = Problems("JSON tube file")
    if not isinstance(data, dict):
        raise TracksFormatError([(1, "the top level must be an object with a 'tubes' list")], what="JSON tube file")
    top = _line(data, 1)
    if data.get("format") != FORMAT_NAME:
        problems.add(top, f"'format' must be {FORMAT_NAME!r}, got {shown(data.get('format'))}")
    for key in sorted(set(data) - TOP_KEYS):
        problems.add(top, f"unknown key {shown(key)}; known: {sorted(TOP_KEYS)}")
    frame_base = data.get("frame_base", 0)
    if frame_base not in (0, 1) or isinstance(frame_base, bool):
        problems.add(top, f"'frame_base' must be 0 or 1, got {shown(frame_base)}")
        frame_base = 0
    box_format = data.get("box_format", "xyxy")
    if box_format not in ("xyxy", "xywh"):
        problems.add(top, f"'box_format' must be 'xyxy' or 'xywh', got {shown(box_format)}")
    declared, declared_line = {}, 0
    video = data.get("video")
    if video is not None:
        declared_line = _line(video, top)
        if not isinstance(video, dict):
            problems.add(declared_line, "'video' must be an object")
        else:
            for key in sorted(set(video) - VIDEO_KEYS):
                problems.add(declared_line, f"unknown key {shown(key)} in 'video'; known: {sorted(VIDEO_KEYS)}")
            for key in ("width", "height", "frame_count"):
                if key in video:
                    value = video[key]
                    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= INT32_MAX:
                        problems.add(declared_line, f"video {key} must be a whole number from 1 to {INT32_MAX}, "
                                                    f"got {shown(value)}")
                    else:
                        declared[key] = video[key]
    tubes = data.get("tubes")
    if not isinstance(tubes, list):
        problems.add(top, "'tubes' must be a list")
        problems.raise_if_any()
    rows: list[Row] = []
    captions: dict[int, str] = {}
    seen_ids: dict[int, int] = {}
    for tube in tubes:
        tline = _line(tube, top)
        if problems.full:
            break
        if not isinstance(tube, dict):
            problems.add(tline, "each tube must be an object")
            continue
        for key in sorted(set(tube) - TUBE_KEYS):
            problems.add(tline, f"unknown key {shown(key)} in a tube; known: {sorted(TUBE_KEYS)}")
        tube_id = tube.get("id")
        if not isinstance(tube_id, int) or isinstance(tube_id, bool) or tube_id < 0:
            problems.add(tline, f"a tube 'id' must be a whole number >= 0, got {shown(tube_id)}")
            continue
        if (problem := track_id_problem(tube_id, column="tube 'id'")) is not None:
            problems.add(tline, problem)
            continue
        if tube_id in seen_ids:
            problems.add(tline, f"tube id {tube_id} is used twice (first on line {seen_ids[tube_id]})")
            continue
        seen_ids[tube_id] = tline
        category = tube.get("category", "person")
        caption = tube.get("caption", "")
        if not isinstance(category, str) or not category.strip() or len(category) > 64:
            problems.add(tline, f"tube {tube_id}: 'category' must be a text of 1 to 64 characters")
            continue
        if not isinstance(caption, str):
            problems.add(tline, f"tube {tube_id}: 'caption' must be a text")
            continue
        text_problems = [p for p in (stored_text_problem(category, what=f"tube {tube_id}: 'category'"),
                                     stored_text_problem(caption, what=f"tube {tube_id}: 'caption'")) if p]
        if text_problems:
            for problem in text_problems:
                problems.add(tline, problem)
            continue
        if caption.strip():
            captions[tube_id] = caption.strip()
        boxes = tube.get("boxes")
        if not isinstance(boxes, list) or not boxes:
            problems.add(tline, f"tube {tube_id}: 'boxes' must be a non-empty list of [frame, a, b, c, d]")
            continue
        for entry in boxes:
            bline = _line(entry, tline)
            if not isinstance(entry, list) or len(entry) != 5:
                problems.add(bline, f"tube {tube_id}: a box must be [frame, a, b, c, d], got {shown(entry, 120)}")
                continue
            frame = finite_number(entry[0], line=bline, column="frame", problems=problems, integer=True)
            nums = [finite_number(v, line=bline, column=c, problems=problems)
                    for v, c in zip(entry[1:], ("x1", "y1", "x2", "y2") if box_format != "xywh" else ("x", "y", "w", "h"))]
            if frame is None or None in nums or any(isinstance(v, bool) for v in entry):
                continue
            if frame < frame_base:
                problems.add(bline, f"tube {tube_id}: frame {frame} is before the first frame ({frame_base})")
                continue
            a, b, c, d = nums
            values = {"x1": a, "y1": b, "x2": a + c if box_format == "xywh" else c, "y2": b + d if box_format == "xywh" else d}
            box = box_row(values, line=bline, problems=problems)
            if box is not None:
                rows.append(Row(track_id=tube_id, frame=frame - frame_base, box=box, line=bline,
                                category=category.strip()))
    tracks = assemble(rows, problems=problems, captions=captions)
    problems.raise_if_any()
    return ParsedTracks(format="json", tracks=tracks, n_rows=len(rows), declared_video=declared, frame_base=frame_base,
                        declared_line=declared_line,
                        meta={k: data[k] for k in ("source", "notes") if isinstance(data.get(k), str)})


def format_tubes_json(tracks, *, video: dict | None = None, source: str = "") -> str:
    """The JSON tube text of ``tracks`` (:class:`ImportedTrack`), one box per line."""
    lines = ["{", f'  "format": "{FORMAT_NAME}",']
    if source:
        lines.append(f'  "source": {json.dumps(source)},')
    if video:
        lines.append(f'  "video": {json.dumps(video)},')
    lines.append('  "tubes": [')
    for i, t in enumerate(tracks):
        head = {"id": int(t.track_id), "category": t.category}
        if t.caption:
            head["caption"] = t.caption
        lines.append("    " + json.dumps(head)[:-1] + ', "boxes": [')
        boxes = [f"      [{int(f)}, {', '.join(f'{v:.2f}' for v in b)}]" for f, b in zip(t.frames, t.boxes)]
        lines.append(",\n".join(boxes))
        lines.append("    ]}" + ("," if i < len(tracks) - 1 else ""))
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"
