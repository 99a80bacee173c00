"""Build the demo project: users, rendered videos with ground truth, the real pedestrian video,
splits, and tracker proposals for every video."""
from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.services import roles_ensure, user_create
from common.errors import ApplicationError
from common.progress import ProgressBar
from models.synthetic import GroundTruth, demo_scenes, gt_path_for, render_scene
from trajectories.models import Video
from trajectories.services.ingestion import video_import
from trajectories.services.proposals import (
    proposal_config_create,
    proposal_run_create,
    proposal_run_execute,
)
from trajectories.services.splits import splits_assign

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


class Command(BaseCommand):
    help = "Build the demo project (idempotent: running it again reuses what exists)."

    def add_arguments(self, parser):
        parser.add_argument("--seed", type=int, default=0, help="seed of the rendered scenes and the split draw")
        parser.add_argument("--scenes", type=int, default=6,
                            help="rendered scenes (1-6); six give every split two videos for cross-video review")
        parser.add_argument("--no-real-video", action="store_true", help=f"skip the real {REAL_VIDEO}")
        parser.add_argument("--no-proposals", action="store_true", help="import only; run no tracker")
        parser.add_argument("--queue", action="store_true", help="queue proposal runs to the workers")

    def handle(self, *args, seed, scenes, no_real_video, no_proposals, queue, **options):
        self._users()
        videos = self._rendered(seed, scenes)
        real = settings.TRAJLAB_SHARED_DATA / REAL_VIDEO
        if not no_real_video:
            if real.is_file():
                videos.append(self._import(real, source="opencv-vtest", name="vtest (real pedestrians)"))
            else:
                self.stdout.write(f"{real} not found: the demo has rendered videos only")
        try:
            assignment = splits_assign(seed=seed, ratios={"train": 0.34, "dev": 0.33, "test": 0.33})
            for group, split in sorted(assignment.result.items()):
                self.stdout.write(f"split group {group}: {split}")
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if not no_proposals:
            self._propose(videos, queue=queue)
        self.stdout.write(self.style.SUCCESS(
            f"demo ready: {Video.objects.count()} videos; logins {', '.join(u for u, _ in DEMO_USERS)} "
            f"(password {DEMO_PASSWORD})"))

    def _users(self) -> None:
        roles_ensure()
        User = get_user_model()
        for username, roles in DEMO_USERS:
            if not User.objects.filter(username=username).exists():
                user_create(username=username, password=DEMO_PASSWORD, roles=roles,
                            is_superuser=username == "manager")

    def _rendered(self, seed: int, n: int) -> list[Video]:
        out_dir = Path(settings.VAR_DIR) / "demo" / f"seed-{seed}"
        out_dir.mkdir(parents=True, exist_ok=True)
        videos = []
        for spec in demo_scenes(seed, n):
            path = out_dir / f"{spec.name}.mp4"
            if not (path.is_file() and gt_path_for(path).is_file()):
                self.stdout.write(f"rendering {spec.name}: {spec.n_frames} frames {spec.width}x{spec.height}")
                render_scene(spec, path).save(gt_path_for(path))
            videos.append(self._import(path, source=f"rendered-{spec.name}", name=spec.name,
                                       ground_truth=gt_path_for(path)))
        return videos

    def _import(self, path: Path, *, source: str, name: str, ground_truth: Path | None = None) -> Video:
        metadata = {}
        if ground_truth is not None:
            GroundTruth.load(ground_truth)  # refuse a broken file before importing anything
            metadata = {"rendered": True}
        try:
            result = video_import(path=path, source=source, name=name, metadata=metadata)
        except ApplicationError as exc:
            raise CommandError(f"{path}: {exc.message}") from exc
        video = result.video
        if ground_truth is not None and "ground_truth" not in video.metadata:
            rel = Path("ground_truth") / f"{video.content_sha256}.gt.json"
            (settings.MEDIA_ROOT / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ground_truth, settings.MEDIA_ROOT / rel)
            video.metadata = {**video.metadata, "ground_truth": str(rel)}
            video.save(update_fields=["metadata"])
        self.stdout.write(f"video #{video.pk} {video.name}: {'imported' if result.created else 'already there'}")
        return video

    def _propose(self, videos: list[Video], *, queue: bool) -> None:
        config = proposal_config_create(name="demo-person", backend="hog-bytetrack", categories=["person"])
        for video in videos:
            run, created = proposal_run_create(video=video, config=config, enqueue=queue)
            if queue or not created:
                self.stdout.write(f"video #{video.pk}: run #{run.pk} {'queued' if created else run.status}")
                continue
            with ProgressBar(f"tracking {video.name}") as bar:
                try:
                    run = proposal_run_execute(run_id=run.pk, echo=bar)
                except ApplicationError as exc:
                    raise CommandError(f"video #{video.pk}: {exc.message}") from exc
            self.stdout.write(f"video #{video.pk}: {run.trajectory_count} trajectories, "
                              f"{run.duplicate_count} duplicate candidates")
