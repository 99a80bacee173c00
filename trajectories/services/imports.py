"""Importing existing tracks and tubes as proposal runs of kind ``imported`` (issue 14, item 1).

A file (MOTChallenge, the JSON tube format or CSV; ``models.tracks_io``) is parsed and checked
against the video's geometry before anything is written; any problem refuses the whole file with
its line number (400 ``invalid_track_file``). The run, its :class:`TrackImport` record (source,
format, file SHA-256, review mode) and its trajectories are then written in one transaction.
Importing the same file with the same options onto the same video returns the existing run.

``purpose="proposals"`` (default): candidate trajectories that go through the usual usability and
duplicate review (``review="reviewed"``) or are retained as the source gives them
(``review="source_verified"``, with the reason stored). ``purpose="tubes"``: annotated tubes
(seed D.1) that proposals are matched against (``trajectories.services.tube_matching``); they open
no review and never become a candidate pool.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Max

from common.errors import ApplicationError, ConflictError, RequestTooLarge
from models.backends.tracking.base import TrackProposal
from models.media.trajectory_ops import trajectory_appearance
from models.media.video import FrameReader, VideoError
from models.tracks_io import (
    FORMATS,
    ParsedTracks,
    TracksFormatError,
    check_against_video,
    parse_tracks,
)
from models.tracks_io.mot import declare_seqinfo, parse_seqinfo
from trajectories.models import ProposalConfig, ProposalRun, TrackImport, Video
from trajectories.services.proposals import _lock_split_group, trajectories_store

logger = logging.getLogger(__name__)
MAX_TRACK_FILE_BYTES = 64 * 1024 * 1024   # a larger tracks file is refused (413)
IMPORT_VERSION = "1"                      # the reading rules of models.tracks_io, part of the config hash


@dataclass
class TrackImportResult:
    run: ProposalRun
    created: bool          # False: this file with these options was already imported onto the video


def _refuse(exc: TracksFormatError, file_name: str) -> ApplicationError:
    return ApplicationError(f"{file_name}: {exc}; nothing was imported", code="invalid_track_file",
                            extra={"problems": [{"line": line, "message": message} for line, message in exc.problems],
                                   "file": file_name})


def _decode(data: bytes, file_name: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ApplicationError(f"{file_name}: not UTF-8 text (byte {exc.start}); nothing was imported",
                               code="invalid_track_file", extra={"problems": [], "file": file_name}) from None


def tracks_parse(*, data: bytes, file_name: str, fmt: str, video: Video, gt: bool | None = None,
                 frame_base: int = 0, clip: bool = False, seqinfo: bytes | None = None) -> tuple[ParsedTracks, dict]:
    """Parse and check a tracks file against ``video`` (pure reading, nothing written). Returns the
    tracks and the reading options as recorded. 400 ``invalid_track_file`` lists the problems."""
    if fmt not in FORMATS:
        raise ApplicationError(f"unknown format {fmt!r}; use one of {list(FORMATS)}", code="invalid_format")
    if len(data) > MAX_TRACK_FILE_BYTES:
        raise RequestTooLarge(limit=MAX_TRACK_FILE_BYTES)
    text = _decode(data, file_name)
    if fmt == "mot":
        gt = Path(file_name).name == "gt.txt" if gt is None else bool(gt)
        options = {"gt": gt}
    elif fmt == "csv":
        options = {"frame_base": int(frame_base)}
    else:
        options = {}
    try:
        parsed = parse_tracks(fmt, text, **options)
        if fmt == "mot" and seqinfo is not None:
            declare_seqinfo(parsed, parse_seqinfo(_decode(seqinfo, "seqinfo.ini")))
        counts = check_against_video(parsed, width=video.width, height=video.height, frame_count=video.frame_count,
                                     clip=clip)
    except TracksFormatError as exc:
        raise _refuse(exc, file_name) from None
    parsed.meta["counts"] = {"rows": parsed.n_rows, **parsed.skipped, **counts}
    return parsed, {**options, "clip": bool(clip)}


def _config_for(*, fmt: str, purpose: str, file_sha256: str, options: dict, categories: list[str],
                created_by) -> ProposalConfig:
    """The configuration of an import: backend ``imported``, identified by the file's hash and the
    reading options (so the same file read the same way is one configuration)."""
    settings = {"format": fmt, "purpose": purpose, "file_sha256": file_sha256, "options": options,
                "reader": IMPORT_VERSION}
    config_hash = hashlib.sha256(json.dumps({"backend": "imported", **settings}, sort_keys=True).encode()).hexdigest()
    existing = ProposalConfig.objects.filter(config_hash=config_hash).first()
    if existing is not None:
        return existing
    name = f"imported-{fmt}"
    version = (ProposalConfig.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    return ProposalConfig.objects.create(
        name=name, version=version, backend=ProposalConfig.Backend.IMPORTED, categories=categories,
        tracker_settings=settings, software={"trajlab-tracks-io": IMPORT_VERSION}, config_hash=config_hash,
        created_by=created_by)


def _appearances(video: Video, proposals: list[TrackProposal]) -> list[np.ndarray] | None:
    """Appearance descriptors for duplicate proposals, read from the video's frames (as a tracker's
    run has them); ``None`` when the video's media cannot be read here."""
    if not video.abspath.exists():
        return None
    try:
        reader = FrameReader(video.abspath, fps=video.fps, frame_count=video.frame_count, cache_frames=64,
                             seekable=video.seekable)
    except VideoError as exc:
        logger.warning("video %s: no appearance descriptors for the import (%s)", video.pk, exc)
        return None
    try:
        return [trajectory_appearance(reader.read, p.frames, p.boxes) for p in proposals]
    finally:
        reader.close()


def track_import(*, video: Video, data: bytes, file_name: str, fmt: str, source: str, purpose: str = "proposals",
                 review: str = "reviewed", review_reason: str = "", gt: bool | None = None, frame_base: int = 0,
                 clip: bool = False, seqinfo: bytes | None = None, created_by=None) -> TrackImportResult:
    """Import a tracks file onto ``video`` as a proposal run of kind ``imported``.

    Preconditions (checked before anything is written): a known format, purpose and review mode; a
    reason for ``source_verified``; tubes are not reviewed as candidates, so ``purpose="tubes"``
    takes no review mode; a file that parses and fits the video (400 ``invalid_track_file`` with
    line numbers); the video's split assigned (409 ``split_unassigned``, it locks now). Writes the
    configuration, run, import record and trajectories in one transaction, locking the video's
    split group row and (through ``trajectories_store``) the run row; review opens in the same
    transaction for reviewed proposals (``trajectories.signals.proposal_run_stored``).
    """
    source, review_reason = source.strip(), review_reason.strip()
    if purpose not in TrackImport.Purpose.values:
        raise ApplicationError(f"unknown purpose {purpose!r}; use one of {TrackImport.Purpose.values}",
                               code="invalid_purpose")
    if review not in TrackImport.Review.values:
        raise ApplicationError(f"unknown review mode {review!r}; use one of {TrackImport.Review.values}",
                               code="invalid_review")
    if review == TrackImport.Review.SOURCE_VERIFIED and not review_reason:
        raise ApplicationError("source-verified tracks skip usability and duplicate review: say why the source "
                               "can be trusted in `review_reason`", code="reason_required")
    if purpose == TrackImport.Purpose.TUBES and review != TrackImport.Review.REVIEWED:
        raise ApplicationError("annotated tubes are matched against proposals, not reviewed as candidates: "
                               "leave the review mode at 'reviewed'", code="invalid_review")
    if not source or len(source) > 500:
        raise ApplicationError("say where the file comes from in `source` (1 to 500 characters)", code="source_required")
    parsed, options = tracks_parse(data=data, file_name=file_name, fmt=fmt, video=video, gt=gt,
                                   frame_base=frame_base, clip=clip, seqinfo=seqinfo)
    file_sha256 = hashlib.sha256(data).hexdigest()
    proposals = [TrackProposal(track_id=t.track_id, category=t.category, frames=t.frames, boxes=t.boxes,
                               scores=t.scores) for t in parsed.tracks]
    appearances = _appearances(video, proposals) if purpose == TrackImport.Purpose.PROPOSALS else None
    categories = sorted({t.category for t in parsed.tracks})
    try:
        with transaction.atomic():
            _lock_split_group(video)
            config = _config_for(fmt=fmt, purpose=purpose, file_sha256=file_sha256, options=options,
                                 categories=categories, created_by=created_by)
            run, created = ProposalRun.objects.select_for_update().get_or_create(
                video=video, config=config,
                defaults={"kind": ProposalRun.Kind.IMPORTED, "created_by": created_by})
            if not created and run.status == ProposalRun.Status.SUCCEEDED:
                return TrackImportResult(run=run, created=False)
            TrackImport.objects.update_or_create(run=run, defaults=dict(
                format=fmt, purpose=purpose, source=source, file_name=Path(file_name).name[:255],
                file_sha256=file_sha256, review=review, review_reason=review_reason, options=options,
                counts=parsed.meta["counts"], created_by=created_by,
                captions={str(t.track_id): t.caption for t in parsed.tracks if t.caption}))
            trajectories_store(run=run, proposals=proposals, appearances=appearances)
    except IntegrityError as exc:
        raise ConflictError(f"a concurrent import of {file_name} onto video {video.pk} got there first; "
                            "import again to get its run", code="busy") from exc
    run.refresh_from_db()
    return TrackImportResult(run=run, created=True)
