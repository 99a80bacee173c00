"""Recorded dissent (E.2): a reviewer's minor correction of a description that lost to plain
approvals of another version. The correction itself is a vote and a version; this row says that
it lost, to which approved version, on which review item, so adjudicators and auditors can read it
beside ``D_r^H``. A record: the database refuses updates and deletes."""
from __future__ import annotations

from django.db import models


class DescriptionDissent(models.Model):
    description = models.ForeignKey("annotation.Description", on_delete=models.PROTECT, related_name="dissent")
    item = models.ForeignKey("annotation.WorkItem", on_delete=models.PROTECT, related_name="+",
                             help_text="the review item whose approval the correction lost to")
    vote = models.OneToOneField("annotation.Vote", on_delete=models.PROTECT, related_name="dissent",
                                help_text="the usable_after_minor_correction vote that dissented")
    correction = models.ForeignKey("annotation.DescriptionVersion", on_delete=models.PROTECT, related_name="+",
                                   help_text="the corrected version the dissenting reviewer approved")
    approved_version = models.ForeignKey("annotation.DescriptionVersion", on_delete=models.PROTECT, related_name="+",
                                         help_text="the version approved instead")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["description_id", "id"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(correction=models.F("approved_version")),
                                   name="dissent_differs_from_approval"),
        ]
