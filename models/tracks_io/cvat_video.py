"""CVAT for video 1.1: the XML a CVAT video task exports ("CVAT for video 1.1", the ``annotations.xml``
of its archive), documented as CVAT's "XML annotation format", section Interpolation::

    <annotations>
      <version>1.1</version>
      <meta><task> ... <size>120</size> <start_frame>0</start_frame> <stop_frame>119</stop_frame>
        <frame_filter></frame_filter> <original_size><width>640</width><height>360</height></original_size>
      </task></meta>
      <track id="0" label="person" source="manual">
        <box frame="0" xtl="10.0" ytl="20.0" xbr="50.0" ybr="120.0" outside="0" occluded="0" keyframe="1"/>
        <box frame="10" xtl="30.0" ytl="20.0" xbr="70.0" ybr="120.0" outside="1" occluded="0" keyframe="1"/>
      </track>
    </annotations>

How the boxes are read, as CVAT shows them:

- Frame numbers are the video's own (0-based; CVAT writes the task's absolute frame numbers).
- A listed ``<box>`` with ``outside="0"`` is an observation on its frame, whether it is a keyframe
  or a frame CVAT interpolated and wrote out (``keyframe="0"``); ``outside="1"`` means the object
  has left the view from that frame on, until the track's next listed box. Outside boxes are no
  observations (counted as ``outside``).
- Frames a track does not list are filled as CVAT fills them: from a box that is not outside to the
  track's next listed box, linearly in the corners ``xtl, ytl, xbr, ybr`` (and ``rotation``, the
  short way round) on the
  task's frame grid (``step=N`` of ``frame_filter``), with the earlier box's ``occluded`` flag; after
  the last box, when it is not outside, the box is held to the task's last frame (``stop_frame``, or
  ``size`` frames from ``start_frame``; never past the video). A CVAT export lists every such frame
  already; a file written by hand gets the frames CVAT would show. Filled boxes are counted as
  ``interpolated``.
- Occluded boxes are observations (the object is there, hidden behind something), counted as
  ``occluded``. A rotated box (``rotation``, degrees about its centre) becomes the axis-aligned box
  around it.
- Each track's ``label`` is its category, its ``id`` its track id. Tracks of other shapes
  (polygons, points, masks, skeletons, ...) are left out and counted as ``tracks_not_boxes``;
  ``<image>`` elements (CVAT for images) are refused.
- ``original_size`` is the frame size the file declares, checked against the video's.

Every problem names the line of its element; every box attribute the format defines is required.
"""
from __future__ import annotations

import math
import re
from itertools import pairwise

import numpy as np

from models.text import INT32_MAX
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
    MAX_NUMBER_CHARS,
    ParsedTracks,
    Problems,
    TracksFormatError,
    finite_number,
    shown,
    stored_text_problem,
    track_id_problem,
)
from models.tracks_io.xml_lines import Element, read_xml

WHAT = "CVAT XML file"
VERSION = "1.1"
BOX_ATTRIBUTES = ("frame", "xtl", "ytl", "xbr", "ybr", "outside", "occluded", "keyframe")
OTHER_SHAPES = {"polygon", "polyline", "points", "mask", "skeleton", "cuboid", "ellipse", "tag"}
_STEP = re.compile(r"^\s*step\s*=\s*(\d+)\s*$")


def _flag(value: str, *, name: str, line: int, problems: Problems) -> bool | None:
    if value.strip() in ("0", "1"):
        return value.strip() == "1"
    problems.add(line, f"<box> attribute {name!r} must be 0 or 1, got {shown(value)}")
    return None


def _meta_number(task: Element | None, tag: str, problems: Problems) -> int | None:
    node = task.find(tag) if task is not None else None
    if node is None or not node.text.strip():
        return None
    value = finite_number(node.text.strip(), line=node.line, column=f"<{tag}>", problems=problems, integer=True)
    if value is not None and value < 0:
        problems.add(node.line, f"<{tag}> must be >= 0, got {value}")
        return None
    return value


def _task_of(root: Element, problems: Problems) -> Element | None:
    """The ``<task>`` (or ``<job>``) of the file's ``<meta>``; a project export of several tasks is refused."""
    meta = root.find("meta")
    if meta is None:
        return None
    for tag in ("task", "job"):
        if meta.find(tag) is not None:
            return meta.find(tag)
    project = meta.find("project")
    if project is not None:
        tasks = project.find("tasks").findall("task") if project.find("tasks") is not None else []
        if len(tasks) > 1:
            problems.add(project.line, f"a project export holds {len(tasks)} tasks; a track import takes one video: "
                                       "export its task as 'CVAT for video 1.1'")
        return tasks[0] if tasks else None
    return None


def _grid(task: Element | None, problems: Problems, frame_count: int | None) -> tuple[int, int | None, dict, int]:
    """The task's frame step, its last frame (``None`` when not declared), the frame size it
    declares and the line declaring it."""
    step = 1
    node = task.find("frame_filter") if task is not None else None
    if node is not None and node.text.strip():
        match = _STEP.match(node.text)
        if match is None or int(match.group(1)) < 1:
            problems.add(node.line, f"<frame_filter> must read 'step=N' with N >= 1, got {shown(node.text)}")
        else:
            step = int(match.group(1))
    start = _meta_number(task, "start_frame", problems) or 0
    stop = _meta_number(task, "stop_frame", problems)
    size = _meta_number(task, "size", problems)
    end = stop if stop is not None else (start + (size - 1) * step if size else None)
    if end is not None and frame_count is not None:
        end = min(end, frame_count - 1)
    declared, declared_line = {}, 0
    original = task.find("original_size") if task is not None else None
    if original is not None:
        declared_line = original.line
        for key in ("width", "height"):
            node = original.find(key)
            if node is None:
                problems.add(original.line, f"<original_size> has no <{key}>")
                continue
            value = finite_number(node.text.strip(), line=node.line, column=f"<{key}>", problems=problems,
                                  integer=True)
            if value is not None and not 1 <= value <= INT32_MAX:
                problems.add(node.line, f"<{key}> must be a whole number from 1 to {INT32_MAX}, got {value}")
            elif value is not None:
                declared[key] = value
    return step, end, declared, declared_line


def _fast_numbers(a: dict[str, str]):
    """A box's frame, corners, rotation and flags when each reads as :func:`finite_number` and
    :func:`_flag` would accept it (finite, a whole frame in the int32 range, short numerals,
    flags 0 or 1); ``None`` when any needs the careful reading."""
    texts = (a["frame"], a["xtl"], a["ytl"], a["xbr"], a["ybr"], a.get("rotation", "0"))
    if any(len(t) > MAX_NUMBER_CHARS for t in texts):
        return None
    try:
        numbers = [float(t) for t in texts]
    except ValueError:
        return None
    flags = [a[k] for k in ("outside", "occluded", "keyframe")]
    frame = numbers[0]
    if not all(math.isfinite(v) for v in numbers) or frame != int(frame) or not 0 <= frame <= INT32_MAX \
            or any(f not in ("0", "1") for f in flags):
        return None
    return int(frame), numbers[1:5], numbers[5], [f == "1" for f in flags]


def _box_keyframe(box: Element, *, track: str, problems: Problems) -> Keyframe | None:
    missing = [a for a in BOX_ATTRIBUTES if a not in box.attrib]
    if missing:
        problems.add(box.line, f"{track}: <box> lacks the attribute(s) {', '.join(missing)} (CVAT for video 1.1 "
                               f"writes {', '.join(BOX_ATTRIBUTES)})")
        return None
    a = box.attrib
    fast = _fast_numbers(a)
    if fast is not None:                     # the common case: every number and flag as CVAT writes it
        frame, corners, rotation, flags = fast
    else:                                    # read again one by one, for the problems' messages
        frame = finite_number(a["frame"], line=box.line, column="frame", problems=problems, integer=True)
        corners = [finite_number(a[k], line=box.line, column=k, problems=problems) for k in ("xtl", "ytl", "xbr", "ybr")]
        rotation = finite_number(a.get("rotation", "0"), line=box.line, column="rotation", problems=problems)
        flags = [_flag(a[k], name=k, line=box.line, problems=problems) for k in ("outside", "occluded", "keyframe")]
        if frame is None or None in corners or rotation is None or None in flags:
            return None
    if frame < 0:
        problems.add(box.line, f"{track}: frame must be >= 0, got {frame}")
        return None
    xtl, ytl, xbr, ybr = corners
    if xbr <= xtl or ybr <= ytl:
        problems.add(box.line, f"{track}: box [{xtl:g}, {ytl:g}, {xbr:g}, {ybr:g}] on frame {frame} is empty or "
                               "inverted (xbr must exceed xtl and ybr exceed ytl)")
        return None
    outside, occluded, _ = flags
    return Keyframe(frame=frame, params=(xtl, ytl, xbr, ybr, rotation), line=box.line, shown=not outside,
                    carry=not outside, occluded=occluded)


def _boxes_of(params: np.ndarray) -> np.ndarray:
    """``xtl, ytl, xbr, ybr, rotation`` [N, 5] → ``x1, y1, x2, y2`` [N, 4] (the box around a rotated one)."""
    corners = params[:, :4]                                                          # [N, 4]
    rotation = params[:, 4]                                                          # [N]
    if not rotation.any():
        return corners.copy()
    half_w = (corners[:, 2] - corners[:, 0]) / 2                                     # [N]
    half_h = (corners[:, 3] - corners[:, 1]) / 2                                     # [N]
    dx = np.stack([-half_w, half_w, half_w, -half_w], 1)                             # [N, 4]
    dy = np.stack([-half_h, -half_h, half_h, half_h], 1)                             # [N, 4]
    return rotated_hull(corners[:, 0] + half_w, corners[:, 1] + half_h, dx, dy, rotation)


def _shortest_turns(keyframes: list[Keyframe]) -> list[Keyframe]:
    """Rotations unwrapped along the track, so that interpolating them turns the short way round
    as CVAT does (350 to 10 degrees passes 0, not 180); the box around a rotated box is the same
    for angles 360 degrees apart."""
    for previous, k in pairwise(keyframes):
        turn = (k.params[4] - previous.params[4] + 180) % 360 - 180
        k.params = (*k.params[:4], previous.params[4] + turn)
    return keyframes


def _label(track: Element, *, name: str, problems: Problems) -> str | None:
    label = track.attrib.get("label")
    if label is None or not label.strip():
        problems.add(track.line, f"{name} has no 'label' attribute")
        return None
    problem = stored_text_problem(label, what=f"{name}: label")
    if problem is None and len(label.strip()) > 64:
        problem = f"{name}: label {shown(label)} is longer than 64 characters"
    if problem is not None:
        problems.add(track.line, problem)
        return None
    return label.strip()


def parse_cvat_video(text: str, *, frame_count: int | None = None, max_boxes: int | None = None) -> ParsedTracks:
    """Parse a CVAT for video 1.1 file (module docstring). ``frame_count``: the video's, so that
    keyframes past it are refused before anything is interpolated towards them; ``max_boxes``: the
    most boxes the expanded tracks may hold (:class:`~models.tracks_io.keyframes.TooManyBoxes`)."""
    root = read_xml(text, what=WHAT)
    problems = Problems(WHAT)
    if root.tag != "annotations":
        raise TracksFormatError([(root.line, f"the root element must be <annotations>, got <{root.tag}>")], what=WHAT)
    version = root.find("version")
    if version is None or version.text.strip() != VERSION:
        found = "no <version>" if version is None else f"<version>{shown(version.text.strip())}</version>"
        raise TracksFormatError([(version.line if version is not None else root.line,
                                  f"expected <version>{VERSION}</version> (CVAT for video 1.1), found {found}")],
                                what=WHAT)
    images = root.findall("image")
    if images:
        raise TracksFormatError([(images[0].line, "<image> elements belong to 'CVAT for images'; export the video "
                                                  "task as 'CVAT for video 1.1'")], what=WHAT)
    step, end, declared, declared_line = _grid(_task_of(root, problems), problems, frame_count)
    budget = Budget(max_boxes)
    tracks, seen_ids, counts, skipped, listed = [], {}, {}, {}, 0
    for element in root.findall("track"):
        if problems.full:
            break
        raw_id = element.attrib.get("id")
        if raw_id is None:
            problems.add(element.line, "<track> has no 'id' attribute")
            continue
        track_id = finite_number(raw_id, line=element.line, column="track id", problems=problems, integer=True)
        if track_id is None:
            continue
        if (problem := track_id_problem(track_id, column="track id")) is not None:
            problems.add(element.line, problem)
            continue
        name = f"track {track_id}"
        if track_id in seen_ids:
            problems.add(element.line, f"{name} is listed twice (first on line {seen_ids[track_id]})")
            continue
        seen_ids[track_id] = element.line
        label = _label(element, name=name, problems=problems)
        boxes = element.findall("box")
        others = sorted({c.tag for c in element.children if c.tag in OTHER_SHAPES})
        if not boxes:
            skipped["tracks_not_boxes"] = skipped.get("tracks_not_boxes", 0) + 1
            continue
        if others:
            problems.add(element.line, f"{name} mixes <box> with <{'>, <'.join(others)}>; a track has one shape")
            continue
        keyframes = [k for k in (_box_keyframe(b, track=name, problems=problems) for b in boxes) if k is not None]
        listed += len(boxes)
        keyframes = _shortest_turns(sorted_keyframes(keyframes, track=name, problems=problems))
        if label is None or len(keyframes) < len(boxes) or past_video(keyframes, frame_count=frame_count,
                                                                      frame_base=0, track=name, problems=problems):
            continue
        budget.spend(expanded_count(keyframes, step=step, end=end))
        track, track_counts = expanded_track(keyframes, track_id=track_id, category=label, to_boxes=_boxes_of,
                                             step=step, end=end)
        outside = sum(1 for k in keyframes if not k.shown)
        add_counts(skipped, {"outside": outside})
        add_counts(counts, {**track_counts, "keyframes": sum(1 for b in boxes if b.attrib.get("keyframe") == "1"),
                            "rotated": sum(1 for k in keyframes if k.params[4] != 0)})
        if track is not None:
            tracks.append(track)
    problems.raise_if_any()
    if not tracks:
        extra = f" ({skipped['tracks_not_boxes']} track(s) of other shapes left out)" if skipped.get("tracks_not_boxes") \
            else ""
        raise TracksFormatError([(root.line, f"the file holds no box track with a visible box{extra}")], what=WHAT)
    return ParsedTracks(format="cvat", tracks=tracks, n_rows=sum(t.n_obs for t in tracks), skipped=skipped,
                        noted=counts, declared_video=declared, declared_line=declared_line,
                        meta={"listed_boxes": listed, "frame_step": step})
