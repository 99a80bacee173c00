"""Reading existing tracks and tubes: MOTChallenge folders and files, the Trajlab JSON tube format,
CSV, CVAT for video 1.1 XML and Label Studio's video object tracking JSON, each parsed into
:class:`~models.tracks_io.records.ParsedTracks` and checked against the video's geometry with line
numbers (:func:`~models.tracks_io.records.check_against_video`)."""
from models.tracks_io import csv_tracks, cvat_video, label_studio, mot, tubes_json
from models.tracks_io.keyframes import TooManyBoxes
from models.tracks_io.records import (
    FORMATS,
    ImportedTrack,
    ParsedTracks,
    TracksFormatError,
    check_against_video,
)

_PARSERS = {"mot": mot.parse_mot, "json": tubes_json.parse_tubes_json, "csv": csv_tracks.parse_tracks_csv,
            "cvat": cvat_video.parse_cvat_video, "labelstudio": label_studio.parse_label_studio_video}
# The formats that store keyframes: they are expanded against the video (its size, its frames) and
# within a budget of boxes.
KEYFRAME_FORMATS = ("cvat", "labelstudio")


def parse_tracks(fmt: str, text: str, *, video: dict | None = None, max_boxes: int | None = None,
                 **options) -> ParsedTracks:
    """Parse ``text`` in format ``fmt`` (``mot``: option ``gt``; ``json``; ``csv``: option
    ``frame_base``; ``cvat``; ``labelstudio``). The keyframe formats take the ``video`` they are
    read for (``width``, ``height``, ``frame_count``; Label Studio's percentages need its size) and
    refuse more than ``max_boxes`` boxes once expanded (:class:`TooManyBoxes`). Raises
    :class:`TracksFormatError`, also for a file with no tracks."""
    if fmt not in _PARSERS:
        raise TracksFormatError([(0, f"unknown format {fmt!r}; use one of {list(FORMATS)}")])
    if fmt == "cvat":
        parsed = cvat_video.parse_cvat_video(text, frame_count=(video or {}).get("frame_count"), max_boxes=max_boxes)
    elif fmt == "labelstudio":
        if not video:
            raise TracksFormatError([(0, "Label Studio boxes are percentages of the frame: the file is read for a "
                                         "video, whose size turns them into pixels")], what="Label Studio JSON file")
        parsed = label_studio.parse_label_studio_video(text, width=video["width"], height=video["height"],
                                                       frame_count=video.get("frame_count"), max_boxes=max_boxes)
    else:
        parsed = _PARSERS[fmt](text, **options)
    if not parsed.tracks:
        raise TracksFormatError([(0, "the file holds no tracks")])
    return parsed


__all__ = ["FORMATS", "KEYFRAME_FORMATS", "ImportedTrack", "ParsedTracks", "TooManyBoxes", "TracksFormatError",
           "check_against_video", "parse_tracks"]
