"""Proposal configurations and runs (DESIGN 2.2), and storage of their trajectories."""
from __future__ import annotations

import hashlib
import json
import logging
from importlib import metadata
from pathlib import Path

import numpy as np
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from common.errors import ApplicationError, ConflictError
from models.tracking import BACKENDS, build_tracker, tracker_settings_for
from models.tracking.base import TrackerConfigError, TrackProposal, run_tracker
from models.trajectory_ops import TrajectoryError, quality_signals, trajectory_appearance, validate_observations
from models.video import FrameReader, VideoError
from trajectories.models import ProposalConfig, ProposalRun, SplitGroup, Trajectory, Video
from trajectories.services.duplicates import duplicate_candidates_propose
from workers.models import Job
from workers.services import JobReporter, job_create, job_fail, job_start, job_succeed

logger = logging.getLogger(__name__)

SOFTWARE_PACKAGES = {
    "hog-bytetrack": ["numpy", "opencv-python-headless", "supervision"],
    "sam2": ["numpy", "opencv-python-headless", "supervision", "torch", "sam2"],
    "external": ["numpy"],
}


def software_versions(backend: str) -> dict[str, str]:
    versions = {}
    for pkg in SOFTWARE_PACKAGES.get(backend, []):
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return versions


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _canonical_hash(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@transaction.atomic
def proposal_config_create(*, name: str, backend: str, categories: list[str], checkpoint_path: str = "",
                           model_config_path: str = "", anchor_policy: dict | None = None,
                           detector_settings: dict | None = None, tracker_settings: dict | None = None,
                           created_by=None) -> ProposalConfig:
    """Create (or return the identical existing) versioned proposal configuration.

    The settings are validated by building the tracker's own configuration, and a SAM 2
    checkpoint must exist (its SHA-256 is recorded), so a configuration that cannot run is
    refused here instead of failing later in a worker.
    """
    if backend not in BACKENDS and backend != "external":
        raise ApplicationError(f"unknown backend {backend!r}; use one of {list(BACKENDS)}", code="unknown_backend")
    categories = [c.strip() for c in categories if c and c.strip()]
    if not categories:
        raise ApplicationError("at least one category prompt is required", code="categories_required")
    anchor_policy, detector_settings, tracker_settings = anchor_policy or {}, detector_settings or {}, tracker_settings or {}
    checkpoint_sha = ""
    if backend != "external":
        try:
            tracker_settings_for(backend, categories=categories, checkpoint_path=checkpoint_path,
                                 model_config_path=model_config_path, anchor_policy=anchor_policy,
                                 detector_settings=detector_settings, tracker_settings=tracker_settings,
                                 validate=True)
        except (TrackerConfigError, ValueError, TypeError) as exc:
            code = "checkpoint_missing" if "not found" in str(exc) else "invalid_tracker_settings"
            raise ApplicationError(str(exc), code=code) from exc
        if checkpoint_path:
            checkpoint_sha = file_sha256(checkpoint_path)
    software = software_versions(backend)
    config_hash = _canonical_hash({
        "backend": backend, "checkpoint_sha256": checkpoint_sha, "categories": categories,
        "model_config": file_sha256(model_config_path) if model_config_path and Path(model_config_path).is_file() else model_config_path,
        "anchor_policy": anchor_policy, "detector_settings": detector_settings,
        "tracker_settings": tracker_settings, "software": software,
    })
    existing = ProposalConfig.objects.filter(config_hash=config_hash).first()
    if existing is not None:
        return existing
    version = (ProposalConfig.objects.select_for_update().filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
    return ProposalConfig.objects.create(
        name=name, version=version, backend=backend, checkpoint_path=checkpoint_path,
        checkpoint_sha256=checkpoint_sha, model_config_path=model_config_path, categories=categories,
        anchor_policy=anchor_policy, detector_settings=detector_settings, tracker_settings=tracker_settings,
        software=software, config_hash=config_hash, created_by=created_by,
    )


def _lock_split_group(video: Video) -> None:
    """Lock the video's split group (row lock, then ``locked_at``); refuse unassigned splits."""
    group = SplitGroup.objects.select_for_update().get(pk=video.split_group_id)
    if not group.split:
        raise ConflictError(
            f"video {video.pk} ({video.name}) has no split yet: assign splits (train/dev/test) before "
            "running proposals, because a video's split is locked by its first proposal run",
            code="split_unassigned", extra={"split_group": group.name},
        )
    if group.locked_at is None:
        group.locked_at = timezone.now()
        group.save(update_fields=["locked_at"])


def proposal_run_create(*, video: Video, config: ProposalConfig, created_by=None, enqueue: bool = True) -> tuple[ProposalRun, bool]:
    """Create the run of ``config`` on ``video`` and queue it; idempotent.

    Returns ``(run, created)``. Re-running a configuration returns the existing run (a failed run
    is queued again in place), so nothing is duplicated. Locks the video's split group row.
    """
    if config.backend == "external":
        raise ApplicationError("external trajectories are imported, not run", code="not_runnable")
    with transaction.atomic():
        _lock_split_group(video)
        run, created = ProposalRun.objects.select_for_update().get_or_create(
            video=video, config=config, defaults={"created_by": created_by})
        if not created and run.status != ProposalRun.Status.FAILED:
            return run, False
        queue = "gpu" if config.backend == "sam2" else "cpu"
        run.job = job_create(kind="proposal_run", queue=queue, created_by=created_by,
                             params={"proposal_run": run.pk, "video": video.pk, "config": config.pk})
        run.status = ProposalRun.Status.QUEUED
        run.error = ""
        run.save(update_fields=["job", "status", "error"])
        if enqueue:
            from trajectories.tasks import proposal_run_task

            transaction.on_commit(lambda: proposal_run_task.apply_async(args=[run.pk], queue=queue))
    return run, True


def _tracker_for(config: ProposalConfig):
    settings = tracker_settings_for(
        config.backend, categories=config.categories, checkpoint_path=config.checkpoint_path,
        model_config_path=config.model_config_path, anchor_policy=config.anchor_policy,
        detector_settings=config.detector_settings, tracker_settings=config.tracker_settings,
    )
    if config.checkpoint_sha256 and file_sha256(config.checkpoint_path) != config.checkpoint_sha256:
        raise TrackerConfigError(
            f"checkpoint {config.checkpoint_path} changed since configuration {config} was recorded "
            "(SHA-256 differs); create a new configuration for the new weights")
    return build_tracker(config.backend, settings)


def proposal_run_execute(*, run_id: int, echo=None) -> ProposalRun:
    """Run the tracker of a queued run and store its trajectories and duplicate candidates.

    Safe to call again after a crash or a re-delivery: a finished run is returned as it is, and
    the trajectories are written in one transaction together with the run's new status.
    """
    run = ProposalRun.objects.select_related("video", "config", "job").get(pk=run_id)
    if run.status == ProposalRun.Status.SUCCEEDED:
        return run
    job = run.job or job_create(kind="proposal_run", params={"proposal_run": run.pk})
    job = job_start(job=job)
    reporter = JobReporter(job, echo=echo)
    ProposalRun.objects.filter(pk=run.pk).update(status=ProposalRun.Status.RUNNING, job=job)
    video, config = run.video, run.config
    try:
        tracker = _tracker_for(config)
        reporter.log(f"{config.backend} on {video.name}: {video.frame_count} frames, categories {config.categories}")
        reader = FrameReader(video.abspath, fps=video.fps, frame_count=video.frame_count, cache_frames=64,
                             seekable=video.seekable)
        try:
            proposals = run_tracker(tracker, reader, list(config.categories),
                                    progress=lambda f, m: reporter(0.9 * f, m))
            reporter(0.9, f"{len(proposals)} trajectories; computing appearance")
            appearances = [trajectory_appearance(reader.read, p.frames, p.boxes) for p in proposals]
        finally:
            reader.close()
        n_dups = trajectories_store(run=run, proposals=proposals, appearances=appearances)
    except ConflictError as exc:
        if exc.code != "run_finished":
            raise
        # A duplicate delivery finished first: its result stands.
        run.refresh_from_db()
        job_succeed(job=job, result={"trajectories": run.trajectory_count},
                    message="another delivery of this run stored its result first")
        return run
    except (TrackerConfigError, VideoError, ApplicationError, TrajectoryError) as exc:
        message = exc.message if isinstance(exc, ApplicationError) else str(exc)
        _fail(run, job, message)
        raise ApplicationError(message, code="proposal_run_failed", extra={"run": run.pk}) from exc
    except Exception as exc:
        _fail(run, job, f"{type(exc).__name__}: {exc}")
        raise
    run.refresh_from_db()
    job_succeed(job=job, result={"trajectories": run.trajectory_count, "duplicate_candidates": n_dups},
                message=f"{run.trajectory_count} trajectories, {n_dups} duplicate candidates")
    return run


def _fail(run: ProposalRun, job: Job, message: str) -> None:
    ProposalRun.objects.filter(pk=run.pk).update(status=ProposalRun.Status.FAILED, error=message[:4000],
                                                 finished_at=timezone.now())
    job_fail(job=job, error=message)


def trajectories_store(*, run: ProposalRun, proposals: list[TrackProposal],
                       appearances: list[np.ndarray] | None = None) -> int:
    """Validate every proposal, then write all trajectories, the duplicate candidates and the run's
    status in one transaction; returns the number of duplicate candidates.

    Any invalid observation (NaN, a box outside the frame, an unordered frame index) refuses the
    whole set with ``ApplicationError(code="invalid_observations")`` and writes nothing.
    """
    video = run.video
    errors = []
    for p in proposals:
        try:
            validate_observations(p.frames, p.boxes, scores=p.scores, width=video.width, height=video.height,
                                  frame_count=video.frame_count, label=f"track {p.track_id} ({p.category})")
        except TrajectoryError as exc:
            errors.append(str(exc))
    if len({p.track_id for p in proposals}) != len(proposals):
        errors.append("track ids are not unique within the run")
    if errors:
        raise ApplicationError(f"{len(errors)} trajectories have invalid observations: {errors[0]}",
                               code="invalid_observations", extra={"errors": errors[:50]})
    rows = []
    for i, p in enumerate(proposals):
        q = quality_signals(p.frames, p.boxes, p.scores)
        app = appearances[i] if appearances is not None else np.zeros(0, np.float32)
        rows.append(Trajectory(
            run=run, video=video, track_id=int(p.track_id), category=p.category, n_obs=q.n_obs,
            first_frame=q.first_frame, last_frame=q.last_frame,
            frames=p.frames.astype("<i4").tobytes(), boxes=p.boxes.astype("<f4").tobytes(),
            scores=p.scores.astype("<f4").tobytes(), appearance=np.asarray(app, "<f4").tobytes(),
            temporal_coverage=q.temporal_coverage, longest_run=q.longest_run, median_area=q.median_area,
            abrupt_changes=q.abrupt_changes, mean_score=q.mean_score,
        ))
    with transaction.atomic():
        locked = ProposalRun.objects.select_for_update().get(pk=run.pk)
        if locked.status == ProposalRun.Status.SUCCEEDED:
            raise ConflictError(f"proposal run {run.pk} already has its trajectories", code="run_finished")
        Trajectory.objects.filter(run=run).delete()
        created = Trajectory.objects.bulk_create(rows, batch_size=500)
        n_dups = duplicate_candidates_propose(video=video, trajectories=created)
        ProposalRun.objects.filter(pk=run.pk).update(
            status=ProposalRun.Status.SUCCEEDED, trajectory_count=len(created), duplicate_count=n_dups,
            error="", finished_at=timezone.now(),
            stats={"observations": int(sum(r.n_obs for r in rows))},
        )
    return n_dups
