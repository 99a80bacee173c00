"""The agreement tallies: a stage's agreement figures kept as sums over its items
(``models.curation.agreement_sums``), so the agreement page reads a few hundred rows instead of
every vote. A database trigger writes an ``AgreementPending`` row for every vote inserted, by any
path (the services, a bulk load, ``COPY``); ``annotation.curation.services.agreement_tallies``
counts them in."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class AgreementPending(models.Model):
    """A vote not counted in the tallies yet (written by the trigger, taken by the refresh)."""

    vote_id = models.BigIntegerField(db_index=True)
    item_id = models.BigIntegerField()


class AgreementTally(models.Model):
    """One histogram bar of a stage's items (or votes) in one split: ``n`` of them have ``key``."""

    stage = models.CharField(max_length=32)
    split = models.CharField(max_length=8, blank=True)
    kind = models.CharField(max_length=16)   # counts | adjudicated | vote_ms | item_ms (agreement_sums.KINDS)
    key = models.BigIntegerField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stage", "split", "kind", "key"], name="agreement_tally_once")]


class AgreementRaterTally(models.Model):
    """One annotator's votes on a stage's items in one split (``agreement_sums.RATER_COLUMNS``)."""

    stage = models.CharField(max_length=32)
    split = models.CharField(max_length=8, blank=True)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    n_votes = models.BigIntegerField(default=0)
    n_adjudication = models.BigIntegerField(default=0)
    n_scored = models.BigIntegerField(default=0)     # panel votes whose item's other panel votes have a strict majority
    n_agree = models.BigIntegerField(default=0)      # of those, the votes that agree with it
    n_timed = models.BigIntegerField(default=0)
    ms_total = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stage", "split", "annotator"], name="agreement_rater_tally_once")]
