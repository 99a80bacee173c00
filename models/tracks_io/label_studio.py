"""Label Studio video object tracking: the JSON export of a project whose labeling config has a
``<VideoRectangle>`` (Label Studio's "Video Object Tracking" template). Each region is one result::

    [{"id": 7, "data": {"video": "/data/upload/clip.mp4"},
      "annotations": [{"id": 12, "result": [
        {"id": "a1B2c3", "type": "videorectangle", "from_name": "box", "to_name": "video",
         "value": {"framesCount": 120, "duration": 4.8, "labels": ["person"],
                   "sequence": [{"frame": 1, "enabled": true, "x": 10.0, "y": 20.0, "width": 6.25,
                                 "height": 27.7, "rotation": 0, "time": 0.04}, ...]}}]}]}]

How the regions are read, as Label Studio shows them:

- The file is a list of tasks (the "JSON" export) or one task. Exactly one annotation in it may hold
  ``videorectangle`` regions (the video the import is for); cancelled annotations and predictions
  are not read. Any other result is left out and counted (``other_results``).
- ``frame`` is 1-based (Label Studio numbers frames from 1); ``x, y, width, height`` are percentages
  of the frame's width and height, turned into pixels with the video's size; ``rotation`` (degrees,
  clockwise about the top-left corner) becomes the axis-aligned box around the rotated one;
  ``time`` is checked and not used (the frame number is what Label Studio interpolates on).
- Every sequence entry is an observation on its frame. From an entry with ``enabled: true`` the
  region is interpolated linearly (position, size and rotation) to the next entry; after the last
  one it is held to the end of the video (``framesCount``, never past the video). An entry with
  ``enabled: false`` is shown on its own frame only: the region is hidden until the next entry.
  This is the rule of Label Studio's editor and of its SDK's keyframe expansion. Filled boxes are
  counted as ``interpolated``.
- A region's category is its one label (``value.labels``, or a ``labels`` result with the same id;
  ``person`` when it has none). Regions get track ids 1, 2, ... in the order of the file.

Every problem names the line of the JSON object it is in; ``frame``, ``x``, ``y``, ``width``,
``height`` and ``enabled`` are required in every sequence entry.
"""
from __future__ import annotations

import numpy as np

from models.tracks_io.keyframes import (
    Budget,
    Keyframe,
    add_counts,
    expanded_count,
    expanded_track,
    past_video,
    rotated_hull,
    sorted_keyframes,
)
from models.tracks_io.records import (
    ParsedTracks,
    Problems,
    TracksFormatError,
    finite_number,
    shown,
    stored_text_problem,
)
from models.tracks_io.tubes_json import load_with_lines

WHAT = "Label Studio JSON file"
ENTRY_KEYS = ("frame", "x", "y", "width", "height", "enabled")
REGION_TYPE = "videorectangle"


def _line(value, fallback: int) -> int:
    return getattr(value, "line", 0) or fallback


def _annotated(data, problems: Problems) -> list[tuple[object, object, list]]:
    """Every ``(task, annotation, results)`` whose results hold a video rectangle."""
    tasks = data if isinstance(data, list) else [data]
    found = []
    for task in tasks:
        tline = _line(task, _line(data, 1))
        if not isinstance(task, dict):
            problems.add(tline, "each task must be an object with an 'annotations' list")
            continue
        annotations = task.get("annotations", task.get("completions"))
        if annotations is None:
            continue
        if not isinstance(annotations, list):
            problems.add(tline, "a task's 'annotations' must be a list")
            continue
        for annotation in annotations:
            aline = _line(annotation, tline)
            if not isinstance(annotation, dict) or not isinstance(annotation.get("result", []), list):
                problems.add(aline, "an annotation must be an object with a 'result' list")
                continue
            if annotation.get("was_cancelled"):
                continue
            results = annotation.get("result", [])
            if any(isinstance(r, dict) and str(r.get("type", "")).lower() == REGION_TYPE for r in results):
                found.append((task, annotation, results))
    return found


def _plain_id(value) -> str | int | None:
    """A region's ``id`` as Label Studio writes it (a text, or a number), ``None`` for anything else."""
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def _category(region: dict, labels_by_id: dict, *, name: str, line: int, problems: Problems) -> str | None:
    value = region["value"]
    labels = value.get("labels", labels_by_id.get(_plain_id(region.get("id"))))
    if labels is None or labels == []:
        return "person"
    if not isinstance(labels, list) or not all(isinstance(v, str) for v in labels):
        problems.add(line, f"{name}: 'labels' must be a list of texts, got {shown(labels)}")
        return None
    if len(labels) > 1:
        problems.add(line, f"{name} has {len(labels)} labels {shown(labels, 80)}; a track has one category")
        return None
    label = labels[0].strip()
    problem = stored_text_problem(label, what=f"{name}: label")
    if problem is None and not 1 <= len(label) <= 64:
        problem = f"{name}: label {shown(labels[0])} must be 1 to 64 characters"
    if problem is not None:
        problems.add(line, problem)
        return None
    return label


def _entry(item, *, name: str, line: int, problems: Problems) -> Keyframe | None:
    eline = _line(item, line)
    if not isinstance(item, dict):
        problems.add(eline, f"{name}: a sequence entry must be an object, got {shown(item)}")
        return None
    missing = [k for k in ENTRY_KEYS if k not in item]
    if missing:
        problems.add(eline, f"{name}: the sequence entry lacks {', '.join(missing)} (each entry needs "
                            f"{', '.join(ENTRY_KEYS)})")
        return None
    frame = finite_number(item["frame"], line=eline, column="frame", problems=problems, integer=True)
    nums = [finite_number(item[k], line=eline, column=k, problems=problems) for k in ("x", "y", "width", "height")]
    rotation = finite_number(item.get("rotation", 0), line=eline, column="rotation", problems=problems)
    time = finite_number(item["time"], line=eline, column="time", problems=problems) if "time" in item else 0.0
    if not isinstance(item["enabled"], bool):
        problems.add(eline, f"{name}: 'enabled' must be true or false, got {shown(item['enabled'])}")
        return None
    if frame is None or None in nums or rotation is None or time is None:
        return None
    if frame < 1:
        problems.add(eline, f"{name}: frame numbers start at 1, got {frame}")
        return None
    if time < 0:
        problems.add(eline, f"{name}: time must be >= 0 seconds, got {time:g}")
        return None
    x, y, w, h = nums
    if w <= 0 or h <= 0:
        problems.add(eline, f"{name}: the box on frame {frame} is empty (width {w:g}%, height {h:g}%; both must be > 0)")
        return None
    return Keyframe(frame=frame - 1, params=(x, y, w, h, rotation), line=eline, shown=True, carry=item["enabled"])


def _pixels(width: int, height: int):
    def to_boxes(params: np.ndarray) -> np.ndarray:
        """``x, y, width, height`` in percent and ``rotation`` [N, 5] → ``x1, y1, x2, y2`` pixels [N, 4]."""
        px = params[:, 0] * width / 100                                              # [N]
        py = params[:, 1] * height / 100                                             # [N]
        pw = params[:, 2] * width / 100                                              # [N]
        ph = params[:, 3] * height / 100                                             # [N]
        if not params[:, 4].any():
            return np.stack([px, py, px + pw, py + ph], axis=1)                      # [N, 4]
        zeros = np.zeros_like(pw)
        return rotated_hull(px, py, np.stack([zeros, pw, pw, zeros], 1), np.stack([zeros, zeros, ph, ph], 1),
                            params[:, 4])
    return to_boxes


def _end(value: dict, *, line: int, frame_count: int | None, problems: Problems) -> int | None:
    """The last frame (0-based) a region's last enabled entry is held to."""
    declared = value.get("framesCount")
    if declared is not None:
        declared = finite_number(declared, line=line, column="framesCount", problems=problems, integer=True)
        if declared is not None and declared < 1:
            problems.add(line, f"framesCount must be >= 1, got {declared}")
            declared = None
    end = declared if declared is not None else frame_count
    if end is None:
        return None
    return min(end, frame_count) - 1 if frame_count is not None else end - 1


def parse_label_studio_video(text: str, *, width: int, height: int, frame_count: int | None = None,
                             max_boxes: int | None = None) -> ParsedTracks:
    """Parse a Label Studio video export (module docstring) for a ``width`` x ``height`` video of
    ``frame_count`` frames; ``max_boxes``: the most boxes the expanded regions may hold."""
    data = load_with_lines(text, what=WHAT)
    problems = Problems(WHAT)
    top = _line(data, 1)
    if not isinstance(data, list | dict):
        raise TracksFormatError([(top, "the file must be Label Studio's JSON export: a list of tasks, or one task")],
                                what=WHAT)
    found = _annotated(data, problems)
    problems.raise_if_any()
    if not found:
        raise TracksFormatError([(top, "no annotation in the file holds video rectangles ('videorectangle' results "
                                       "of Label Studio's video object tracking)")], what=WHAT)
    if len(found) > 1:
        listed = ", ".join(f"task {shown(t.get('id'))} annotation {shown(a.get('id'))} (line {_line(a, top)})"
                           for t, a, _ in found[:5])
        raise TracksFormatError([(_line(found[1][1], top), f"{len(found)} annotations hold video rectangles ({listed}"
                                                          f"{', ...' if len(found) > 5 else ''}); an import takes one "
                                                          "video's annotation: export that task, or keep one "
                                                          "annotation in the file")], what=WHAT)
    _, _, results = found[0]
    labels_by_id = {r["id"]: r["value"].get("labels") for r in results
                    if isinstance(r, dict) and r.get("type") == "labels" and isinstance(r.get("id"), str)
                    and isinstance(r.get("value"), dict)}
    budget, to_boxes = Budget(max_boxes), _pixels(width, height)
    tracks, counts, skipped, region_ids = [], {}, {}, {}
    for result in results:
        if problems.full:
            break
        if not isinstance(result, dict) or str(result.get("type", "")).lower() != REGION_TYPE:
            if not (isinstance(result, dict) and result.get("type") == "labels"
                    and _plain_id(result.get("id")) in labels_by_id):
                skipped["other_results"] = skipped.get("other_results", 0) + 1
            continue
        rline = _line(result, top)
        if result.get("id") is not None and _plain_id(result.get("id")) is None:
            problems.add(rline, f"a region's 'id' must be a text or a number, got {shown(result.get('id'))}")
            continue
        track_id = len(region_ids) + 1
        name = f"region {shown(result.get('id'))} (track {track_id})"
        region_ids[track_id] = str(result.get("id", ""))
        value = result.get("value")
        if not isinstance(value, dict) or not isinstance(value.get("sequence"), list) or not value["sequence"]:
            problems.add(_line(value, rline), f"{name}: 'value' must be an object with a non-empty 'sequence' list")
            continue
        category = _category(result, labels_by_id, name=name, line=_line(value, rline), problems=problems)
        entries = [_entry(item, name=name, line=_line(value["sequence"], rline), problems=problems)
                   for item in value["sequence"]]
        keyframes = sorted_keyframes([k for k in entries if k is not None], track=name, problems=problems,
                                     frame_base=1)
        end = _end(value, line=_line(value, rline), frame_count=frame_count, problems=problems)
        if category is None or len(keyframes) < len(entries) or past_video(
                keyframes, frame_count=frame_count, frame_base=1, track=name, problems=problems):
            continue
        budget.spend(expanded_count(keyframes, end=end))
        track, track_counts = expanded_track(keyframes, track_id=track_id, category=category, to_boxes=to_boxes,
                                             end=end)
        add_counts(counts, {**track_counts, "keyframes": len(keyframes),
                            "rotated": sum(1 for k in keyframes if k.params[4] != 0)})
        tracks.append(track)
    problems.raise_if_any()
    return ParsedTracks(format="labelstudio", tracks=tracks, n_rows=sum(t.n_obs for t in tracks), skipped=skipped,
                        noted=counts, frame_base=1, meta={"region_ids": region_ids})
