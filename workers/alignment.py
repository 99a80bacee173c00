"""Alignment reports: the candidate frozen text encoders of a snapshot ranked before any training
(SCOUT 5.2, ``models.retrievers.scout.selection``), stored with everything they were computed from.

The model lives here rather than in ``workers/models.py``; ``WorkersConfig.ready`` imports it.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models, transaction

from annotation.benchmark.services.snapshots import relation_snapshot_load
from common.errors import ApplicationError
from common.registry import folders_resolve, refuse_locations
from common.versions import software_versions
from workers.folders import feature_cache_dir

MAX_CANDIDATES = 16          # text encoders compared in one report


class AlignmentReport(models.Model):
    """Mutual k-NN, linear CKA and ridge R² between a snapshot's frozen trajectory features and
    each candidate text encoder's query embeddings over its verified match pairs, and the ranking
    they give (mutual k-NN first, the paper's most robust lens). Written once, never edited."""

    snapshot = models.ForeignKey("annotation.RelationSnapshot", on_delete=models.PROTECT,
                                 related_name="alignment_reports")
    snapshot_sha256 = models.CharField(max_length=64)
    candidates = models.JSONField(help_text="{name: TextEncoderConfig} as validated")
    params = models.JSONField(default=dict, help_text="k, alpha, folds, seed, pair count, the visual side, "
                                                      "the encoders' names")
    scores = models.JSONField(default=dict, help_text="{candidate: {mutual_knn, cka, ridge_r2}}")
    rankings = models.JSONField(default=dict, help_text="{metric: candidates, most aligned first}")
    ranking = models.JSONField(default=list, help_text="candidates by mutual k-NN, ties by CKA then ridge R²")
    best = models.CharField(max_length=200, help_text="the first of ranking")
    n_pairs = models.PositiveIntegerField()
    code_version = models.JSONField(default=dict, help_text="the software that computed it")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "workers"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=models.Q(n_pairs__gte=2), name="alignment_report_has_pairs"),
        ]

    def __str__(self) -> str:
        return f"alignment report #{self.pk} of snapshot {self.snapshot_id}: {self.best}"


def alignment_report_create(*, snapshot, text_encoders: dict, k: int = 10, alpha: float = 1.0, n_folds: int = 5,
                            seed: int = 0, appearance: dict | None = None, features: dict | None = None,
                            geometry: bool = True, allow_held_out: bool = False, created_by=None) -> AlignmentReport:
    """Compute and store the alignment report of ``snapshot`` (a sealed ``RelationSnapshot``) for
    the candidate ``text_encoders`` ``{name: TextEncoderConfig dict}``.

    Preconditions first (a sealed snapshot of the train split, or of another with
    ``allow_held_out``, then stamped ``held-out``; its folder still matching its hash; 1..16 valid
    candidates, enough verified pairs for ``k`` and the folds): a refusal is an ApplicationError
    and stores nothing. The computation runs here, outside any transaction (it reads only the
    snapshot folder and the feature cache); the row is written at the end. No row is locked: a
    report is a new row that nothing else writes."""
    from models.retrievers.scout.selection import check_candidates, snapshot_alignment

    if snapshot.sealed_at is None:
        raise ApplicationError(f"snapshot {snapshot.pk} is not sealed", code="snapshot_not_sealed")
    if snapshot.split != "train" and not allow_held_out:
        raise ApplicationError(
            f"snapshot {snapshot.pk} is of the {snapshot.split} split: choosing a text encoder on its verified matches "
            "is model selection on the answer key; use a train snapshot, or ask for allow_held_out to get a report "
            "stamped held-out", code="alignment_on_held_out", extra={"snapshot": snapshot.pk, "split": snapshot.split})
    if not isinstance(text_encoders, dict) or not 1 <= len(text_encoders) <= MAX_CANDIDATES:
        raise ApplicationError(f"text_encoders must be an object of 1 to {MAX_CANDIDATES} candidates "
                               "{name: TextEncoderConfig}", code="invalid_candidates")
    # model folders are the operator's: a folder field names a registered folder entry, never a path
    refuse_locations({"text_encoders": text_encoders, "appearance": appearance or {}, "features": features or {}},
                     field="", folders=True)
    try:
        candidates = check_candidates(text_encoders)
    except ValueError as exc:
        raise ApplicationError(str(exc), code="invalid_candidates") from None
    if not isinstance(k, int) or k < 1 or not isinstance(n_folds, int) or n_folds < 2 or alpha < 0:
        raise ApplicationError("k must be >= 1, n_folds >= 2 and alpha >= 0", code="invalid_alignment")
    data = relation_snapshot_load(snapshot=snapshot)
    try:
        report = snapshot_alignment(data, folders_resolve(candidates), appearance=folders_resolve(appearance),
                                    features=folders_resolve(features), geometry=geometry, k=k, alpha=alpha,
                                    n_folds=n_folds, seed=seed, cache_dir=feature_cache_dir())
    except (ValueError, FileNotFoundError, OSError) as exc:
        raise ApplicationError(f"alignment of snapshot {snapshot.pk}: {exc}", code="invalid_alignment") from None
    with transaction.atomic():
        return AlignmentReport.objects.create(
            snapshot=snapshot, snapshot_sha256=snapshot.content_sha256, candidates=candidates,
            params=report.params | {"stamps": ["held-out"] if snapshot.split != "train" else []},
            scores=report.scores, rankings=report.rankings, ranking=report.ranking, best=report.ranking[0],
            n_pairs=report.params["n_pairs"], code_version=software_versions(), created_by=created_by)


def alignment_report_list(*, snapshot_id: int | None = None):
    """Alignment reports, newest first (optionally of one snapshot)."""
    qs = AlignmentReport.objects.select_related("snapshot")
    return qs.filter(snapshot_id=snapshot_id) if snapshot_id is not None else qs
