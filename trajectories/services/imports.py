"""Importing existing tracks and tubes as proposal runs of kind ``imported`` (issue 14, item 1).

An import has two halves. The request (:func:`track_import_create`) reads the file and checks it
against the video (``trajectories.services.track_files``: any problem refuses the whole file with
its line numbers, nothing written), asks for a confirmation when the file may belong to another
video (409 ``fit_unconfirmed``, ``models.tracks_io.fit``), and then, in one short transaction,
writes the run, its :class:`TrackImport` record (source, format, file SHA-256, review mode, the file
itself) and a Job on the ``cpu`` queue. The job (:func:`track_import_execute`, through
``common.jobs.runs.run_execute`` like a tracker's run) reads the file again, computes appearance
descriptors from the video's frames and the duplicate pairs, with progress, and stores the
trajectories, the pairs and the run's status in one transaction (``trajectories_store``); the
heavy work holds no lock. Importing the same file with the same options onto the same video returns
the existing run; a failed or cancelled one is queued again in place.

Nothing of a refused file is kept: a refusal comes before the transaction, and the transaction
writes all or nothing. A job that fails leaves its run failed, with the reason and without any
trajectory, to be retried; an import run here (:func:`track_import`, the command line) that fails
is removed again, run, record, job and configuration.

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
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from common.errors import ApplicationError, ConflictError
from common.jobs.runs import RunOutcome, run_enqueue, run_execute
from common.jobs.services import job_create
from common.models import Job
from common.storage import StorageError, store
from common.text import checked_text
from models.backends.tracking.base import TrackProposal
from models.media.trajectory_ops import (
    TooManyPairs,
    propose_duplicate_pairs,
    trajectories_appearance,
)
from models.media.video import FrameReader, VideoError
from trajectories.models import ProposalConfig, ProposalRun, TrackImport, Video
from trajectories.services.proposals import _is_stale, _lock_split_group, trajectories_store
from trajectories.services.track_files import TrackFile, reading_options, track_file_read

logger = logging.getLogger(__name__)
IMPORT_VERSION = "1"                      # the reading rules of models.tracks_io, part of the config hash
JOB_KIND = "track_import"
MAX_ATTEMPTS = 3                          # deliveries of one import's job before it is failed


@dataclass
class TrackImportResult:
    run: ProposalRun
    created: bool          # False: this file with these options was already imported (or is queued) onto the video


def _config_for(*, fmt: str, purpose: str, file_sha256: str, options: dict, categories: list[str],
                created_by) -> ProposalConfig:
    """The configuration of an import: backend ``imported``, identified by the file's hash and the
    reading options (so the same file read the same way is one configuration)."""
    reading = {"format": fmt, "purpose": purpose, "file_sha256": file_sha256, "options": options,
               "reader": IMPORT_VERSION}
    config_hash = hashlib.sha256(json.dumps({"backend": "imported", **reading}, sort_keys=True).encode()).hexdigest()
    existing = ProposalConfig.objects.filter(config_hash=config_hash).first()
    if existing is not None:
        return existing
    name = f"imported-{fmt}"
    version = (ProposalConfig.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    return ProposalConfig.objects.create(
        name=name, version=version, backend=ProposalConfig.Backend.IMPORTED, categories=categories,
        tracker_settings=reading, software={"trajlab-tracks-io": IMPORT_VERSION}, config_hash=config_hash,
        created_by=created_by)


def _preconditions(*, source: str, purpose: str, review: str, review_reason: str, file_name: str) -> None:
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
    for value, field in ((source, "source"), (review_reason, "review_reason"), (file_name, "file")):
        checked_text(value, field=field)


def _unconfirmed(findings: list[dict], video: Video) -> ConflictError:
    listed = "; ".join(f["message"] for f in findings)
    return ConflictError(f"the file may not belong to video {video.pk} ({video.name}, {video.width}x{video.height}, "
                         f"{video.frame_count} frames): {listed}. Check the preview, then import with "
                         "confirm_fit to import it anyway", code="fit_unconfirmed", extra={"findings": findings})


def track_import_create(*, video: Video, data: bytes, file_name: str, fmt: str, source: str,
                        purpose: str = "proposals", review: str = "reviewed", review_reason: str = "",
                        gt: bool | None = None, frame_base: int = 0, clip: bool = False,
                        seqinfo: bytes | None = None, confirm_fit: bool = False, created_by=None,
                        queue: bool = True) -> TrackImportResult:
    """Check a tracks file against ``video`` and queue its import as a proposal run of kind ``imported``.

    Preconditions, checked before anything is written: a known format, purpose and review mode; a
    reason for ``source_verified``; tubes are not reviewed as candidates, so ``purpose="tubes"``
    takes no review mode; texts a column stores; a file that parses and fits the video (400
    ``invalid_track_file`` with line numbers, 413, 400 ``too_many_*``); its fit findings confirmed
    (409 ``fit_unconfirmed``); the video's split assigned (409 ``split_unassigned``, it locks now).

    Then one transaction locks the video's split group row and the run row (so two requests cannot
    queue one run twice), writes the configuration, the run, its import record with the file, and a
    Job, and sends the job's task after commit (``queue=False``: not sent; run it with
    :func:`track_import_execute`). A run of this file and options that is queued, running or done
    is returned as it is (``created=False``); a failed, cancelled or stale one is queued again.
    """
    source, review_reason = source.strip(), review_reason.strip()
    file_name = Path(file_name).name[:255]
    _preconditions(source=source, purpose=purpose, review=review, review_reason=review_reason, file_name=file_name)
    options = reading_options(fmt=fmt, file_name=file_name, gt=gt, frame_base=frame_base, clip=clip)
    checked = track_file_read(data=data, file_name=file_name, fmt=fmt, video=video, options=options,
                              purpose=purpose, seqinfo=seqinfo)
    if checked.findings and not confirm_fit:
        raise _unconfirmed(checked.findings, video)
    parsed = checked.parsed
    file_sha256 = hashlib.sha256(data).hexdigest()
    categories = sorted({t.category for t in parsed.tracks})
    try:
        with transaction.atomic():
            _lock_split_group(video)
            config = _config_for(fmt=fmt, purpose=purpose, file_sha256=file_sha256, options=options,
                                 categories=categories, created_by=created_by)
            run, created = ProposalRun.objects.select_for_update(of=("self",)).select_related("job").get_or_create(
                video=video, config=config,
                defaults={"kind": ProposalRun.Kind.IMPORTED, "created_by": created_by})
            if not created and run.status != ProposalRun.Status.FAILED and run.status != ProposalRun.Status.CANCELLED \
                    and not _is_stale(run):
                return TrackImportResult(run=run, created=False)
            TrackImport.objects.update_or_create(run=run, defaults=dict(
                format=fmt, purpose=purpose, source=source, file_name=file_name, file_sha256=file_sha256,
                review=review, review_reason=review_reason, options=options, counts=parsed.meta["counts"],
                created_by=created_by, fit_findings=checked.findings, data=data,
                captions={str(t.track_id): t.caption for t in parsed.tracks if t.caption}))
            run.job = job_create(kind=JOB_KIND, queue="cpu", created_by=created_by,
                                 params={"proposal_run": run.pk, "video": video.pk, "file": file_name})
            run.status, run.error, run.cancel_requested, run.finished_at = ProposalRun.Status.QUEUED, "", False, None
            run.save(update_fields=["job", "status", "error", "cancel_requested", "finished_at"])
            if queue:
                run_enqueue(run=run)
    except IntegrityError as exc:
        raise ConflictError(f"a concurrent import of {file_name} onto video {video.pk} got there first; "
                            "import again to get its run", code="busy") from exc
    return TrackImportResult(run=run, created=True)


def track_import_execute(*, run_id: int, echo=None) -> ProposalRun:
    """Store the tracks of a queued import (the job's body, through ``run_execute``: start, progress,
    cancel at a progress report, fail with the reason, succeed). Safe to call again after a crash or
    a re-delivery: a succeeded or cancelled run is returned as it is, and the trajectories are
    written in one transaction with the run's new status."""
    run = ProposalRun.objects.select_related("job").get(pk=run_id)
    return run_execute(run, _track_import_body, echo=echo, max_attempts=MAX_ATTEMPTS,
                       skip=(ProposalRun.Status.SUCCEEDED, ProposalRun.Status.CANCELLED))


def _appearances(video: Video, proposals: list[TrackProposal], progress) -> list[np.ndarray] | None:
    """Appearance descriptors for duplicate proposals, read from the video's frames (as a tracker's
    run has them), each frame decoded once; ``None`` when the video's media cannot be read here."""
    try:
        media = video.abspath
        if not media.exists():
            return None
        reader = FrameReader(media, fps=video.fps, frame_count=video.frame_count, cache_frames=8,
                             seekable=video.seekable)
    except (VideoError, StorageError) as exc:
        logger.warning("video %s: no appearance descriptors for the import (%s)", video.pk, exc)
        return None
    try:
        return trajectories_appearance(reader.read, [(p.frames, p.boxes) for p in proposals], progress=progress)
    finally:
        reader.close()


def _duplicate_pairs(proposals: list[TrackProposal], appearances: list[np.ndarray] | None, progress) -> list:
    """The duplicate pairs among the proposals (on their indices, as ``trajectories_store`` takes
    them), at most ``TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES``: more fail the job (``too_many_duplicates``)."""
    limit = settings.TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES
    try:
        return propose_duplicate_pairs([(i, p.frames, p.boxes, appearances[i] if appearances is not None else None)
                                        for i, p in enumerate(proposals)], max_pairs=limit, progress=progress)
    except TooManyPairs:
        raise ApplicationError(
            f"the file's {len(proposals)} tracks make more than {limit} duplicate pairs (tracks that overlap, or end "
            "where another starts): too many to review. Check that the file belongs to the video, import it as "
            "annotated tubes, or ask the operator to raise TRAJLAB_TRACK_IMPORT_MAX_DUPLICATES",
            code="too_many_duplicates", extra={"limit": limit}) from None


def _track_import_body(run: ProposalRun, reporter) -> RunOutcome:
    run = ProposalRun.objects.select_related("video").get(pk=run.pk)
    record = TrackImport.objects.get(run=run)
    video = run.video
    checked: TrackFile = track_file_read(data=bytes(record.data), file_name=record.file_name, fmt=record.format,
                                         video=video, options=record.options, purpose=record.purpose)
    proposals = [TrackProposal(track_id=t.track_id, category=t.category, frames=t.frames, boxes=t.boxes,
                               scores=t.scores) for t in checked.parsed.tracks]
    reporter(0.05, f"{len(proposals)} tracks read from {record.file_name}")
    appearances, pairs = None, []          # annotated tubes are supervision: no duplicate review among them
    if record.purpose == TrackImport.Purpose.PROPOSALS:
        appearances = _appearances(video, proposals, lambda f: reporter(0.05 + 0.5 * f, "appearance descriptors"))
        pairs = _duplicate_pairs(proposals, appearances, lambda f: reporter(0.55 + 0.3 * f, "duplicate pairs"))
    reporter(0.85, f"storing {len(proposals)} trajectories and {len(pairs)} duplicate pairs")
    n_dups = trajectories_store(run=run, proposals=proposals, appearances=appearances, pairs=pairs)
    TrackImport.objects.filter(pk=record.pk).update(data=b"")
    run.refresh_from_db()
    return RunOutcome(result={"trajectories": run.trajectory_count, "duplicate_candidates": n_dups},
                      message=f"{run.trajectory_count} tracks, {n_dups} duplicate candidates")


def _discard(run: ProposalRun) -> None:
    """Remove an import run here that failed: its run, record, job and (when no other run uses it)
    configuration; it stored no trajectory."""
    with transaction.atomic():
        config_id, job_id = run.config_id, run.job_id
        ProposalRun.objects.filter(pk=run.pk).delete()
        Job.objects.filter(pk=job_id).delete()
        ProposalConfig.objects.filter(pk=config_id, runs__isnull=True).delete()


def track_import(*, echo=None, **kwargs) -> TrackImportResult:
    """Import a tracks file here and now (the command line, tests): :func:`track_import_create`
    without queueing, then :func:`track_import_execute`. A failure at any step leaves nothing behind
    (the run, record, job and configuration are removed) and is raised as ``ApplicationError``
    ``track_import_failed`` with the reason."""
    result = track_import_create(queue=False, **kwargs)
    if not result.created:
        return result
    try:
        run = track_import_execute(run_id=result.run.pk, echo=echo)
    except BaseException:
        _discard(result.run)
        raise
    if run.status != ProposalRun.Status.SUCCEEDED:
        _discard(run)
        raise ApplicationError(f"the import failed and nothing was kept: {run.error or run.status}",
                               code="track_import_failed")
    return TrackImportResult(run=run, created=True)


def imported_video_discard(*, brought: list) -> None:
    """Remove what importing a MOTChallenge folder's own video created (its :class:`Video` with its
    media, and a split group or source made for it), when the import of its tracks failed: a
    refused folder leaves nothing behind. A video that has a run by now is kept."""
    for record in brought:
        if isinstance(record, Video):
            if ProposalRun.objects.filter(video=record).exists():
                return
            objects = store()
            record.delete()
            objects.delete(record.path)
            if not objects.remote:
                try:
                    objects.local_path(record.path).parent.rmdir()  # its shard folder (videos/<2 hex>/), if empty
                except OSError:
                    pass
        elif not record.videos.exists():
            record.delete()
