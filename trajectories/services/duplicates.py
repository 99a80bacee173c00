"""Duplicate-pair proposals (DESIGN 2.4): overlap, adjacency and appearance signals."""
from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from common.errors import ApplicationError
from models.media.trajectory_ops import (
    DuplicateSettings,
    PairSignals,
    pair_signals,
    propose_duplicate_pairs,
)
from trajectories.models import DuplicateCandidate, Trajectory, Video


def _unpack(t: Trajectory):
    app = t.appearance_array()
    return t.pk, t.frames_array(), t.boxes_array(), (app if len(app) else None)


def _candidate(video: Video, sig, **kw) -> DuplicateCandidate:
    return DuplicateCandidate(
        video=video, trajectory_a_id=sig.a, trajectory_b_id=sig.b, reasons=sig.reasons,
        mean_iou=sig.mean_iou, covisible_frames=sig.covisible, gap_frames=sig.gap_frames,
        endpoint_iou=sig.endpoint_iou, appearance_similarity=sig.appearance, **kw,
    )


def duplicate_candidates_propose(*, video: Video, settings: DuplicateSettings | None = None) -> int:
    """Propose duplicate pairs among all of a video's trajectories; returns how many new pairs were
    stored. Pairs already stored are kept as they are."""
    pairs = propose_duplicate_pairs([_unpack(t) for t in video.trajectories.all()], settings or DuplicateSettings())
    return duplicate_candidates_store(video=video, pairs=pairs)


def duplicate_candidates_store(*, video: Video, pairs: list[PairSignals], ids: list[int] | None = None) -> int:
    """Store proposed pairs; ``ids`` maps the pairs' track indices to trajectory primary keys (when
    the pairs were computed before the trajectories were written). Returns how many are new."""
    if ids is not None:
        pairs = [replace(sig, a=min(ids[sig.a], ids[sig.b]), b=max(ids[sig.a], ids[sig.b])) for sig in pairs]
    rows = [_candidate(video, sig) for sig in pairs]
    before = DuplicateCandidate.objects.filter(video=video).count()
    DuplicateCandidate.objects.bulk_create(rows, ignore_conflicts=True, batch_size=500)
    return DuplicateCandidate.objects.filter(video=video).count() - before


@transaction.atomic
def duplicate_candidate_create_manual(*, trajectory_a: Trajectory, trajectory_b: Trajectory, created_by=None) -> DuplicateCandidate:
    """A pair proposed by hand (from the all-candidates view), with its signals computed."""
    if trajectory_a.video_id != trajectory_b.video_id:
        raise ApplicationError("duplicate pairs must be two trajectories of one video", code="different_videos")
    if trajectory_a.pk == trajectory_b.pk:
        raise ApplicationError("a trajectory cannot be its own duplicate", code="same_trajectory")
    a, b = sorted([trajectory_a, trajectory_b], key=lambda t: t.pk)
    existing = DuplicateCandidate.objects.filter(trajectory_a=a, trajectory_b=b).first()
    if existing is not None:
        return existing
    ia, ib = _unpack(a), _unpack(b)
    sig = pair_signals(ia[1], ia[2], ib[1], ib[2], ia[3], ib[3], a=a.pk, b=b.pk)
    sig.reasons = ["manual", *sig.reasons]
    row = _candidate(a.video, sig, origin=DuplicateCandidate.Origin.MANUAL, created_by=created_by)
    row.save()
    return row
