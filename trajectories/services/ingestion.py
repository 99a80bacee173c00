"""Video ingestion: probe, hash, dedupe, and store a file or a folder of frames.

The input is probed before anything is written; the media is copied to a temporary name under
``MEDIA_ROOT/tmp`` and moved into place only together with its database row, so a failure at any
step leaves neither a file nor a row behind.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction

from common.errors import ApplicationError
from common.jobs.heartbeat import JobHeartbeat
from common.jobs.services import job_create, job_fail, job_start, job_succeed
from common.models import Job
from common.reach import import_roots, path_within
from common.storage import ObjectStore, StorageError, store
from models.media.video import VideoError, VideoInfo, content_sha256, list_frame_files, probe_video
from trajectories.models import Source, SplitGroup, Video

logger = logging.getLogger(__name__)


@dataclass
class ImportResult:
    video: Video
    created: bool  # False: the same content was already imported (the existing video is returned)


def _media_dest(sha: str, kind: str, suffix: str) -> Path:
    rel = Path("videos") / sha[:2] / (sha + (suffix if kind == Video.Kind.FILE else ""))
    return rel


def source_get_or_create(*, name: str) -> Source:
    name = name.strip()
    if not name:
        raise ApplicationError("a source name is required", code="source_required")
    return Source.objects.get_or_create(name=name)[0]


def split_group_get_or_create(*, name: str) -> SplitGroup:
    name = name.strip()
    if not name:
        raise ApplicationError("a split group name is required", code="split_group_required")
    return SplitGroup.objects.get_or_create(name=name)[0]


def video_import(*, path: str | os.PathLike, source: str, split_group: str | None = None,
                 name: str | None = None, fps: float | None = None, created_by=None,
                 move: bool = False, metadata: dict | None = None,
                 roots: list[Path] | None = None) -> ImportResult:
    """Import one video file or folder of frames.

    ``roots``: the folders the path must lie under (400 ``path_outside_roots`` otherwise); the API's
    imports pass :func:`common.reach.import_roots`, the operator's own ``import_videos`` command none.

    ``split_group`` defaults to the source name (all clips of one recording share a split).
    ``move`` moves the input instead of copying it (used for streamed uploads).
    Raises ``ApplicationError`` (code ``invalid_video``) for corrupt, unsupported or zero-frame
    input; nothing is written in that case. Content already imported returns the existing video.
    """
    path = Path(path)
    if roots is not None:
        path_within(path, roots=roots, what="video path")
    name = name or (path.stem if path.is_file() else path.name)
    split_group = split_group or source
    for label, value, limit in (("name", name, 255), ("source", source, 200), ("split group", split_group, 200)):
        if not value or not value.strip() or len(value) > limit:
            raise ApplicationError(f"the {label} must be 1 to {limit} characters, got {len(value or '')}",
                                   code="invalid_name", extra={"field": label})
    try:
        info: VideoInfo = probe_video(path, fps=fps)
        sha = content_sha256(path)
    except VideoError as exc:
        raise ApplicationError(str(exc), code="invalid_video", extra={"path": path.name}) from exc

    existing = Video.objects.filter(content_sha256=sha).first()
    if existing is not None:
        if move:
            _remove(path)
        return ImportResult(existing, False)

    rel = _media_dest(sha, info.kind, path.suffix.lower())
    objects = store()
    if objects.remote:
        return _import_to_bucket(objects, path, rel, info=info, sha=sha, move=move,
                                 row=dict(source=source, split_group=split_group, name=name, created_by=created_by,
                                          metadata=metadata))
    dest = settings.MEDIA_ROOT / rel
    tmp = settings.MEDIA_ROOT / "tmp" / f"import-{uuid.uuid4().hex}{path.suffix.lower() if info.kind == 'file' else ''}"
    size = _copy_or_move(path, tmp, move=move)
    placed = False  # whether this call put a file at dest (only then may it remove it)
    try:
        with transaction.atomic():
            video = _video_create(rel, info=info, sha=sha, size=size, source=source, split_group=split_group,
                                  name=name, created_by=created_by, metadata=metadata)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, dest)  # atomic on one filesystem; undone below if the commit fails
            placed = True
            transaction.on_commit(lambda: logger.info("imported %s as video %s", path.name, video.pk))
    except IntegrityError:
        # Lost a race with a concurrent import of the same content: the winner's file stays.
        _remove(tmp)
        return ImportResult(Video.objects.get(content_sha256=sha), False)
    except BaseException:
        _remove(tmp)
        if placed:
            _remove(dest)
        raise
    return ImportResult(video, True)


def _video_create(rel: Path, *, info: VideoInfo, sha: str, size: int, source: str, split_group: str, name: str,
                  created_by, metadata: dict | None) -> Video:
    return Video.objects.create(
        source=source_get_or_create(name=source),
        split_group=split_group_get_or_create(name=split_group),
        name=name,
        kind=info.kind, path=rel.as_posix(), content_sha256=sha, size_bytes=size,
        fps=info.fps, frame_count=info.frame_count, width=info.width, height=info.height,
        duration_s=info.duration_s, codec=info.codec[:32], seekable=info.seekable, created_by=created_by,
        metadata=metadata or {},
    )


def _import_to_bucket(objects: ObjectStore, path: Path, rel: Path, *, info: VideoInfo, sha: str, move: bool,
                      row: dict) -> ImportResult:
    """The object store's half of :func:`video_import`: the media is written first (an object
    appears only once complete), the row after; a failed upload leaves no row, and a row that
    cannot be written takes its new object away again, so no record names a missing object."""
    key = rel.as_posix()
    if info.kind == Video.Kind.FILE:
        size = objects.put_file(key, path).size
    else:
        size = objects.put_folder(key, list_frame_files(path))
    try:
        with transaction.atomic():
            video = _video_create(rel, info=info, sha=sha, size=size, **row)
    except IntegrityError:
        # A concurrent import of the same content won: the object (same key, same bytes) is theirs.
        return ImportResult(Video.objects.get(content_sha256=sha), False)
    except BaseException:
        if not Video.objects.filter(path=key).exists():
            objects.delete(key)
        raise
    if move:
        _remove(path)
    logger.info("imported %s as video %s (%s)", path.name, video.pk, objects.name(key))
    return ImportResult(video, True)


def _copy_or_move(src: Path, dst: Path, *, move: bool) -> int:
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        if src.is_dir():
            dst.mkdir()
            for f in list_frame_files(src):
                shutil.copy2(f, dst / f.name)
            if move:
                shutil.rmtree(src)
            return sum(f.stat().st_size for f in dst.iterdir())
        if move:
            shutil.move(src, dst)
        else:
            shutil.copyfile(src, dst)
        return dst.stat().st_size
    except BaseException:
        _remove(dst)
        raise


def _remove(path: Path) -> None:
    try:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    except OSError:  # pragma: no cover - best effort cleanup
        logger.warning("could not remove %s", path)


STAGING_MAX_AGE_S = 24 * 3600
VIDEO_IMPORT_TASK = "trajectories.tasks.video_import_task"   # takes the job's primary key


def staging_sweep(*, max_age_s: float = STAGING_MAX_AGE_S) -> int:
    """Remove staging leftovers older than ``max_age_s`` from ``MEDIA_ROOT/tmp`` (an upload whose
    process was killed mid-way leaves its file there); returns how many entries went."""
    root = settings.MEDIA_ROOT / "tmp"
    cutoff = time.time() - max_age_s
    removed = 0
    for entry in root.iterdir() if root.is_dir() else []:
        try:
            if entry.stat().st_mtime < cutoff:
                _remove(entry)
                removed += 1
        except FileNotFoundError:
            continue  # another process removed it first
    return removed


@dataclass
class UploadResult:
    """An upload imported now (``result``), or queued for a worker (``job``) when it is large."""

    result: ImportResult | None = None
    job: Job | None = None


def video_upload_import(*, uploaded_file, source: str, split_group: str | None = None, name: str | None = None,
                        fps: float | None = None, created_by=None) -> UploadResult:
    """Import an uploaded file (already streamed to disk by Django's upload handlers).

    Uploads up to ``TRAJLAB_SYNC_IMPORT_BYTES`` are probed and stored before the response. Larger
    ones (probing decodes every frame, minutes for a long video) are staged under ``MEDIA_ROOT``
    and imported by a worker: the result is a queued ``Job`` whose result names the video.
    """
    staging_sweep()
    limit = settings.TRAJLAB_MAX_UPLOAD_BYTES
    if uploaded_file.size > limit:
        raise ApplicationError(f"the upload is {uploaded_file.size} bytes; the limit is {limit}",
                               code="upload_too_large", status_code=413)
    original = Path(uploaded_file.name or "upload").name or "upload"
    params = {"source": source, "split_group": split_group, "name": name or Path(original).stem, "fps": fps}
    # A private staging folder keeps the person's file name, so errors speak of their file.
    staging_dir = settings.MEDIA_ROOT / "tmp" / f"upload-{uuid.uuid4().hex}"
    staging_dir.mkdir(parents=True)
    staging = staging_dir / original
    queued = False
    try:
        if hasattr(uploaded_file, "temporary_file_path"):
            shutil.move(uploaded_file.temporary_file_path(), staging)  # already streamed to disk
        else:
            with open(staging, "wb") as out:
                for chunk in uploaded_file.chunks():
                    out.write(chunk)
        if uploaded_file.size <= settings.TRAJLAB_SYNC_IMPORT_BYTES:
            return UploadResult(result=video_import(path=staging, created_by=created_by, move=True,
                                                    roots=import_roots(), **params))
        key = staging.relative_to(settings.MEDIA_ROOT).as_posix()
        objects = store()
        if objects.remote:    # the worker that imports it may run on another host
            objects.put_file(key, staging)
        with transaction.atomic():
            job = job_create(kind="video_import", queue="cpu", created_by=created_by,
                             params={**params, "staging": key})
            # A bare job (no run row): its task is sent by name, as runs are (``run_enqueue``).
            transaction.on_commit(lambda: current_app.send_task(VIDEO_IMPORT_TASK, args=[job.pk], queue="cpu"))
        queued = True
        return UploadResult(job=job)
    finally:
        if not queued or store().remote:
            _remove(staging_dir)


def video_import_job_execute(*, job_id: int) -> Job:
    """Import a staged upload for its job (idempotent: a finished job is returned as it is). The job
    beats while the file is probed, hashed and copied (``common.jobs.heartbeat``)."""
    job = Job.objects.get(pk=job_id)
    if job.status in (Job.Status.SUCCEEDED, Job.Status.FAILED):
        return job
    job = job_start(job=job)
    params = dict(job.params)
    key = params.pop("staging")
    objects = store()
    # A staged upload is a storage key: on local disk the file itself, from a bucket copied here first.
    staging = (settings.MEDIA_ROOT / "tmp" / f"job-{job.pk}-{uuid.uuid4().hex}" / PurePosixPath(key).name
               if objects.remote else settings.MEDIA_ROOT / key)
    user = job.created_by
    try:
        if objects.remote:
            try:
                objects.download(key, staging)
            except StorageError as exc:
                if exc.code != "object_missing":
                    raise
        if not staging.exists():
            raise ApplicationError(f"the staged upload {staging.name} is gone; upload it again",
                                   code="staging_missing")
        with JobHeartbeat(job):
            result = video_import(path=staging, created_by=user, move=True, roots=import_roots(), **params)
    except ApplicationError as exc:
        job = job_fail(job=job, error=exc.message)
    else:
        job = job_succeed(job=job, result={"video": result.video.pk, "created": result.created},
                          message=f"{'imported' if result.created else 'already had'} video #{result.video.pk}")
    finally:
        _remove(staging.parent)
    if objects.remote:      # the job is over either way: its staged object goes
        objects.delete(key)
    return job
