"""``python manage.py train``: train a retriever on a sealed relation snapshot (DESIGN 5)."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from annotation.models import RelationSnapshot
from common.errors import ApplicationError
from common.management.options import json_object_option
from common.progress import ProgressBar
from workers.execute import training_run_execute
from workers.models import RunStatus
from workers.training import training_run_create


def _snapshot(pk: int | None, option: str) -> RelationSnapshot | None:
    if pk is None:
        return None
    snapshot = RelationSnapshot.objects.filter(pk=pk).first()
    if snapshot is None:
        raise CommandError(f"{option} {pk}: no such relation snapshot")
    return snapshot


class Command(BaseCommand):
    help = ("Train a retriever (vtrajembed, scout or actpair) on a sealed relation snapshot: here with a progress "
            "bar, or queued to the gpu workers with --queue. Ends with an evaluation on --eval-snapshot (a dev or "
            "test snapshot; the training snapshot itself only with --allow-train-split).")

    def add_arguments(self, parser):
        parser.add_argument("--snapshot", type=int, required=True, help="relation snapshot id to train on")
        parser.add_argument("--model", required=True, help="model kind: vtrajembed, scout or actpair")
        parser.add_argument("--config", default=None,
                            help="TrainConfig as JSON or a JSON file (steps, batch_size, lr, model, ...; "
                                 "nproc_per_node > 1 trains through torchrun)")
        parser.add_argument("--eval-snapshot", type=int, default=None, help="relation snapshot id evaluated at the end")
        parser.add_argument("--allow-train-split", action="store_true",
                            help="evaluate on training data anyway (figures stamped train-split)")
        parser.add_argument("--allow-incomplete", action="store_true",
                            help="evaluate on an incomplete dev/test snapshot anyway (figures stamped incomplete)")
        parser.add_argument("--queue", action="store_true", help="queue to the gpu workers instead of training here")

    def handle(self, *args, snapshot, model, config, eval_snapshot, queue, allow_train_split, allow_incomplete,
               **options):
        try:
            run = training_run_create(snapshot=_snapshot(snapshot, "--snapshot"), model_kind=model,
                                      config=json_object_option(config, "--config"), eval_snapshot=_snapshot(eval_snapshot, "--eval-snapshot"),
                                      allow_train_split=allow_train_split, allow_incomplete=allow_incomplete,
                                      queue=queue)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if queue:
            self.stdout.write(f"training run #{run.pk} queued on the gpu queue as job #{run.job_id}")
            return
        with ProgressBar(f"training run #{run.pk} {model}") as bar:
            run = training_run_execute(run=run, echo=bar)
        if run.status != RunStatus.SUCCEEDED:
            raise CommandError(f"training run #{run.pk} {run.status}: {run.error or 'see its job'}")
        lines = [f"training run #{run.pk} finished {run.steps_done} steps; checkpoint "
                 f"{run.checkpoint_key or run.out_dir}"]
        if run.eval_stamps:
            lines.append(f"  figures stamped {', '.join(run.eval_stamps)}: not a held-out evaluation")
        for protocol in ("t2traj", "traj2t", "ocvr"):
            figures = run.metrics.get(protocol) or {}
            lines.append(f"  {protocol:7s} " + "  ".join(
                f"{name} {figures[name]:.1f}" for name in ("R@1", "R@3", "mAP") if isinstance(figures.get(name), float)))
        random = (run.metrics.get("random") or {}).get("R@1")
        if isinstance(random, float):
            lines.append(f"  random  R@1 {random:.1f}")
        self.stdout.write(self.style.SUCCESS("\n".join(lines)))
