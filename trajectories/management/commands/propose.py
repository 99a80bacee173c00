import json

from django.core.management.base import BaseCommand, CommandError

from common.errors import ApplicationError
from common.progress import ProgressBar
from models.backends.tracking import BACKENDS, default_cpu_backend
from trajectories.models import Video
from trajectories.services.proposals import (
    proposal_config_create,
    proposal_run_create,
    proposal_run_execute,
)


class Command(BaseCommand):
    help = "Run a tracker on videos and store its trajectory proposals (inline with a progress bar, or queued)."

    def add_arguments(self, parser):
        parser.add_argument("videos", nargs="*", type=int, help="video ids (default: all)")
        parser.add_argument("--name", default="default", help="configuration name")
        parser.add_argument("--backend", default=default_cpu_backend(),
                            help=f"a tracker ({', '.join(BACKENDS)}) or one registered in TRAJLAB_BACKENDS, "
                                 "which brings its checkpoint and settings")
        parser.add_argument("--categories", default="person", help="comma-separated category prompts")
        parser.add_argument("--checkpoint", default="", help="model file: a SAM 2 checkpoint, or for dnn-bytetrack a "
                            ".pb frozen graph or .onnx file (empty: the packaged SSD-MobileNet-v2)")
        parser.add_argument("--model-config", default="", help="SAM 2 model config (YAML), or the .pbtxt of a "
                            "dnn-bytetrack frozen graph")
        parser.add_argument("--tracker-settings", default="{}", help="JSON tracker settings")
        parser.add_argument("--concept", default=None,
                            help="sam3 only: a free-text concept prompted in place of the one category's name "
                                 "(query-conditioned proposals), e.g. 'person with a red umbrella'")
        parser.add_argument("--queue", action="store_true", help="queue to the workers instead of running here")

    def handle(self, *args, videos, name, backend, categories, checkpoint, model_config, tracker_settings, concept,
               queue, **options):
        try:
            config = proposal_config_create(
                name=name, backend=backend, categories=categories.split(","), checkpoint_path=checkpoint,
                model_config_path=model_config, tracker_settings=json.loads(tracker_settings), concept=concept)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        except json.JSONDecodeError as exc:
            raise CommandError(f"--tracker-settings is not valid JSON: {exc}") from exc
        prompted = config.tracker_settings.get("concept")
        self.stdout.write(f"configuration {config} ({config.config_hash[:12]})"
                          + (f", concept {prompted!r}" if prompted else ""))
        targets = Video.objects.filter(pk__in=videos) if videos else Video.objects.all()
        if videos and targets.count() != len(set(videos)):
            raise CommandError(f"unknown video id(s): {sorted(set(videos) - set(targets.values_list('pk', flat=True)))}")
        failures = 0
        for video in targets.order_by("pk"):
            try:
                run, created = proposal_run_create(video=video, config=config, enqueue=queue)
                if queue:
                    self.stdout.write(f"video #{video.pk}: run #{run.pk} {f'queued as job #{run.job_id}' if created else 'exists (' + run.status + ')'}")
                    continue
                if not created:
                    self.stdout.write(f"video #{video.pk}: run #{run.pk} already {run.status}")
                    continue
                with ProgressBar(f"video #{video.pk} {video.name}") as bar:
                    run = proposal_run_execute(run_id=run.pk, echo=bar)
                self.stdout.write(self.style.SUCCESS(
                    f"video #{video.pk}: run #{run.pk} stored {run.trajectory_count} trajectories, "
                    f"{run.duplicate_count} duplicate candidates"))
            except ApplicationError as exc:
                failures += 1
                self.stderr.write(self.style.ERROR(f"video #{video.pk}: {exc.message}"))
        if failures:
            raise CommandError(f"{failures} video(s) failed")
