from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from common.progress import ProgressBar
from models.media.video import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS
from trajectories.services.ingestion import video_import


def expand(path: Path) -> list[Path]:
    """A video file, a folder of frames, or a folder holding videos and/or frame folders."""
    if not path.is_dir():
        return [path]
    entries = sorted(path.iterdir())
    if any(p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS for p in entries):
        return [path]
    found = [p for p in entries if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS]
    found += [p for p in entries if p.is_dir() and any(c.suffix.lower() in IMAGE_EXTENSIONS for c in p.iterdir())]
    return found or [path]


class Command(BaseCommand):
    help = "Import video files and folders of frames (probed, hashed, deduplicated)."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--source", help="source recording (default: each video's own name)")
        parser.add_argument("--split-group", help="split group (default: the source)")
        parser.add_argument("--fps", type=float, help="frame rate (required for frame folders)")

    def handle(self, *args, paths, source, split_group, fps, **options):
        failures = 0
        inputs = [p for arg in paths for p in expand(arg)]
        with ProgressBar(f"importing {len(inputs)} input(s)") as bar:
            for done, path in enumerate(inputs):
                bar(done / len(inputs), path.name)
                try:
                    result = video_import(path=path, source=source or path.stem, split_group=split_group, fps=fps)
                except ApplicationError as exc:
                    failures += 1
                    self.stderr.write(self.style.ERROR(f"{path}: {exc.message}"))
                    continue
                self._report(path, result)
            bar(1.0)
        if failures:
            raise CommandError(f"{failures} input(s) could not be imported (nothing was stored for them)")

    def _report(self, path, result) -> None:
        v = result.video
        if result.created:
            self.stdout.write(self.style.SUCCESS(
                f"imported {path} as video #{v.pk} '{v.name}': {v.frame_count} frames, {v.width}x{v.height}, "
                f"{v.fps:g} fps, {v.codec}, source '{v.source.name}', split group '{v.split_group.name}'"))
        else:
            self.stdout.write(f"skipped {path}: same content as video #{v.pk} '{v.name}'")
