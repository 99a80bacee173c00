"""Model-side descriptions of a snapshot's trajectories: what rerankers compare at evaluation and
search (DESIGN 4.4).

A reranker or comparator that evaluation or default search runs may read a trajectory's
description only as a *model output*: a describer backend (``models.backends.vlm``; the embedded
default is the heuristic describer) run on the trajectory's own frames and boxes. The approved
human description (``D_r^H``) is the answer key and never goes in. :func:`describe_tracks` runs
the describer over the tracks of a ``models.training.snapshot.RelationSnapshotData`` (or its
:meth:`~models.training.snapshot.RelationSnapshotData.model_inputs` view: it reads only videos
and tracks); :func:`description_text` is the sentence pair a text comparator reads.
"""
from __future__ import annotations

from collections.abc import Iterable

from models.backends.vlm.base import Describer, DescribeRequest, DescribeResult


def describe_tracks(describer: Describer, snapshot, trajectory_ids: Iterable[int]) -> dict[int, DescribeResult]:
    """The describer's result for each of ``trajectory_ids`` (tracks of ``snapshot``), in the
    given order; an id that is not a track of the snapshot is a ``KeyError``. Reads each track's
    video, frames and boxes, nothing else."""
    tracks = {t.id: t for t in snapshot.tracks}
    videos = {v.id: v for v in snapshot.videos}
    out: dict[int, DescribeResult] = {}
    for t in trajectory_ids:
        if int(t) not in tracks:
            raise KeyError(f"trajectory {t} is not a track of snapshot {snapshot.split!r}")
        track = tracks[int(t)]
        video = videos[track.video_id]
        out[int(t)] = describer.describe(DescribeRequest(video.path, track.frames, track.boxes, fps=video.fps,
                                                         trajectory_id=int(t)))
    return out


def description_text(result: DescribeResult) -> str:
    """The appearance and motion sentences of a describer result (``""`` when it failed)."""
    if result.failed or result.description is None:
        return ""
    return f"{result.description.appearance} {result.description.motion}".strip()
