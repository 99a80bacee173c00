"""Job bookkeeping below every app: the :class:`Job` record and the one queued-run shape.

A :class:`Job` is the progress record of any long piece of work (fraction, message, log tail,
deliveries). A run that a worker executes (a proposal run, a describer or query-writer run, a
mining run, a training or evaluation run) is a concrete subclass of the abstract
:class:`QueuedRun`: it owns its :class:`RunStatus`, error, timestamps, cancel flag and retry
count, and points at its current Job through a one-to-one field. ``common.jobs.runs`` starts,
fails, finishes, cancels and retries every kind through these fields alone.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class Job(models.Model):
    """A long-running piece of work (a proposal run, a training run, ...) and its progress."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    kind = models.CharField(max_length=64, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress = models.FloatField(default=0.0)
    message = models.CharField(max_length=500, blank=True)
    log_tail = models.TextField(blank=True)
    error = models.TextField(blank=True)
    params = models.JSONField(default=dict, blank=True)
    result = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=32, default="cpu")
    attempts = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="jobs")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    heartbeat_at = models.DateTimeField(
        null=True, blank=True, help_text="the worker's last sign of life while the job ran (common.jobs.heartbeat)")
    cancelled = models.BooleanField(
        default=False, help_text="it ended because its run was cancelled (its status is failed: a job has no "
                                 "cancelled state)")
    retried_as = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="the job that queued the same run again once this one had ended (a retry)")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0.0) & Q(progress__lte=1.0), name="job_progress_in_unit_interval"),
        ]

    def __str__(self) -> str:
        return f"Job {self.pk} {self.kind} {self.status} {self.progress:.0%}"


class RunStatus(models.TextChoices):
    """Where a queued run stands (its Job holds progress, logs and deliveries)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class QueuedRun(models.Model):
    """The shape every run kind shares: queued → running → succeeded / failed / cancelled.

    ``job`` is the run's current Job (a retry gives it a fresh one; the reverse accessor on Job is
    the subclass's lower-case class name). Subclasses set ``task_name`` (the Celery task that takes
    the run's primary key) and ``job_kind`` (the kind of the Job a retry creates)."""

    task_name: str = ""
    job_kind: str = ""

    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED, db_index=True)
    job = models.OneToOneField(Job, null=True, blank=True, on_delete=models.SET_NULL, related_name="%(class)s")
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    retries = models.PositiveIntegerField(default=0, help_text="times a person queued the run again")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
