"""Reading a tracks file against the video it is meant for: pure reading, nothing written.

The request that imports a file, the check the import form asks for before it, and the job that
stores the tracks all read it here (``models.tracks_io``), so each refuses a file the same way:

- 413 ``too_large``: a file over ``TRAJLAB_TRACK_FILE_MAX_BYTES``;
- 400 ``invalid_track_file``: bytes that are not UTF-8, a malformed file, a box or frame outside
  the video, text no column stores, a number out of its column's range; ``extra.problems`` lists
  ``{line, message}`` and ``extra.file`` names the file (``seqinfo.ini`` for its problems);
- 400 ``too_many_tracks`` / ``too_many_boxes``: more than ``TRAJLAB_TRACK_IMPORT_MAX_TRACKS`` or
  ``TRAJLAB_TRACK_IMPORT_MAX_BOXES`` (CVAT and Label Studio files: boxes once their keyframes are
  interpolated, counted before any is built; they are read for the video, whose size turns Label
  Studio's percentages into pixels and whose length ends a track held to the end).

A file that passes may still not fit the video (``models.tracks_io.fit``): those findings need
the importer's confirmation, which :func:`trajectories.services.imports.track_import_create` asks for.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from common.errors import ApplicationError, RequestTooLarge
from common.text import checked_text
from models.tracks_io import (
    FORMATS,
    KEYFRAME_FORMATS,
    ParsedTracks,
    TooManyBoxes,
    TracksFormatError,
    check_against_video,
    parse_tracks,
)
from models.tracks_io.fit import file_extent, fit_findings, preview_frames
from models.tracks_io.mot import declare_seqinfo, parse_seqinfo
from trajectories.models import TrackImport, Video


@dataclass
class TrackFile:
    """A tracks file read and checked against a video."""

    parsed: ParsedTracks          # its tracks, boxes clipped when asked (empty when problems refuse it)
    options: dict                 # how it was read: gt (mot), frame_base (csv), clip
    problems: list[dict] = field(default_factory=list)   # what refuses it onto this video: {line, message}
    findings: list[dict] = field(default_factory=list)   # what needs a confirmation (models.tracks_io.fit)
    extent: dict = field(default_factory=dict)            # frames and area its boxes span
    preview: list[dict] = field(default_factory=list)     # the boxes of its first frames, as the file gives them


def _refusal(problems: list[tuple[int, str]], message: str, file_name: str) -> ApplicationError:
    return ApplicationError(f"{file_name}: {message}; nothing was imported", code="invalid_track_file",
                            extra={"problems": [{"line": line, "message": text} for line, text in problems],
                                   "file": file_name})


def _refuse(exc: TracksFormatError, file_name: str) -> ApplicationError:
    return _refusal(exc.problems, str(exc), file_name)


def _decode(data: bytes, file_name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise _refusal([(line, f"not UTF-8 text (byte {exc.start})")], f"line {line}: not UTF-8 text",
                       file_name) from None


def reading_options(*, fmt: str, file_name: str, gt: bool | None, frame_base: int, clip: bool) -> dict:
    """The options a file is read with, as its import records them (part of its configuration)."""
    if fmt == "mot":
        options = {"gt": Path(file_name).name == "gt.txt" if gt is None else bool(gt)}
    elif fmt == "csv":
        options = {"frame_base": int(frame_base)}
    else:
        options = {}
    return {**options, "clip": bool(clip)}


def track_file_read(*, data: bytes, file_name: str, fmt: str, video: Video, options: dict,
                    purpose: str = TrackImport.Purpose.PROPOSALS, seqinfo: bytes | None = None,
                    refuse: bool = True) -> TrackFile:
    """Parse ``data`` with ``options`` (:func:`reading_options`) and check it against ``video``.

    A file that does not parse, or is over the limits, is refused at once (module docstring). One
    that parses but does not fit the video (boxes outside it, frames past its end, a declared size
    that is not the video's) is refused too, unless ``refuse=False``: then its ``problems`` are
    returned with the preview, for a person to see why. ``findings`` are computed on the boxes as
    the file gives them, before any clipping."""
    if fmt not in FORMATS:
        raise ApplicationError(f"unknown format {fmt!r}; use one of {list(FORMATS)}", code="invalid_format")
    limit = settings.TRAJLAB_TRACK_FILE_MAX_BYTES
    if len(data) > limit or (seqinfo is not None and len(seqinfo) > limit):
        raise RequestTooLarge(limit=limit)
    text = _decode(data, file_name)
    read = {k: v for k, v in options.items() if k != "clip"}
    if fmt in KEYFRAME_FORMATS:      # expanded against the video, within the import's budget of boxes
        read.update(video={"width": video.width, "height": video.height, "frame_count": video.frame_count},
                    max_boxes=settings.TRAJLAB_TRACK_IMPORT_MAX_BOXES)
    try:
        parsed = parse_tracks(fmt, text, **read)
    except TracksFormatError as exc:
        raise _refuse(exc, file_name) from None
    except TooManyBoxes as exc:
        raise _too_many(count=exc.count, limit=exc.limit, code="too_many_boxes", what="boxes once its keyframes are "
                        "interpolated", setting="TRAJLAB_TRACK_IMPORT_MAX_BOXES", file_name=file_name) from None
    if fmt == "mot" and seqinfo is not None:
        try:
            declare_seqinfo(parsed, parse_seqinfo(_decode(seqinfo, "seqinfo.ini")))
        except TracksFormatError as exc:
            raise _refuse(exc, "seqinfo.ini") from None
    _check_limits(parsed, file_name)
    checked = TrackFile(parsed=parsed, options=dict(options), extent=file_extent(parsed),
                        preview=preview_frames(parsed))
    checked.findings = fit_findings(parsed, width=video.width, height=video.height, frame_count=video.frame_count,
                                    candidates=purpose != TrackImport.Purpose.TUBES)
    try:
        counts = check_against_video(parsed, width=video.width, height=video.height,
                                     frame_count=video.frame_count, clip=bool(options.get("clip")))
    except TracksFormatError as exc:
        if refuse:
            raise _refuse(exc, file_name) from None
        checked.problems = [{"line": line, "message": message} for line, message in exc.problems]
        return checked
    parsed.meta["counts"] = {"rows": parsed.n_rows, **parsed.skipped, **parsed.noted, **counts}
    return checked


def _too_many(*, count: int, limit: int, code: str, what: str, setting: str, file_name: str) -> ApplicationError:
    return ApplicationError(f"{file_name} holds {count} {what}, more than the {limit} an import takes; "
                            "split the file, or ask the operator to raise the limit; nothing was imported",
                            code=code, extra={"limit": limit, "count": count, "setting": setting, "file": file_name})


def _check_limits(parsed: ParsedTracks, file_name: str) -> None:
    for count, limit, code, what, setting in (
            (len(parsed.tracks), settings.TRAJLAB_TRACK_IMPORT_MAX_TRACKS, "too_many_tracks", "tracks",
             "TRAJLAB_TRACK_IMPORT_MAX_TRACKS"),
            (parsed.n_rows, settings.TRAJLAB_TRACK_IMPORT_MAX_BOXES, "too_many_boxes", "boxes",
             "TRAJLAB_TRACK_IMPORT_MAX_BOXES")):
        if count > limit:
            raise _too_many(count=count, limit=limit, code=code, what=what, setting=setting, file_name=file_name)


def track_file_check(*, video: Video, data: bytes, file_name: str, fmt: str, gt: bool | None = None,
                     frame_base: int = 0, clip: bool = False, seqinfo: bytes | None = None,
                     purpose: str = TrackImport.Purpose.PROPOSALS) -> TrackFile:
    """What importing ``data`` onto ``video`` would meet, before anything is written: a file that
    does not parse is refused as an import would refuse it; one that parses is returned with what
    refuses it onto this video (``problems``), what needs a confirmation (``findings``) and the
    boxes of its first frames (``preview``), so a person sees whether it belongs to the video."""
    if purpose not in TrackImport.Purpose.values:
        raise ApplicationError(f"unknown purpose {purpose!r}; use one of {TrackImport.Purpose.values}",
                               code="invalid_purpose")
    file_name = checked_text(Path(file_name).name[:255], field="file")
    options = reading_options(fmt=fmt, file_name=file_name, gt=gt, frame_base=frame_base, clip=clip)
    return track_file_read(data=data, file_name=file_name, fmt=fmt, video=video, options=options, purpose=purpose,
                           seqinfo=seqinfo, refuse=False)
