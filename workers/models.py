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

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(progress__gte=0.0) & Q(progress__lte=1.0), name="job_progress_in_unit_interval"),
        ]

    def __str__(self) -> str:
        return f"Job {self.pk} {self.kind} {self.status} {self.progress:.0%}"
