"""The records of model work over verified data: training runs, their steps, evaluation runs.

Both run kinds are :class:`common.models.QueuedRun`: status, Job, error, cancel flag, retries and
timestamps come from there, and ``common.jobs.runs`` runs, cancels and retries them."""
from django.db import models
from django.db.models import Q

from common.models import TERMINAL, QueuedRun, RunStatus

__all__ = ["TERMINAL", "EvaluationRun", "RunStatus", "TrainingRun", "TrainingStep"]


class TrainingRun(QueuedRun):
    """One training of a retriever on a sealed relation snapshot (DESIGN 2.10).

    ``config`` is the complete ``models.training.trainer.TrainConfig`` (the model kind's config under
    ``"model"``) as it was validated; ``launch`` says how the worker runs it (in its own process or
    through ``torchrun`` with several processes). Checkpoints live in ``out_dir``; a re-delivered
    task resumes from the last one and ``resumes`` records where each later attempt started.
    Per-step loss parts and realized label counts are :class:`TrainingStep` rows.
    """

    task_name = "workers.tasks.training_run_task"
    job_kind = "training_run"

    snapshot = models.ForeignKey("annotation.RelationSnapshot", on_delete=models.PROTECT, related_name="training_runs")
    eval_snapshot = models.ForeignKey("annotation.RelationSnapshot", null=True, blank=True, on_delete=models.PROTECT,
                                      related_name="+", help_text="evaluated at the end; none: the training snapshot")
    model_kind = models.CharField(max_length=32)
    config = models.JSONField(help_text="models.training.trainer.TrainConfig with the model's config under 'model'")
    launch = models.JSONField(default=dict, blank=True, help_text="nproc_per_node and launcher")
    out_dir = models.CharField(max_length=500, blank=True, help_text="checkpoints, steps.jsonl and result.json")
    steps_total = models.PositiveIntegerField()
    steps_done = models.PositiveIntegerField(default=0)
    resumes = models.JSONField(default=list, blank=True,
                               help_text="[{attempt, from_step}]: where a re-delivered attempt took over")
    result = models.JSONField(default=dict, blank=True, help_text="the trainer's summary: label totals, rates, time")
    metrics = models.JSONField(default=dict, blank=True, help_text="the final evaluation (T2Traj, Traj2T, OCVR)")
    eval_stamps = models.JSONField(default=list, blank=True,
                                   help_text="what the final evaluation's figures must be read with: train-split "
                                             "(evaluated on training data), incomplete (a dev/test snapshot with "
                                             "non-binary gallery relations)")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(steps_total__gte=1), name="training_run_steps_total_positive"),
            models.CheckConstraint(condition=Q(steps_done__lte=models.F("steps_total")),
                                   name="training_run_steps_done_within_total"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="training_run_status_known"),
        ]

    def __str__(self) -> str:
        return f"TrainingRun {self.pk} {self.model_kind} {self.status} {self.steps_done}/{self.steps_total}"


class TrainingStep(models.Model):
    """One optimizer step of a training run: the loss, its parts and the batch's realized counts
    (positives, negatives, cross-video ones, zero-negative row/column rates) as the trainer
    reported them, and the delivery (``attempt``) that computed it."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="steps")
    step = models.PositiveIntegerField(help_text="1-based: the number of optimizer steps done")
    attempt = models.PositiveIntegerField(help_text="the job delivery that computed the step")
    loss = models.FloatField(null=True, blank=True)
    record = models.JSONField(help_text="everything the trainer reported for the step")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run_id", "step"]
        constraints = [
            models.UniqueConstraint(fields=["run", "step"], name="training_step_once"),
            models.CheckConstraint(condition=Q(step__gte=1), name="training_step_positive"),
        ]


class EvaluationRun(QueuedRun):
    """Retrieval figures of a model on a sealed snapshot: a trained run's checkpoint, the untrained
    model of a kind (its initial weights for a seed), or the exact random baseline."""

    task_name = "workers.tasks.evaluation_run_task"
    job_kind = "evaluation_run"

    class Kind(models.TextChoices):
        TRAINED = "trained"
        UNTRAINED = "untrained"
        RANDOM = "random"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    training_run = models.ForeignKey(TrainingRun, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="evaluations")
    snapshot = models.ForeignKey("annotation.RelationSnapshot", on_delete=models.PROTECT, related_name="evaluation_runs")
    model_kind = models.CharField(max_length=32, blank=True)
    config = models.JSONField(default=dict, blank=True, help_text="untrained: the model config and seed")
    metrics = models.JSONField(default=dict, blank=True,
                               help_text="t2traj, traj2t, ocvr (with pool-size strata) and the random baseline")
    stamps = models.JSONField(default=list, blank=True,
                              help_text="train-split (evaluated on training data), incomplete (a dev/test snapshot "
                                        "with non-binary gallery relations); empty: a clean held-out evaluation")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="trained", training_run__isnull=False)
                           | Q(kind="untrained", training_run__isnull=True) & ~Q(model_kind="")
                           | Q(kind="random", training_run__isnull=True, model_kind="")),
                name="evaluation_run_kind_fits"),
            models.UniqueConstraint(fields=["training_run", "snapshot"], condition=Q(kind="trained"),
                                    name="evaluation_run_trained_once_per_snapshot"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="evaluation_run_status_known"),
        ]

    def __str__(self) -> str:
        return f"EvaluationRun {self.pk} {self.kind} {self.status}"
