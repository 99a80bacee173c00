"""Relation snapshots (DESIGN 2.10): an immutable, hashed copy of a split's verified relations.

A snapshot holds the split's benchmark videos (current frozen pools, versions recorded), every
pool member's observations, the admitted queries with their predicates and the recorded relations
(``⊥`` included, so the matrix says what is unknown). Pseudo-labels go only into train snapshots
and stay tagged. A dev or test snapshot must be complete (every relation the Traj2T and OCVR
galleries need is binary) unless the caller explicitly takes an incomplete one, which is marked so.
The rows are written and sealed in one transaction; the folder is written next to it in the
``models.training.snapshot`` format.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.benchmark.services.mining import SPLITS, completeness_report, split_members
from annotation.models import CandidatePool, Relation, RelationSnapshot, SnapshotRelation
from common.errors import ApplicationError, ConflictError
from models.training.snapshot import Relation as RelationRecord
from models.training.snapshot import (
    RelationSnapshotData,
    SnapshotQuery,
    SnapshotTrack,
    SnapshotVideo,
)
from trajectories.models import Video


def snapshot_root() -> Path:
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
        videos=[SnapshotVideo(id=v, path=str(videos[v].abspath), width=videos[v].width, height=videos[v].height,
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
    ``allow_incomplete``. Writes the folder first (under a temporary name), then the rows, sealed,
    in one transaction; a failure leaves neither."""
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
    final = None
    data.save(staging)
    try:
        with transaction.atomic():
            snap = RelationSnapshot.objects.create(
                split=split, name=name[:100], content_sha256=sha, path="", created_by=created_by,
                pool_versions={str(v.id): v.pool_version for v in data.videos}, counts=counts,
                complete=complete)
            final = snapshot_root() / f"{snap.pk}-{sha[:12]}"
            SnapshotRelation.objects.bulk_create([
                SnapshotRelation(snapshot=snap, query_id=r.query_id, trajectory_id=r.trajectory_id, label=r.label,
                                 source=r.source, stratum=r.stratum, pseudo=r.pseudo) for r in data.relations],
                batch_size=5000)
            snap.path = str(final)
            snap.sealed_at = timezone.now()
            snap.save(update_fields=["path", "sealed_at"])
            staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if final is not None and final.exists() and not RelationSnapshot.objects.filter(path=str(final)).exists():
            shutil.rmtree(final, ignore_errors=True)   # renamed, then the commit failed
        raise
    return snap


def relation_snapshot_load(*, snapshot: RelationSnapshot) -> RelationSnapshotData:
    """The snapshot's content, checked against its recorded hash (a changed folder is refused)."""
    try:
        data = RelationSnapshotData.load(snapshot.path)
    except (OSError, ValueError) as exc:
        raise ConflictError(f"snapshot {snapshot.pk} cannot be read: {exc}", code="snapshot_unreadable") from None
    if data.content_sha256() != snapshot.content_sha256:
        raise ConflictError(f"snapshot {snapshot.pk} on disk does not match its recorded hash", code="snapshot_tampered")
    return data


def current_pools(*, split: str) -> list[CandidatePool]:
    return list(CandidatePool.objects.filter(video__split_group__split=split, frozen_at__isnull=False,
                                             superseded_by__isnull=True).order_by("video_id"))
