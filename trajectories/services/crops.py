"""Crop strips made once, when a run is stored, so reviewers' screens read files, not decoders.

A review screen shows each trajectory's crops (the player's strip, a pair's target strip): made on
request, each crop costs a seek, a decode, a crop and an encode, seconds under load, and a vote sent
meanwhile waited behind them. :func:`crop_strips_store` makes every strip the screens ask for
(:data:`CROP_STRIPS`) after a run's trajectories are stored (``crop_strips_task`` on the cpu queue,
sent after the run's transaction commits), reading each video once, forward; the crop endpoint
then answers from the file (``trajectories.crop_files``), and keeps a strip's crop it had to make
itself; any other crop is made on request and kept in memory only. A crop is a function of the video
file, the stored box and the size, all immutable once a run is stored.
"""
from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from django.db import transaction

from common.storage import StorageError
from models.media.video import FrameReader, VideoError, crop_box, encode_jpeg
from trajectories.crop_files import CROP_PAD, CROP_STRIPS, crop_file_write, crop_path, strip_frames
from trajectories.models import ProposalRun, Trajectory

logger = logging.getLogger(__name__)
TASK = "trajectories.tasks.crop_strips_task"
MAX_TRAJECTORIES = 5000                          # a bigger run's crops are made on request only


def crop_strips_store(*, run: ProposalRun) -> dict:
    """Make every missing crop of :data:`CROP_STRIPS` for the run's trajectories, reading its video
    once in frame order. Idempotent; returns ``{"made", "kept", "failed"}`` counts. A video that
    cannot be read is logged and skipped (the endpoint then makes crops on request, as before)."""
    wanted: dict[int, list[tuple[Trajectory, int]]] = {}   # frame -> (trajectory, max size)
    counts = {"made": 0, "kept": 0, "failed": 0}
    trajectories = list(Trajectory.objects.filter(run=run).select_related("video").order_by("pk"))
    if len(trajectories) > MAX_TRAJECTORIES:
        logger.info("run %s has %s trajectories: its crops are made on request", run.pk, len(trajectories))
        return counts
    for trajectory in trajectories:
        for n, size in CROP_STRIPS:
            for index in strip_frames(trajectory, n):
                if crop_path(trajectory=trajectory, index=index, max_size=size).is_file():
                    counts["kept"] += 1
                else:
                    wanted.setdefault(index, []).append((trajectory, size))
    if not wanted:
        return counts
    video = trajectories[0].video
    try:
        reader = FrameReader(video.abspath, fps=video.fps, frame_count=video.frame_count, seekable=video.seekable,
                             cache_frames=0)
    except (VideoError, OSError, StorageError) as exc:    # unreadable, missing, or changed behind the platform
        logger.warning("crop strips of run %s: video %s cannot be read: %s", run.pk, video.pk, exc)
        counts["failed"] = sum(len(v) for v in wanted.values())
        return counts
    with reader:
        for index in sorted(wanted):
            try:
                frame = reader.read(index)
            except (VideoError, OSError, IndexError) as exc:
                logger.warning("crop strips of run %s: frame %s: %s", run.pk, index, exc)
                counts["failed"] += len(wanted[index])
                continue
            for trajectory, size in wanted[index]:
                try:
                    data = encode_jpeg(crop_box(frame, trajectory.box_at(index), pad=CROP_PAD), max_size=size)
                except (ValueError, VideoError) as exc:
                    logger.warning("crop of trajectory %s at frame %s: %s", trajectory.pk, index, exc)
                    counts["failed"] += 1
                    continue
                crop_file_write(trajectory=trajectory, index=index, max_size=size, data=data)
                counts["made"] += 1
    return counts


def crops_queued(run: ProposalRun) -> bool:
    """Whether a stored run's strips go to the cpu queue as their own task: a run stored by a
    gpu-queue job (a GPU worker decodes no video for crops) or by no job; a cpu-queue job's worker
    makes them itself right after the run (``trajectories.tasks``)."""
    queue = run.job.queue if run.job_id else None
    return queue != "cpu"


def crop_strips_enqueue(*, run: ProposalRun) -> None:
    """Send ``crop_strips_task`` for ``run`` to the cpu queue once the current transaction commits,
    where :func:`crops_queued` says so (best effort: a refused message only means crops are made
    on request)."""
    if not settings.TRAJLAB_PRECOMPUTE_CROPS or not crops_queued(run):
        return
    pk = run.pk

    def send() -> None:
        try:
            current_app.send_task(TASK, args=[pk], queue="cpu")
        except Exception:  # the broker is down: reviewers' screens make crops on request
            logger.exception("could not queue the crop strips of run %s", pk)

    transaction.on_commit(send)
