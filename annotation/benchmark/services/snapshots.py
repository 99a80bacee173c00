"""Relation snapshots (DESIGN 2.10): an immutable, hashed copy of a split's verified relations.

A snapshot holds the split's benchmark videos (current frozen pools, versions recorded), every
pool member's observations, the admitted queries with their predicates and the recorded relations
(``⊥`` included, so the matrix says what is unknown). Pseudo-labels go only into train snapshots
and stay tagged. A dev or test snapshot must be complete (every relation the Traj2T and OCVR
galleries need is binary) unless the caller explicitly takes an incomplete one, which is marked so.
The folder (``models.training.snapshot`` format) is stored first under a storage key
(``common.storage``: ``snapshots/<hash>-<nonce>``, on local disk or in a bucket), then the rows
are written and sealed in one transaction naming that key. Its videos are named by their keys;
loading resolves them to this host's files (``Video.abspath``). Snapshots of older versions
name a local folder and local video paths: they are read from there.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.mining import SPLITS, completeness_report, split_members
from annotation.models import CandidatePool, Relation, RelationSnapshot, SnapshotRelation
from common.errors import ApplicationError, ConflictError
from common.storage import StorageError, store
from models.training.snapshot import Relation as RelationRecord
from models.training.snapshot import (
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from trajectories.models import Video

logger = logging.getLogger(__name__)
SNAPSHOT_FILES = ("snapshot.json", "tracks.npz")


def snapshot_root() -> Path:
    """This host's folder for snapshots being written and local copies for ``torchrun``."""
    return Path(settings.VAR_DIR) / "snapshots"


def snapshot_data_build(*, split: str) -> tuple[RelationSnapshotData, dict]:
    """The split's current verified relations in the snapshot format, and its completeness report."""
    queries, members = split_members(split)
    pools = {m.pool_id: m.pool for m in members}
    video_ids = sorted({p.video_id for p in pools.values()})

    videos = {v.pk: v for v in Video.objects.filter(pk__in=video_ids)}
    pool_of_video = {p.video_id: p for p in pools.values()}
    data = RelationSnapshotData(
        split=split,
        videos=[SnapshotVideo(id=v, path=videos[v].path, width=videos[v].width, height=videos[v].height,
                              fps=float(videos[v].fps), n_frames=videos[v].frame_count,
                              pool_version=pool_of_video[v].version) for v in video_ids],
        tracks=[SnapshotTrack(id=m.trajectory_id, video_id=m.pool.video_id,
                              frames=np.frombuffer(bytes(m.frames), dtype="<i4").copy(),
                              boxes=np.frombuffer(bytes(m.boxes), dtype="<f4").reshape(-1, 4).copy()) for m in members],
        queries=[SnapshotQuery(id=q.pk, video_id=q.video_id, text=q.text, predicates=q.predicates, target_id=q.target_id)
                 for q in queries],
        relations=[],
    )
    relations = Relation.objects.filter(query__in=queries, trajectory_id__in=[m.trajectory_id for m in members])
    if split != "train":
        relations = relations.filter(pseudo=False)
    data.relations = [RelationRecord(query_id=r.query_id, trajectory_id=r.trajectory_id, label=r.label,
                                     source=r.source, stratum=r.stratum, pseudo=r.pseudo)
                      for r in relations.order_by("query_id", "trajectory_id")]
    data.validate()
    return data, completeness_report(split=split, limit=50)


def relation_snapshot_create(*, split: str, name: str = "", created_by=None, allow_incomplete: bool = False
                             ) -> RelationSnapshot:
    """Take a snapshot of ``split``. Refused: an unknown split, a split without admitted queries,
    and an incomplete dev/test split (409 ``incomplete_split`` with what is missing) unless
    ``allow_incomplete``. Stores the folder first (under a key of its own), then writes the rows,
    sealed and naming that key, in one transaction; a failure leaves neither (the stored folder is
    removed again when the rows cannot be written)."""
    if split not in SPLITS:
        raise ApplicationError(f"split must be one of {SPLITS}", code="invalid_split")
    data, report = snapshot_data_build(split=split)
    if not data.queries:
        raise ConflictError(f"the {split} split has no admitted queries yet", code="empty_split")
    # Complete means complete in what is written: every (query, track) of the data itself binary.
    matrix, _, _ = data.matrix(include_pseudo=False)
    complete = bool(matrix.size) and bool((matrix != -1).all())
    if split in ("dev", "test") and not complete and not allow_incomplete:
        raise ConflictError(f"the {split} split misses {int((matrix == -1).sum())} binary relations that its "
                            "galleries need",
                            code="incomplete_split", extra={"completeness": report})
    counts = data.counts()
    sha = data.content_sha256()
    data.meta = {"created_at": timezone.now().isoformat(), "completeness": {k: v for k, v in report.items()
                                                                             if k != "missing_pairs"}}
    snapshot_root().mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{sha[:12]}-", dir=snapshot_root()))
    key = f"snapshots/{sha[:16]}-{uuid.uuid4().hex[:8]}"
    objects = store()
    try:
        data.save(staging)
        objects.put_folder(key, [staging / name for name in SNAPSHOT_FILES])
        try:
            with transaction.atomic():
                snap = RelationSnapshot.objects.create(
                    split=split, name=name[:100], content_sha256=sha, path=key, created_by=created_by,
                    pool_versions={str(v.id): v.pool_version for v in data.videos}, counts=counts,
                    complete=complete)
                SnapshotRelation.objects.bulk_create([
                    SnapshotRelation(snapshot=snap, query_id=r.query_id, trajectory_id=r.trajectory_id, label=r.label,
                                     source=r.source, stratum=r.stratum, pseudo=r.pseudo) for r in data.relations],
                    batch_size=5000)
                snap.sealed_at = timezone.now()
                snap.save(update_fields=["sealed_at"])
        except BaseException:
            try:
                objects.delete(key)
            except StorageError:
                logger.warning("snapshot folder %s is left without a record", objects.name(key))
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return snap


def relation_snapshot_folder(*, snapshot: RelationSnapshot) -> Path:
    """A folder of this host with the snapshot's files as stored: the stored folder itself on
    local disk, a copy in the read-through cache from a bucket, the recorded folder for a snapshot
    of an older version."""
    if Path(snapshot.path).is_absolute():
        return Path(snapshot.path)
    return store().local_path(snapshot.path)


def relation_snapshot_local_copy(*, snapshot: RelationSnapshot) -> Path:
    """The snapshot written for a process without a database (``torchrun``): loaded and checked,
    its videos named by this host's files, saved under ``snapshot_root()/local/``."""
    data = relation_snapshot_load(snapshot=snapshot)
    folder = snapshot_root() / "local" / f"{snapshot.pk}-{snapshot.content_sha256[:12]}"
    data.save(folder)
    return folder


def relation_snapshot_load(*, snapshot: RelationSnapshot) -> RelationSnapshotData:
    """The snapshot's content, checked against its recorded hash (a changed folder is refused),
    with each video named by this host's file of it (``Video.abspath``; a recorded local path of an
    older snapshot stays while the file is there)."""
    try:
        data = RelationSnapshotData.load(relation_snapshot_folder(snapshot=snapshot), verify=False)
    except (OSError, ValueError) as exc:
        raise ConflictError(f"snapshot {snapshot.pk} cannot be read: {exc}", code="snapshot_unreadable") from None
    if data.content_sha256() != snapshot.content_sha256:
        where = snapshot.path if Path(snapshot.path).is_absolute() else store().name(snapshot.path)
        raise ConflictError(f"snapshot {snapshot.pk} at {where} does not match its recorded hash: it was "
                            "changed outside the platform", code="snapshot_tampered", extra={"object": where})
    _resolve_videos(data)
    return data


def _resolve_videos(data: RelationSnapshotData) -> None:
    keyed = [v for v in data.videos if not (Path(v.path).is_absolute() and Path(v.path).exists())]
    rows = Video.objects.in_bulk([v.id for v in keyed])
    for v in keyed:
        if v.id in rows:
            v.path = str(rows[v.id].abspath)


def current_pools(*, split: str) -> list[CandidatePool]:
    return list(CandidatePool.objects.filter(video__split_group__split=split, frozen_at__isnull=False,
                                             superseded_by__isnull=True).order_by("video_id"))
