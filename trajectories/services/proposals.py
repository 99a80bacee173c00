"""Proposal configurations and runs (DESIGN 2.2), and storage of their trajectories."""
from __future__ import annotations

import hashlib
import json
import logging
from datetime import timedelta
from importlib import metadata
from pathlib import Path

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from common.errors import ApplicationError, ConflictError
from common.jobs.runs import RunOutcome, run_enqueue, run_execute, run_fail
from common.jobs.services import job_create
from common.reach import model_file_within
from common.registry import backend_resolve, is_registered
from models.backends.tracking import (
    BACKENDS,
    FILE_SETTINGS,
    TRACKERS,
    build_tracker,
    normalize_categories,
    resolve_tracker_settings,
)
from models.backends.tracking.base import TrackerConfigError, TrackProposal, run_tracker
from models.backends.tracking.sam3_tracker import check_concept
from models.media.trajectory_ops import (
    TrajectoryError,
    propose_duplicate_pairs,
    quality_signals,
    trajectory_appearance,
    validate_observations,
)
from models.media.video import FrameReader, VideoError, content_sha256
from trajectories.models import ProposalConfig, ProposalRun, SplitGroup, Trajectory, Video
from trajectories.services.crops import crop_strips_enqueue
from trajectories.services.duplicates import duplicate_candidates_store
from trajectories.signals import proposal_run_stored

logger = logging.getLogger(__name__)
# A queued or running run whose job has not reported for this long may be queued again.
STALE_AFTER = timedelta(minutes=30)
# Deliveries of one run (re-delivered when its worker process dies) before it is failed.
MAX_ATTEMPTS = 3


def software_versions(backend: str) -> dict[str, str]:
    versions = {}
    packages = TRACKERS[backend].packages if backend in TRACKERS else ()
    for pkg in packages:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "not installed"
    return versions


def _canonical_hash(payload: dict) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _file_digests(settings: dict) -> dict[str, str]:
    """SHA-256 of the files a configuration names (the SAM 2 checkpoint and model config)."""
    digests = {}
    for key in FILE_SETTINGS:
        path = settings.get(key)
        if path and Path(path).expanduser().is_file():
            digests[key] = content_sha256(Path(path).expanduser())
        elif path:
            digests[key] = str(path)  # a packaged config name, e.g. configs/sam2.1/sam2.1_hiera_t.yaml
    return digests


def settings_hash(*, backend: str, categories: list[str], resolved: dict, software: dict) -> tuple[str, dict]:
    """``(config_hash, file digests)`` of resolved settings: the identity of a configuration
    (backend, categories, the digests of the files it names, software versions, and every other
    resolved setting; the path of a file is not part of it). An empty SAM 3 ``concept`` (the
    category prompts, as every configuration before the setting ran) is left out, so those
    configurations keep their identity."""
    digests = _file_digests(resolved)
    return _canonical_hash({
        "backend": backend, "categories": categories, "files": digests, "software": software,
        "settings": {k: v for k, v in resolved.items()
                     if k not in FILE_SETTINGS and not (k == "concept" and v == "")},
    }), digests


def _with_concept(backend: str, concept, tracker_settings: dict) -> dict:
    """The tracker settings with the query-conditioned concept prompt (seed C.1) set; 400
    ``invalid_concept`` for a concept that is not text, blank or too long, or given twice, and
    ``concept_needs_sam3`` for a tracker that reads no text prompt."""
    if backend != "sam3":
        raise ApplicationError(f"a concept prompt needs a text-prompted tracker (sam3); {backend} detects "
                               "categories only", code="concept_needs_sam3")
    if "concept" in tracker_settings:
        raise ApplicationError("give the concept once: as concept, not also in tracker_settings",
                               code="invalid_concept")
    try:
        return {**tracker_settings, "concept": check_concept(concept)}
    except ValueError as exc:
        raise ApplicationError(str(exc), code="invalid_concept") from None


def stored_settings(backend: str, resolved: dict, *, anchor_policy: dict) -> tuple[dict, dict, dict]:
    """The resolved settings as a configuration stores them: ``(anchor_policy, detector_settings,
    tracker_settings)``, every value explicit, so a later change of a backend's defaults does not
    change what a stored configuration runs (and its ``config_hash`` keeps describing it).

    The keys given as anchor policy stay there (with their resolved values), the detector settings
    go to ``detector_settings``, the categories and model files stay in their own fields, and
    everything else is tracker settings. Resolving the three again gives ``resolved`` back.
    """
    detector_key = TRACKERS[backend].detector_key
    kept_apart = {"categories", "checkpoint", "model_config", detector_key}
    anchors = {key: resolved[key] for key in anchor_policy if key in resolved}
    detectors = resolved.get(detector_key) or {}
    tracker = {key: value for key, value in resolved.items() if key not in kept_apart and key not in anchors}
    return anchors, detectors, tracker


def proposal_config_create(*, name: str, backend: str, categories: list[str], checkpoint_path: str = "",
                           model_config_path: str = "", anchor_policy: dict | None = None,
                           detector_settings: dict | None = None, tracker_settings: dict | None = None,
                           concept: str | None = None, created_by=None) -> ProposalConfig:
    """Create (or return the identical existing) versioned proposal configuration.

    The settings are resolved through the tracker's own configuration (so a configuration that
    cannot run is refused here, and two spellings of one configuration are one record) and stored
    resolved, every default written out (``stored_settings``), so the configuration runs as its
    hash says after a backend's defaults change. The identity is ``settings_hash``.
    Hashing (checkpoints can be gigabytes) happens before the transaction; the insert takes the
    next version of ``name`` and retries if a concurrent create took it first.

    ``backend`` is a tracker or a tracker the operator registered (``common.registry``), whose
    checkpoint, model config and settings it brings; the API gives no paths, the command line may
    (under ``TRAJLAB_MODEL_ROOTS``).

    ``concept`` (SAM 3 only): the query-conditioned mode of seed C.1, a manager's free-text
    appearance ("person with a red umbrella") that SAM 3 is prompted with for the one category,
    stored as the ``concept`` tracker setting (so it is part of the configuration's identity).
    """
    registered = is_registered(backend)
    if registered:
        backend, entry = backend_resolve(backend, {}, field="backend")
        entry = dict(entry)
        checkpoint_path = entry.pop("checkpoint", "") or checkpoint_path
        model_config_path = entry.pop("model_config", "") or model_config_path
        tracker_settings = {**(tracker_settings or {}), **entry}
    if backend not in BACKENDS:
        raise ApplicationError(f"unknown backend {backend!r}; use one of {list(BACKENDS)} or a registered tracker",
                               code="unknown_backend")
    name = name.strip()
    if not name or len(name) > 100:
        raise ApplicationError("a configuration name of 1 to 100 characters is required", code="invalid_name")
    anchor_policy, detector_settings, tracker_settings = anchor_policy or {}, detector_settings or {}, tracker_settings or {}
    if concept is not None:
        tracker_settings = _with_concept(backend, concept, tracker_settings)
    try:
        categories = normalize_categories(categories, backend)
        resolved = resolve_tracker_settings(
            backend, categories=categories, checkpoint_path=checkpoint_path, model_config_path=model_config_path,
            anchor_policy=anchor_policy, detector_settings=detector_settings, tracker_settings=tracker_settings)
        for key, what in (("checkpoint", "checkpoint_path"), ("model_config", "model_config_path"),
                          ("bpe_path", "tracker_settings.bpe_path")):
            if not registered:                   # the operator's own entry may point anywhere
                model_file_within(str(resolved.get(key) or ""), what=what)  # nothing outside the roots is hashed
        software = software_versions(backend)
        config_hash, digests = settings_hash(backend=backend, categories=categories, resolved=resolved,
                                             software=software)
    except TrackerConfigError as exc:
        code = "checkpoint_missing" if "not found" in str(exc) else "invalid_tracker_settings"
        raise ApplicationError(str(exc), code=code) from exc
    except (ValueError, TypeError, OSError) as exc:
        raise ApplicationError(str(exc), code="invalid_tracker_settings") from exc
    anchor_policy, detector_settings, tracker_settings = stored_settings(backend, resolved, anchor_policy=anchor_policy)
    fields = dict(backend=backend, checkpoint_path=checkpoint_path, model_config_path=model_config_path,
                  checkpoint_sha256=digests.get("checkpoint", "") if checkpoint_path else "",
                  categories=categories, anchor_policy=anchor_policy, detector_settings=detector_settings,
                  tracker_settings=tracker_settings, software=software, config_hash=config_hash,
                  created_by=created_by)
    for _ in range(5):
        existing = ProposalConfig.objects.filter(config_hash=config_hash).first()
        if existing is not None:
            return existing
        version = (ProposalConfig.objects.filter(name=name).aggregate(v=Max("version"))["v"] or 0) + 1
        try:
            with transaction.atomic():
                return ProposalConfig.objects.create(name=name, version=version, **fields)
        except IntegrityError:
            continue  # a concurrent create took this version or this hash: look again
    raise ConflictError(f"could not store configuration {name!r}: too many concurrent versions", code="busy")


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


def _is_stale(run: ProposalRun) -> bool:
    """A queued or running run whose job has not reported for ``STALE_AFTER`` (its message was
    lost, or the process running it died without a re-delivery)."""
    if run.status not in (ProposalRun.Status.QUEUED, ProposalRun.Status.RUNNING):
        return False
    return run.job is None or timezone.now() - run.job.updated_at > STALE_AFTER


def proposal_run_create(*, video: Video, config: ProposalConfig, created_by=None, enqueue: bool = True) -> tuple[ProposalRun, bool]:
    """Create the run of ``config`` on ``video`` and queue it; idempotent.

    Returns ``(run, queued)``. Re-running a configuration returns the existing run, so nothing is
    duplicated; a failed run, or a stale one (no progress for ``STALE_AFTER``), is queued again in
    place with a new job. Locks the video's split group row (its split locks with the first run)
    and the run row (so two requests cannot queue it twice).
    """
    with transaction.atomic():
        _lock_split_group(video)
        run, created = ProposalRun.objects.select_for_update(of=("self",)).select_related("job").get_or_create(
            video=video, config=config, defaults={"created_by": created_by})
        if not created and run.status != ProposalRun.Status.FAILED and not _is_stale(run):
            return run, False
        queue = TRACKERS[config.backend].queue
        run.job = job_create(kind="proposal_run", queue=queue, created_by=created_by,
                             params={"proposal_run": run.pk, "video": video.pk, "config": config.pk})
        run.status = ProposalRun.Status.QUEUED
        run.error = ""
        run.save(update_fields=["job", "status", "error"])
        if enqueue:
            run_enqueue(run=run)
    return run, True


def _tracker_for(config: ProposalConfig):
    settings = resolve_tracker_settings(
        config.backend, categories=config.categories, checkpoint_path=config.checkpoint_path,
        model_config_path=config.model_config_path, anchor_policy=config.anchor_policy,
        detector_settings=config.detector_settings, tracker_settings=config.tracker_settings,
    )  # raises TrackerConfigError ("SAM 2 checkpoint not found: ...") before any weights load
    if config.checkpoint_sha256 and _file_digests(settings).get("checkpoint") != config.checkpoint_sha256:
        raise TrackerConfigError(
            f"checkpoint {config.checkpoint_path} changed since configuration {config} was recorded "
            "(SHA-256 differs); create a new configuration for the new weights")
    return build_tracker(config.backend, settings)


def proposal_run_execute(*, run_id: int, echo=None) -> ProposalRun:
    """Run the tracker of a queued run and store its trajectories and duplicate candidates, through
    ``common.jobs.runs.run_execute`` (start, fail, finish, cancel at a progress report).

    Safe to call again after a crash or a re-delivery: a succeeded or cancelled run is returned as it
    is, and the trajectories are written in one transaction together with the run's new status. A
    refused configuration or input fails the run and raises ``ApplicationError``
    (``proposal_run_failed``); a run delivered more than ``MAX_ATTEMPTS`` times fails the same way.
    """
    run = ProposalRun.objects.select_related("job").get(pk=run_id)
    if run.job is None and run.status not in (ProposalRun.Status.SUCCEEDED, ProposalRun.Status.CANCELLED):
        run.job = job_create(kind="proposal_run", params={"proposal_run": run.pk})
        run.save(update_fields=["job"])
    run = run_execute(run, _proposal_run_body, echo=echo, max_attempts=MAX_ATTEMPTS,
                      skip=(ProposalRun.Status.SUCCEEDED, ProposalRun.Status.CANCELLED))
    if run.status == ProposalRun.Status.FAILED:
        raise ApplicationError(run.error, code="proposal_run_failed", extra={"run": run.pk})
    return run


def _proposal_run_body(run: ProposalRun, reporter) -> RunOutcome:
    run = ProposalRun.objects.select_related("video", "config", "job").get(pk=run.pk)
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
        return RunOutcome(result={"trajectories": run.trajectory_count},
                          message="another delivery of this run stored its result first")
    except (TrackerConfigError, VideoError, TrajectoryError) as exc:
        raise ApplicationError(str(exc), code="proposal_run_failed", extra={"run": run.pk}) from exc
    run.refresh_from_db()
    result = {"trajectories": run.trajectory_count, "duplicate_candidates": n_dups}
    run_info = getattr(tracker, "run_info", None)
    if run_info is not None:  # what the model backend was (weights by content hash, device, prompts)
        result["tracker"] = run_info()
    return RunOutcome(result=result,
                      message=f"{run.trajectory_count} trajectories, {n_dups} duplicate candidates")


def _fail(run: ProposalRun, message: str) -> None:
    run_fail(run=run, error=message)


def trajectories_store(*, run: ProposalRun, proposals: list[TrackProposal],
                       appearances: list[np.ndarray] | None = None, pairs: list | None = None) -> int:
    """Validate every proposal, then write all trajectories, the duplicate candidates and the run's
    status in one transaction; returns the number of duplicate candidates. Locks the run row, so
    two deliveries of one run cannot both store. ``pairs``: the duplicate pairs, found beforehand
    on the proposals' indices (an import bounds them); by default they are found here.

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
    # Pairs are found before the transaction (it is pure computation) and stored inside it.
    if pairs is None:
        pairs = propose_duplicate_pairs([(i, p.frames, p.boxes, appearances[i] if appearances is not None else None)
                                         for i, p in enumerate(proposals)])
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
        if locked.status in (ProposalRun.Status.FAILED, ProposalRun.Status.CANCELLED):
            # ended while this delivery worked (its job swept as abandoned, or cancelled): its
            # result is dropped, and a retry runs the run again
            raise ConflictError(f"proposal run {run.pk} was {locked.status} while it ran; nothing was stored",
                                code="run_ended")
        Trajectory.objects.filter(run=run).delete()
        created = Trajectory.objects.bulk_create(rows, batch_size=500)
        n_dups = duplicate_candidates_store(video=video, pairs=pairs, ids=[t.pk for t in created])
        ProposalRun.objects.filter(pk=run.pk).update(
            status=ProposalRun.Status.SUCCEEDED, trajectory_count=len(created), duplicate_count=n_dups,
            error="", finished_at=timezone.now(),
            stats={"observations": int(sum(r.n_obs for r in rows))},
        )
        # Receivers (annotation opens review) write inside this transaction: trajectories.signals.
        proposal_run_stored.send(sender=ProposalRun, run=ProposalRun.objects.get(pk=run.pk))
        crop_strips_enqueue(run=run)            # reviewers' crop strips, made once after commit
    return n_dups
