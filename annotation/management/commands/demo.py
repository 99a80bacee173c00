"""Build the demo project: users, rendered videos with ground truth, the real pedestrian video,
splits, and tracker proposals for every video (builders: ``annotation.demo.builders``)."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from annotation.demo.builders import (
    DEMO_PASSWORD,
    DEMO_USERS,
    REAL_VIDEO,
    demo_proposals_run,
    demo_users_ensure,
    demo_video_import,
    demo_videos_render,
)
from common.errors import ApplicationError
from trajectories.models import Video
from trajectories.services.splits import splits_assign


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

    def _echo(self, line: str) -> None:
        self.stdout.write(line)

    def _users(self) -> None:
        demo_users_ensure()

    def _rendered(self, seed: int, n: int) -> list[Video]:
        return demo_videos_render(seed=seed, n=n, echo=self._echo, importer=self._import)

    def _import(self, path: Path, *, source: str, name: str, ground_truth: Path | None = None, echo=None) -> Video:
        try:
            return demo_video_import(path, source=source, name=name, ground_truth=ground_truth,
                                     echo=echo or self._echo)
        except ApplicationError as exc:
            raise CommandError(f"{path}: {exc.message}") from exc

    def _propose(self, videos: list[Video], *, queue: bool) -> None:
        try:
            demo_proposals_run(videos, queue=queue, echo=self._echo)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
