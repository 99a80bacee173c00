"""The records of model work over verified data: training runs, their steps, evaluation runs.

Both run kinds are :class:`common.models.QueuedRun`: status, Job, error, cancel flag, retries and
timestamps come from there, and ``common.jobs.runs`` runs, cancels and retries them."""
from django.conf import settings
from django.db import models
from django.db.models import Q

from common.models import TERMINAL, QueuedRun, RunStatus

__all__ = ["TERMINAL", "EvaluationRun", "Experiment", "ExperimentCell", "RunStatus", "TrainingRun", "TrainingStep"]

DEFAULTS_HELP = ("the version of the defaults it read its unset settings from: {model_kind, model, train} (the "
                 "DEFAULTS_VERSION of the kind's config and of TrainConfig, models.training.defaults) and the "
                 "commit; a training run also resumed_over when it continued a checkpoint of other defaults; {}: "
                 "from before versions were kept")


class Experiment(models.Model):
    """A declared grid of training runs (DESIGN 4.5): ``spec`` is the validated
    ``models.experiments.grid.ExperimentSpec`` (model kind, base config, variants, reference, seeds);
    each (variant, seed) cell is an ordinary :class:`TrainingRun` (``runs``) trained on ``snapshot``
    and evaluated on ``eval_snapshot``. ``result`` is the table of ``models.experiments.table``,
    recomputed whenever a cell ends; ``status`` follows the cells (running while any is queued or
    running; then succeeded when all did, else failed or cancelled). The snapshot hashes and the
    code version are those the experiment was created with."""

    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    name = models.CharField(max_length=200, blank=True)
    preset = models.CharField(max_length=64, blank=True, help_text="the preset the grid came from, if any")
    model_kind = models.CharField(max_length=32)
    spec = models.JSONField(help_text="models.experiments.grid.ExperimentSpec as validated")
    snapshot = models.ForeignKey("annotation.RelationSnapshot", on_delete=models.PROTECT, related_name="experiments")
    eval_snapshot = models.ForeignKey("annotation.RelationSnapshot", on_delete=models.PROTECT, related_name="+")
    snapshot_sha256 = models.CharField(max_length=64)
    eval_snapshot_sha256 = models.CharField(max_length=64)
    code_version = models.JSONField(default=dict, help_text="the software that queued it: commit and package versions")
    defaults_version = models.JSONField(default=dict, blank=True, help_text=DEFAULTS_HELP)
    stamps = models.JSONField(default=list, blank=True, help_text="train-split / incomplete, as on every cell's figures")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING, db_index=True)
    queued = models.BooleanField(default=True, help_text="its runs go to the workers (false: run inline by the "
                                                         "command that created it)")
    cancel_requested = models.BooleanField(default=False, help_text="cancelled: no further evaluation is queued "
                                                                    "until it is resumed")
    cells_done = models.PositiveIntegerField(default=0)
    cells_total = models.PositiveIntegerField()
    result = models.JSONField(default=dict, blank=True, help_text="the table (models.experiments.table)")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(cells_done__lte=models.F("cells_total")),
                                   name="experiment_cells_done_within_total"),
            models.CheckConstraint(condition=~Q(snapshot=models.F("eval_snapshot")),
                                   name="experiment_evaluates_elsewhere"),
        ]

    def __str__(self) -> str:
        return f"Experiment {self.pk} {self.preset or self.model_kind} {self.status} {self.cells_done}/{self.cells_total}"


class TrainingRun(QueuedRun):
    """One training of a retriever on a sealed relation snapshot (DESIGN 2.10).

    ``config`` is the complete ``models.training.trainer.TrainConfig`` (the model kind's config under
    ``"model"``) as it was validated; ``launch`` says how the worker runs it (in its own process or
    through ``torchrun`` with several processes). The worker trains in a folder of its own host and
    stores each checkpoint under ``out_dir`` (a storage key, ``common.storage``); ``checkpoint_key``
    names the last one stored whole, with its SHA-256, so a re-delivered task on any host resumes
    from it, and ``resumes`` records where each later attempt started.
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
    out_dir = models.CharField(max_length=500, blank=True,
                               help_text="storage key of the run's folder (checkpoints, steps.jsonl, result.json); "
                                         "runs of older versions hold a local folder")
    checkpoint_key = models.CharField(max_length=300, blank=True,
                                      help_text="storage key of the last checkpoint stored whole; '' none yet")
    checkpoint_sha256 = models.CharField(max_length=64, blank=True, help_text="SHA-256 of that checkpoint")
    checkpoint_step = models.PositiveIntegerField(null=True, blank=True, help_text="the step it was saved at")
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
    experiment = models.ForeignKey(Experiment, null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    variant = models.CharField(max_length=48, blank=True, help_text="the experiment variant this run trains")
    defaults_version = models.JSONField(default=dict, blank=True, help_text=DEFAULTS_HELP)
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
    per_query = models.JSONField(default=dict, blank=True,
                                 help_text="per task, each scored row's id, stratum and R@k/AP values "
                                           "(models.training.evaluation.snapshot_rows): what experiments pair")
    stamps = models.JSONField(default=list, blank=True,
                              help_text="train-split (evaluated on training data), incomplete (a dev/test snapshot "
                                        "with non-binary gallery relations); empty: a clean held-out evaluation")
    pipeline = models.JSONField(default=dict, blank=True,
                                help_text="the retrieval pipeline evaluated (models.retrievers.pipeline."
                                          "RetrievalPipeline as JSON); empty: plain dense retrieval")
    pipeline_sha256 = models.CharField(max_length=64, blank=True, default="",
                                       help_text="SHA-256 of the pipeline's canonical JSON; empty without one")
    defaults_version = models.JSONField(default=dict, blank=True, help_text=DEFAULTS_HELP)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(kind="trained", training_run__isnull=False)
                           | Q(kind="untrained", training_run__isnull=True) & ~Q(model_kind="")
                           | Q(kind="random", training_run__isnull=True, model_kind="")),
                name="evaluation_run_kind_fits"),
            models.UniqueConstraint(fields=["training_run", "snapshot", "pipeline_sha256"], condition=Q(kind="trained"),
                                    name="evaluation_run_trained_once_per_pipeline"),
            models.CheckConstraint(condition=Q(status__in=RunStatus.values), name="evaluation_run_status_known"),
        ]

    def __str__(self) -> str:
        return f"EvaluationRun {self.pk} {self.kind} {self.status}"


class ExperimentCell(models.Model):
    """One (variant, seed) of an experiment: the training run that trains it (cells whose training
    configs are equal share one, so variants that differ only in their retrieval pipeline compare
    the same weights) and the evaluation its figures come from: the run's own final evaluation
    without a pipeline, else an evaluation run of the pipeline on the evaluation snapshot, queued
    once the training has succeeded."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="cells")
    variant = models.CharField(max_length=48)
    seed = models.PositiveBigIntegerField()
    training_run = models.ForeignKey(TrainingRun, on_delete=models.PROTECT, related_name="experiment_cells")
    pipeline = models.JSONField(default=dict, blank=True, help_text="the retrieval pipeline evaluated; empty: dense")
    evaluation = models.ForeignKey(EvaluationRun, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    error = models.TextField(blank=True, help_text="why its evaluation could not be created (the cell then failed)")

    class Meta:
        ordering = ["experiment_id", "id"]
        constraints = [models.UniqueConstraint(fields=["experiment", "variant", "seed"], name="experiment_cell_once")]

    def __str__(self) -> str:
        return f"ExperimentCell {self.experiment_id} {self.variant} seed {self.seed}"
