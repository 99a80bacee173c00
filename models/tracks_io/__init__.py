"""Reading existing tracks and tubes: MOTChallenge folders and files, the Trajlab JSON tube format
and CSV, each parsed into :class:`~models.tracks_io.records.ParsedTracks` and checked against the
video's geometry with line numbers (:func:`~models.tracks_io.records.check_against_video`)."""
from models.tracks_io import csv_tracks, mot, tubes_json
from models.tracks_io.records import (
    FORMATS,
    ImportedTrack,
    ParsedTracks,
    TracksFormatError,
    check_against_video,
)

_PARSERS = {"mot": mot.parse_mot, "json": tubes_json.parse_tubes_json, "csv": csv_tracks.parse_tracks_csv}


def parse_tracks(fmt: str, text: str, **options) -> ParsedTracks:
    """Parse ``text`` in format ``fmt`` (``mot``: option ``gt``; ``json``; ``csv``: option
    ``frame_base``). Raises :class:`TracksFormatError`, also for a file with no tracks."""
    if fmt not in _PARSERS:
        raise TracksFormatError([(0, f"unknown format {fmt!r}; use one of {list(FORMATS)}")])
    parsed = _PARSERS[fmt](text, **options)
    if not parsed.tracks:
        raise TracksFormatError([(0, "the file holds no tracks")])
    return parsed


__all__ = ["FORMATS", "ImportedTrack", "ParsedTracks", "TracksFormatError", "check_against_video", "parse_tracks"]
