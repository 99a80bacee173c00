"""What a release says about how reliable its labels are, and how it was built.

:func:`release_statistics` reads only records inside the release (its votes, items, relations,
queries, descriptions and audits), so an instance that imported the release computes the same
figures. :func:`construction_config` records prompts, checkpoints, budgets, the review policy and
software versions when a release is created (kept with the release, not recomputed).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict

import numpy as np
from django.db.models import Count, Sum

from annotation.benchmark.services.mining import completeness_report
from annotation.curation.services.agreement import stage_agreement_report
from annotation.curation.stages import STAGES
from annotation.curation.stages.base import ReviewStage
from annotation.curation.stages.pair import BOTTOM_PAIR
from annotation.curation.stages.relation import BOTTOM_ROW
from annotation.models import Description, DescriptionVersion, ReviewPolicy, Vote, WorkItem
from annotation.releases.services.audits import audit_stats
from annotation.releases.services.release_io.tables import ReleaseScope
from common.reach import relative_path
from common.versions import software_versions
from models.backends.llm.prompts import task_prompt
from models.backends.vlm.prompts import describe_prompt

MAX_REASONS = 50


def json_safe(value):
    """Plain JSON: NaN and infinities become None, numpy scalars Python numbers, keys strings."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _agreement(scope: ReleaseScope, stage: ReviewStage) -> dict | None:
    """Pre-adjudication agreement and vote distributions of a stage's votes in the release, over
    the stage's agreement units (``annotation.curation.stages``), raters by pseudonym; for a
    single-review stage its dispute rate and its first labels against the release's audits."""
    voted = scope.queryset("votes").filter(item__stage=stage.name).values("item_id")
    report = stage_agreement_report(stage=stage, items=WorkItem.objects.filter(pk__in=voted),
                                    audit_samples=scope.queryset("audit_samples"))
    if report is None:
        return None
    names = scope.pseudonyms
    report["per_rater"] = {names[int(k)]: v for k, v in report["per_rater"].items()}
    return report


def _reviewer_time(scope: ReleaseScope, stage: ReviewStage) -> dict:
    """Reviewer time per item whose record is part of the benchmark (``ReviewStage.accepted_items``)."""
    accepted = stage.accepted_items(scope.queryset("work_items").filter(stage=stage.name))
    votes = scope.queryset("votes").filter(item__stage=stage.name)
    totals = votes.aggregate(n=Count("id"), timed=Count("time_spent_ms"), ms=Sum("time_spent_ms"))
    n_accepted = accepted.count()
    seconds = (totals["ms"] or 0) / 1000.0
    return {"votes": totals["n"], "timed_votes": totals["timed"], "seconds_total": seconds,
            "accepted_items": n_accepted,
            "seconds_per_accepted_item": seconds / n_accepted if n_accepted and totals["timed"] else None}


def _withheld(scope: ReleaseScope) -> dict:
    """Per stage, what open items keep out of the release: their votes, pre-labels and proposals."""
    out = {}
    for stage in STAGES:
        items = scope.open_items().filter(stage=stage.name)
        out[stage.name] = {
            "open_items": items.count(),
            "votes": Vote.objects.filter(item__in=items.values("pk")).count(),
            "prelabels": items.exclude(prelabels={}).count(),
            "proposals": items.filter(pair__isnull=False).exclude(pair__proposal={}).count(),
        }
    return out


def _rejected_for_bottom(scope: ReleaseScope, queries) -> dict:
    """Per split, the queries rejected because a relation stayed ⊥: within their video (a dev/test
    row that is not fully binary) or to a trajectory of another video (a pair left unresolved)."""
    out = {split: {"within_video": 0, "cross_video": 0} for split in scope.splits}
    rows = queries.filter(status="rejected").values_list("video__split_group__split", "rejection_reason")
    for split, reason in rows.iterator():
        counts = out.setdefault(split, {"within_video": 0, "cross_video": 0})
        counts["within_video"] += BOTTOM_ROW in reason
        counts["cross_video"] += BOTTOM_PAIR in reason
    return out


def _by_source(counts: list[dict]) -> dict[str, int]:
    """Relations per source, summed from the counts per (split, label, source, stratum, pseudo) (one
    pass over the release's relations instead of two)."""
    totals = Counter()
    for row in counts:
        totals[row["source"]] += row["n"]
    return dict(sorted(totals.items()))


def release_statistics(scope: ReleaseScope) -> dict:
    """Audits, pre-adjudication agreement, three-vote distributions, corrections, query rejection
    reasons, reviewer time per accepted item, relation counts, completeness of the release, and
    per stage what open items withheld."""
    agreement = {s.name: _agreement(scope, s) for s in STAGES}
    relations = scope.queryset("relations")
    counts = [dict(split=split, label=label, source=source, stratum=stratum, pseudo=pseudo, n=n)
              for split, label, source, stratum, pseudo, n in relations.order_by()
              .values_list("query__video__split_group__split", "label", "source", "stratum", "pseudo")
              .annotate(n=Count("id")).order_by("query__video__split_group__split", "-label", "source", "stratum",
                                                "pseudo")]
    versions = scope.queryset("description_versions")
    queries = scope.queryset("queries")
    reasons = Counter()
    for text in queries.filter(status="rejected").values_list("rejection_reason", flat=True).iterator():
        reasons.update(part.strip() for part in text.split(";") if part.strip())
    adjudications = dict(scope.queryset("votes").filter(is_adjudication=True).order_by()
                         .values_list("item__stage").annotate(n=Count("id")).order_by("item__stage"))
    corrections = {
        "description_versions_by_origin": dict(versions.order_by().values_list("origin").annotate(n=Count("id"))
                                               .order_by("origin")),
        "descriptions_approved_after_correction": scope.queryset("descriptions").filter(
            status=Description.Status.APPROVED).exclude(approved_version__origin=DescriptionVersion.Origin.MODEL).count(),
        "descriptions_by_status": dict(scope.queryset("descriptions").order_by().values_list("status")
                                       .annotate(n=Count("id")).order_by("status")),
        "query_revisions": queries.filter(revision__gt=1).count(),
        "relations_by_source": _by_source(counts),
        "adjudication_votes_by_stage": adjudications,
    }
    completeness = {}
    for split in scope.splits:
        if split in ("dev", "test"):
            report = completeness_report(split=split, limit=0)
            completeness[split] = {k: v for k, v in report.items() if k != "missing_pairs"}
    audits = [audit_stats(audit=a) for a in scope.queryset("audits").order_by("id")]
    return json_safe({
        "audits": audits,
        "pre_adjudication_agreement": {s: None if r is None else {
            k: r[k] for k in ("n_items", "n_panel_votes", "n_adjudication_votes", "raw_agreement", "fleiss_kappa",
                              "fleiss_n_items", "krippendorff_alpha", "alpha_n_items", "adjudication_rate",
                              "label_counts", "panel_votes_per_item", "review")} | {
            k: r[k] for k in ("dispute", "audit_agreement") if k in r} for s, r in agreement.items()},
        "vote_distributions": {s: None if r is None else r["vote_distributions"] for s, r in agreement.items()},
        "per_reviewer": {s: None if r is None else r["per_rater"] for s, r in agreement.items()},
        "corrections": corrections,
        "query_status": dict(queries.order_by().values_list("status").annotate(n=Count("id")).order_by("status")),
        "queries_rejected_for_bottom": _rejected_for_bottom(scope, queries),
        "query_rejection_reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_REASONS]),
        "reviewer_time": {s.name: _reviewer_time(scope, s) for s in STAGES},
        "relations": counts,
        "completeness": completeness,
        "withheld": _withheld(scope),
    })


# -- construction configuration --------------------------------------------------------------------
def _prompt(kind: str, version: str) -> dict | None:
    """The prompt text of a recorded version, or None when this code base has no text of it (the
    embedded heuristic describer and template writer use no text prompt; their settings are in the
    run's ``backend``)."""
    try:
        if kind == "describe":

            return asdict(describe_prompt(version))

        return asdict(task_prompt(kind, version))
    except (ValueError, TypeError):
        return None


def construction_config(scope: ReleaseScope) -> dict:
    """Prompts (text by version), checkpoints and their hashes, budgets, mining settings, pseudo-label
    rules, the review policy and the software that built the release."""
    policy = ReviewPolicy.objects.filter(name="default").values("panel_size", "required_votes", "lease_seconds").first()
    configs = list(scope.queryset("proposal_configs").order_by("id").values(
        "id", "name", "version", "backend", "checkpoint_path", "checkpoint_sha256", "model_config_path", "categories",
        "anchor_policy", "detector_settings", "tracker_settings", "software", "config_hash"))
    describers = list(scope.queryset("description_runs").order_by("id").values(
        "id", "backend", "prompt_version", "prompt_sha256", "budget"))
    writers = list(scope.queryset("generation_runs").order_by("id").values(
        "id", "backend", "prompt_version", "prompt_sha256", "budget"))
    for config in configs:  # paths relative to the server's folders: a release never shows its layout
        config.update({k: relative_path(config[k]) for k in ("checkpoint_path", "model_config_path")})
    for run in describers + writers:
        if (run["backend"] or {}).get("model_path"):
            run["backend"] = {**run["backend"], "model_path": relative_path(run["backend"]["model_path"])}
    mining = list(scope.queryset("mining_runs").order_by("id").values("id", "split", "config"))
    prompts = {v: _prompt("describe", v) for v in sorted({r["prompt_version"] for r in describers})}
    prompts |= {v: _prompt("queries", v) for v in sorted({r["prompt_version"] for r in writers})}
    relation_versions = {(r["config"].get("writer") or {}).get("prompt_version") for r in mining}
    prompts |= {v: _prompt("relation", v) for v in sorted(relation_versions - {None})}
    rules = list(scope.queryset("pseudo_rules").order_by("id").values(
        "id", "name", "rule", "rule_sha256", "declared_bound", "calibration", "accepted"))
    return json_safe({"review_policy": policy, "proposal_configs": configs, "describer_runs": describers,
                      "writer_runs": writers, "mining_runs": mining, "prompts": prompts, "pseudo_label_rules": rules,
                      "software": software_versions()})
