"""Reads of the trajectories app: lists, pools and rendered frames."""
from __future__ import annotations

from django.conf import settings
from django.db.models import Count, QuerySet

from common.errors import ApplicationError, NotFoundError
from models.media.video import (
    EncodedImages,
    ReaderPool,
    VideoError,
    crop_box,
    draw_target,
    encode_jpeg,
)
from trajectories.crop_files import (
    CROP_PAD,
    crop_file_read,
    crop_file_write,
    in_strip,
    strip_frames,
)
from trajectories.models import (
    CleanTruthTube,
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    Trajectory,
    Video,
)

# One pool per process: decoders stay open between requests and keep an LRU of frames.
_readers = ReaderPool(size=settings.TRAJLAB_OPEN_VIDEOS, cache_bytes=settings.TRAJLAB_FRAME_CACHE_MB * 2**20)
_encoded = EncodedImages(max_bytes=settings.TRAJLAB_JPEG_CACHE_MB * 2**20)
MAX_IMAGE_SIZE = 4096


def video_list(*, split: str | None = None, source: str | None = None) -> QuerySet[Video]:
    qs = Video.objects.select_related("source", "split_group")
    if split:
        qs = qs.filter(split_group__split=split)
    if source:
        qs = qs.filter(source__name=source)
    return qs


def source_list() -> QuerySet[Source]:
    return Source.objects.order_by("name")


def split_group_list() -> QuerySet[SplitGroup]:
    return SplitGroup.objects.annotate(n_videos=Count("videos")).order_by("name")


def proposal_config_list() -> QuerySet[ProposalConfig]:
    return ProposalConfig.objects.all()


def proposal_run_list(*, video_id: int | None = None) -> QuerySet[ProposalRun]:
    qs = ProposalRun.objects.select_related("job", "config")
    return qs.filter(video_id=video_id) if video_id is not None else qs


def trajectory_list(*, video_id: int | None = None, run_id: int | None = None) -> QuerySet[Trajectory]:
    """Trajectories without their packed observations (use ``video_pool_read`` for those)."""
    qs = Trajectory.objects.defer("frames", "boxes", "scores", "appearance")
    if video_id is not None:
        qs = qs.filter(video_id=video_id)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    return qs


def video_pool_read(*, video_id: int, run_id: int | None = None) -> list[Trajectory]:
    """All trajectories of a video (of one run, or of its succeeded runs), observations included."""
    qs = Trajectory.objects.filter(video_id=video_id)
    qs = qs.filter(run_id=run_id) if run_id is not None else qs.filter(run__status=ProposalRun.Status.SUCCEEDED)
    return list(qs.order_by("run_id", "track_id"))


def clean_truth_tube_list(*, video_id: int | None = None, report_id: int | None = None,
                          trajectory_id: int | None = None) -> QuerySet[CleanTruthTube]:
    """Clean-truth tubes with their tube's observations, optionally of one video, report or matched
    proposal."""
    qs = CleanTruthTube.objects.select_related("tube")
    for field, value in (("video_id", video_id), ("report_id", report_id), ("trajectory_id", trajectory_id)):
        if value is not None:
            qs = qs.filter(**{field: value})
    return qs


def duplicate_candidate_list(*, video_id: int | None = None) -> QuerySet[DuplicateCandidate]:
    qs = DuplicateCandidate.objects.all()
    return qs.filter(video_id=video_id) if video_id is not None else qs


def _check_size(max_size: int | None) -> int | None:
    if max_size is not None and not (16 <= max_size <= MAX_IMAGE_SIZE):
        raise ApplicationError(f"max_size must be between 16 and {MAX_IMAGE_SIZE}", code="invalid_max_size")
    return max_size


def video_frame(*, video: Video, index: int):
    if not 0 <= index < video.frame_count:
        raise NotFoundError(f"video {video.pk} has frames 0..{video.frame_count - 1}; {index} is outside",
                            code="frame_out_of_range")
    try:
        return _readers.get(video.abspath, fps=video.fps, frame_count=video.frame_count, seekable=video.seekable).read(index)
    except (VideoError, OSError) as exc:
        raise ApplicationError(f"frame {index} of video {video.pk} could not be decoded: {exc}",
                               code="decode_failed", status_code=422) from exc


def video_frame_jpeg(*, video: Video, index: int, max_size: int | None = None) -> bytes:
    max_size = _check_size(max_size)
    return _encoded.get(("frame", video.abspath, index, max_size),
                        lambda: encode_jpeg(video_frame(video=video, index=index), max_size=max_size))


def _box(trajectory: Trajectory, index: int):
    box = trajectory.box_at(index)
    if box is None:
        raise NotFoundError(f"trajectory {trajectory.pk} has no observation on frame {index}",
                            code="no_observation", extra={"first_frame": trajectory.first_frame,
                                                          "last_frame": trajectory.last_frame})
    return box


def trajectory_crop_jpeg(*, trajectory: Trajectory, index: int, max_size: int | None = None,
                         pad: float = CROP_PAD) -> bytes:
    """The crop of the trajectory's box on frame ``index``: the stored file when the run's crop
    strips made it (``trajectories.services.crops``), else made now; a strip's crop is kept on
    disk for the next reader, any other in the process's memory only."""
    box = _box(trajectory, index)
    max_size = _check_size(max_size)
    stored = in_strip(trajectory, index, max_size, pad)
    if stored and (data := crop_file_read(trajectory=trajectory, index=index, max_size=max_size)) is not None:
        return data
    data = _encoded.get(("crop", trajectory.video.abspath, index, tuple(float(v) for v in box), pad, max_size),
                        lambda: encode_jpeg(crop_box(video_frame(video=trajectory.video, index=index), box, pad=pad),
                                            max_size=max_size))
    if stored:
        crop_file_write(trajectory=trajectory, index=index, max_size=max_size, data=data)
    return data


def trajectory_marked_frame_jpeg(*, trajectory: Trajectory, index: int, max_size: int | None = None) -> bytes:
    box = _box(trajectory, index)
    max_size = _check_size(max_size)
    label = f"#{trajectory.pk} {trajectory.category}"
    return _encoded.get(("marked", trajectory.video.abspath, index, tuple(float(v) for v in box), label, max_size),
                        lambda: encode_jpeg(draw_target(video_frame(video=trajectory.video, index=index), box,
                                                        label=label), max_size=max_size))


def trajectory_sample_frames(*, trajectory: Trajectory, n: int) -> list[int]:
    """Up to ``n`` observed frame indices spread evenly over the trajectory, in order."""
    if n < 1:
        raise ApplicationError("n must be at least 1", code="invalid_n")
    return strip_frames(trajectory, n)
