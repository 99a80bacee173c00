"""Factories for trajectories-app records (no files needed unless a test reads frames)."""
from __future__ import annotations

import hashlib
import itertools

import numpy as np

from models.backends.tracking.base import TrackProposal
from trajectories.models import ProposalConfig, ProposalRun, Source, SplitGroup, Video

_seq = itertools.count(1)


def video_factory(*, split: str = "train", group: str | None = None, width: int = 640, height: int = 360,
                  frame_count: int = 300, path: str = "videos/none.mp4", fps: float = 25.0, **kw) -> Video:
    n = next(_seq)
    group_obj, _ = SplitGroup.objects.get_or_create(name=group or f"group-{n}", defaults={"split": split})
    return Video.objects.create(
        source=Source.objects.get_or_create(name=f"source-{group or n}")[0], split_group=group_obj,
        name=f"video-{n}", kind="file", path=path,
        content_sha256=kw.pop("content_sha256", None) or hashlib.sha256(f"v{n}".encode()).hexdigest(),
        size_bytes=1, fps=fps, frame_count=frame_count, width=width, height=height,
        duration_s=frame_count / fps, codec="mp4v", **kw)


def config_factory(**kw) -> ProposalConfig:
    n = next(_seq)
    defaults = dict(name=f"cfg-{n}", version=1, backend="hog-bytetrack", categories=["person"],
                    config_hash=hashlib.sha256(f"c{n}".encode()).hexdigest())
    defaults.update(kw)
    return ProposalConfig.objects.create(**defaults)


def run_factory(*, video: Video | None = None, config: ProposalConfig | None = None, **kw) -> ProposalRun:
    return ProposalRun.objects.create(video=video or video_factory(), config=config or config_factory(), **kw)


def proposal(track_id: int, start: int, n: int, *, x: float = 10, y: float = 20, w: float = 40, h: float = 80,
             dx: float = 2.0, category: str = "person", step: int = 1) -> TrackProposal:
    frames = np.arange(start, start + n * step, step)
    xs = x + dx * (frames - start)
    boxes = np.stack([xs, np.full(n, y), xs + w, np.full(n, y + h)], axis=1)
    return TrackProposal(track_id=track_id, category=category, frames=frames, boxes=boxes, scores=np.full(n, 0.9))
