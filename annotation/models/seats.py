"""What happened to panel seats other than a vote: an annotator skipping an item, a lapsed lease
taken back by a claim, a manager releasing or reassigning a seat. One row per event, never
edited or deleted (the database refuses it); the seat itself (``Assignment``) only ever shows the
present."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class SeatEvent(models.Model):
    class Kind(models.TextChoices):
        SKIPPED = "skipped"        # the holder gave the seat back, with a reason
        EXPIRED = "expired"        # the lease lapsed without a vote and a claim took the seat back
        RELEASED = "released"      # a manager freed the seat
        REASSIGNED = "reassigned"  # a manager gave the seat to another annotator

    item = models.ForeignKey("annotation.WorkItem", on_delete=models.PROTECT, related_name="seat_events")
    seat = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    holder = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+",
                               help_text="who held the seat")
    held_since = models.DateTimeField(help_text="when the holder claimed the seat")
    by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                           related_name="+", help_text="the manager who released or reassigned it")
    to = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT,
                           related_name="+", help_text="the annotator a reassigned seat went to")
    reason = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["item_id", "at", "id"]
        indexes = [models.Index(fields=["holder", "kind", "at"], name="seat_event_by_holder")]
        constraints = [
            models.CheckConstraint(condition=Q(kind="reassigned", to__isnull=False, by__isnull=False)
                                   | Q(kind="released", to__isnull=True, by__isnull=False)
                                   | Q(kind__in=["skipped", "expired"], to__isnull=True, by__isnull=True),
                                   name="seat_event_actor_matches_kind"),
        ]

    def __str__(self) -> str:
        return f"seat {self.seat} of item {self.item_id}: {self.kind}"
