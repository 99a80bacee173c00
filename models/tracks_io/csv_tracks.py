"""Tracks as CSV: a header naming the columns, then one box per row.

Required columns: ``track_id, frame, x1, y1, x2, y2`` (boxes in original pixels); optional:
``score`` (default 1) and ``category`` (default ``person``). Columns may come in any order; an
unknown or repeated column is refused. Frames are 0-based unless ``frame_base=1``.
"""
from __future__ import annotations

import csv
import io

from models.tracks_io.records import (
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

REQUIRED = ("track_id", "frame", "x1", "y1", "x2", "y2")
OPTIONAL = ("score", "category")


def parse_tracks_csv(text: str, *, frame_base: int = 0) -> ParsedTracks:
    if frame_base not in (0, 1):
        raise TracksFormatError([(0, f"frame_base must be 0 or 1, got {frame_base!r}")], what="CSV file")
    problems = Problems("CSV file")
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    while header is not None and not any(h.strip() for h in header):
        header = next(reader, None)
    if header is None:
        raise TracksFormatError([(0, "the file is empty")], what="CSV file")
    names = [h.strip().lower() for h in header]
    head_line = reader.line_num
    unknown = [n for n in names if n not in REQUIRED + OPTIONAL]
    missing = [n for n in REQUIRED if n not in names]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if unknown or missing or repeated:
        parts = ([f"unknown column(s) {', '.join(map(shown, unknown[:5]))}"] if unknown else []) + \
                ([f"missing column(s) {missing}"] if missing else []) + \
                ([f"repeated column(s) {repeated}"] if repeated else [])
        raise TracksFormatError([(head_line, "; ".join(parts) + f"; the header needs {list(REQUIRED)} "
                                             f"and may add {list(OPTIONAL)}")], what="CSV file")
    rows: list[Row] = []
    while True:
        try:
            record = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.add(reader.line_num, f"not valid CSV: {exc}")
            break
        line = reader.line_num
        if problems.full:
            break
        if not record or not any(c.strip() for c in record):
            continue
        if len(record) != len(names):
            problems.add(line, f"expected {len(names)} columns like the header, found {len(record)}")
            continue
        cells = dict(zip(names, (c.strip() for c in record)))
        track_id = finite_number(cells["track_id"], line=line, column="track_id", problems=problems, integer=True)
        frame = finite_number(cells["frame"], line=line, column="frame", problems=problems, integer=True)
        coords = {k: finite_number(cells[k], line=line, column=k, problems=problems) for k in ("x1", "y1", "x2", "y2")}
        score = score_number(cells["score"], line=line, column="score", problems=problems) if "score" in cells else 1.0
        if track_id is None or frame is None or None in coords.values() or score is None:
            continue
        if track_id < 0:
            problems.add(line, f"track_id must be >= 0, got {track_id}")
            continue
        if frame < frame_base:
            problems.add(line, f"frame {frame} is before the first frame ({frame_base})")
            continue
        category = cells.get("category", "") or "person"
        if (problem := stored_text_problem(category, what="category")) is not None:
            problems.add(line, problem)
            continue
        if len(category) > 64:
            problems.add(line, f"category {shown(category)} is longer than 64 characters")
            continue
        box = box_row(coords, line=line, problems=problems)
        if box is not None:
            rows.append(Row(track_id=track_id, frame=frame - frame_base, box=box, line=line, score=score,
                            category=category))
    tracks = assemble(rows, problems=problems)
    problems.raise_if_any()
    return ParsedTracks(format="csv", tracks=tracks, n_rows=len(rows), frame_base=frame_base)
