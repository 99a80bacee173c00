"""Cross-video expansion (DESIGN 2.9): mining, the writer's proposals, pair review and the
completeness report of dev/test.

A mining run embeds a split's admitted queries and its benchmark trajectories, mines candidate
pairs across videos into strata (``models.mining``), records each pair once (a pair mined again
gains a provenance and keeps its review), asks the query writer for a proposal
``Ŷ ∈ {1, 0, ⊥}`` with decisive predicates and evidence, and routes the pairs: potential matches,
hard negatives and random pairs to pair review, easy negatives to review in a seeded stratified
sample (``easy_review_rate``); the rest stay ``⊥`` (or become pseudo-labels through the gate in
``annotation.services.pseudolabels``). Stratum and final label are stored apart.

Embeddings: the query text, and for each trajectory the text of its approved description
(appearance and motion; the model's proposal when none is approved, "a person" when there is no
description at all), both through the same frozen sentence encoder (the packaged MiniLM by
default), so the similarity is text-to-text in one space.
"""
from __future__ import annotations

import logging

import numpy as np
from django.db import transaction

from annotation import backends
from annotation.models import (
    CandidatePool,
    CrossPair,
    Description,
    MiningRun,
    PoolMember,
    Query,
    Relation,
    Vote,
    WorkItem,
)
from annotation.rules import relation_disputed, relation_final
from annotation.services.descriptions import approved_facts
from annotation.services.queries import benchmark_videos
from annotation.services.votes import STAGE_HANDLERS, StageHandler
from common.errors import ApplicationError
from workers.services import JobReporter, job_create

logger = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")
PAIR_LABEL_VALUES = {"match": 1, "mismatch": 0, "uncertain": -1}
DEFAULT_MINING = {"potential_k": 5, "hard_k": 10, "easy_k": 10, "easy_max": 0.2, "random_k": 5, "seed": 0}


def split_members(split: str) -> tuple[list[Query], list[PoolMember]]:
    """The split's admitted queries and the members of its benchmark videos' current pools."""
    videos = benchmark_videos(split=split)
    pools = CandidatePool.objects.filter(video_id__in=videos, frozen_at__isnull=False, superseded_by__isnull=True)
    queries = list(Query.objects.filter(pool__in=pools, status=Query.Status.ACCEPTED).order_by("id"))
    members = list(PoolMember.objects.filter(pool__in=pools).select_related("pool").order_by("trajectory_id"))
    return queries, members


def mining_run_create(*, split: str, config: dict | None = None, writer: dict | None = None, created_by=None,
                      queue: bool = True) -> MiningRun:
    """Record and queue a mining run of ``split``. ``config``: ``models.mining.MiningConfig``
    fields plus ``easy_review_rate`` (fraction of easy negatives sent to review, default 0.2)."""
    from models.mining import MiningConfig

    if split not in SPLITS:
        raise ApplicationError(f"split must be one of {SPLITS}", code="invalid_split")
    config = {**DEFAULT_MINING, **(config or {})}
    rate = config.pop("easy_review_rate", 0.2)
    if not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise ApplicationError("easy_review_rate must be between 0 and 1", code="invalid_config")
    text_encoder = config.pop("text_encoder", None)
    try:
        mining = MiningConfig.from_dict({**config, "encoders": ["text"], "weights": [1.0]})
    except (TypeError, ValueError) as exc:
        raise ApplicationError(f"invalid mining config: {exc}", code="invalid_config") from None
    backends.build_writer(writer, None)   # refuse a bad writer now, not in the worker
    with transaction.atomic():
        job = job_create(kind="mining_run", params={"split": split}, created_by=created_by)
        run = MiningRun.objects.create(split=split, job=job, created_by=created_by,
                                       config={"mining": mining.to_dict(), "easy_review_rate": rate,
                                               "text_encoder": text_encoder or {}, "writer": writer or {}})
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if queue:
            from annotation.tasks import mining_run_task

            transaction.on_commit(lambda: mining_run_task.delay(run.pk))
    return run


def _trajectory_texts(members: list[PoolMember]) -> tuple[list[str], dict[int, list]]:
    descriptions = {(d.pool_id, d.trajectory_id): d for d in Description.objects.filter(
        pool__in={m.pool_id for m in members}).select_related("approved_version").prefetch_related("versions")}
    texts, facts = [], {}
    for m in members:
        d = descriptions.get((m.pool_id, m.trajectory_id))
        content = None
        if d is not None and d.approved_version is not None:
            content = d.approved_version.content
        elif d is not None and d.versions.all():
            content = d.versions.all()[0].content
        texts.append(f"{content['appearance']} {content['motion']}".strip() if content else "a person")
        facts[m.trajectory_id] = approved_facts(d) if d is not None else []
    return texts, facts


def mining_run_execute(*, run: MiningRun, reporter: JobReporter | None = None) -> dict:
    """Mine, record and route the pairs of ``run``; idempotent (pairs and items are unique)."""
    from models.encoders.text import build_text_encoder
    from models.mining import MiningConfig, mine

    queries, members = split_members(run.split)
    if not queries or not members:
        run.log = {"note": "no admitted queries or benchmark trajectories in this split"}
        run.save(update_fields=["log"])
        return run.log
    encoder = build_text_encoder(run.config.get("text_encoder") or None)
    traj_texts, facts_by_traj = _trajectory_texts(members)
    q_emb = encoder.encode([q.text for q in queries]).pooled
    t_emb = encoder.encode(traj_texts).pooled
    q_emb = q_emb / np.linalg.norm(q_emb, axis=1, keepdims=True)
    t_emb = t_emb / np.linalg.norm(t_emb, axis=1, keepdims=True)
    config = MiningConfig.from_dict({**run.config["mining"], "encoders": [encoder.name],
                                     "run_name": f"mining-run-{run.pk}"})
    known = list(Relation.objects.filter(query__in=queries).values_list("query_id", "trajectory_id"))
    known += list(CrossPair.objects.filter(query__in=queries).values_list("query_id", "trajectory_id"))
    if reporter is not None:
        reporter(0.2, f"mining {len(queries)} queries × {len(members)} trajectories")
    result = mine(config, query_ids=np.array([q.pk for q in queries]),
                  query_videos=np.array([q.video_id for q in queries]),
                  query_splits=np.array([run.split] * len(queries)), query_emb=q_emb,
                  traj_ids=np.array([m.trajectory_id for m in members]),
                  traj_videos=np.array([m.pool.video_id for m in members]),
                  traj_splits=np.array([run.split] * len(members)), traj_emb=t_emb,
                  known_pairs=np.array(known, dtype=np.int64).reshape(-1, 2))
    writer = backends.build_writer(run.config.get("writer") or None, None)
    queries_by_id = {q.pk: q for q in queries}
    rng = np.random.default_rng([run.config["mining"].get("seed", 0), run.pk])
    rate = float(run.config.get("easy_review_rate", 0.2))
    counts = {"pairs": len(result), "queued": 0, "not_sampled": 0, **{f"mined_{k}": v for k, v in result.counts().items()}}
    for i in range(len(result)):
        pair = result.pair(i)
        query = queries_by_id[pair.query_id]
        provenance = [dict(p, mining_run=run.pk) for p in pair.provenance]
        with transaction.atomic():
            existing = CrossPair.objects.select_for_update().filter(query=query, trajectory_id=pair.trajectory_id).first()
            if existing is not None:            # mined before: one pair, both provenances, one review
                existing.provenance = existing.provenance + provenance
                existing.strata = sorted(set(existing.strata) | set(pair.strata))
                existing.save(update_fields=["provenance", "strata"])
                continue
            sampled = pair.stratum != "easy_negative" or rng.random() < rate
            proposal = writer.propose_relation(query.predicates, facts_by_traj.get(pair.trajectory_id, []), text=query.text)
            cross = CrossPair.objects.create(
                query=query, trajectory_id=pair.trajectory_id, stratum=pair.stratum, strata=list(pair.strata),
                provenance=provenance, similarity=pair.similarity, proposal=proposal,
                review=CrossPair.Review.QUEUED if sampled else CrossPair.Review.NOT_SAMPLED)
            if sampled:
                WorkItem.objects.create(stage=WorkItem.Stage.PAIR, video_id=query.video_id, pair=cross, panel_size=1,
                                        required_votes=1, prelabels={"proposal": proposal})
                counts["queued"] += 1
            else:
                counts["not_sampled"] += 1
        if reporter is not None and i % 50 == 0:
            reporter(0.2 + 0.8 * (i + 1) / len(result), f"recorded {i + 1}/{len(result)} pairs")
    run.log = {**result.log, "counts": counts, "strata_definition": config.strata_definition(),
               "config": config.to_dict(), "easy_review_rate": rate}
    run.save(update_fields=["log"])
    return counts


# -- pair review -----------------------------------------------------------------------------------
def _check_pair(*, item: WorkItem, annotator, label: str, correction, payload, judgments) -> dict:
    if correction is not None or judgments:
        raise ApplicationError("a pair vote carries a label (match, mismatch, uncertain) and reasons only",
                               code="unexpected_fields")
    return {"payload": payload or {}}


def _pair_labels(item: WorkItem) -> list[int]:
    return [PAIR_LABEL_VALUES[v] for v in Vote.objects.filter(item=item).order_by("created_at", "id")
            .values_list("label", flat=True)]


def _pair_rule(item: WorkItem) -> tuple[str, str]:
    labels = _pair_labels(item)
    if not labels:
        return WorkItem.State.OPEN, ""
    if len(labels) == 1 and item.panel_size == 1:
        proposal = (item.prelabels.get("proposal") or {}).get("label")
        if relation_disputed(labels[0], proposal):
            item.panel_size, item.disputed = 2, [item.pair.trajectory_id]
            item.save(update_fields=["panel_size", "disputed"])
            return WorkItem.State.OPEN, ""
    if len(labels) < item.panel_size:
        return WorkItem.State.OPEN, ""
    final = relation_final(labels)
    return WorkItem.State.DECIDED, {1: "match", 0: "mismatch", -1: "uncertain"}[final]


def _on_pair_closed(item: WorkItem) -> None:
    labels = _pair_labels(item)
    final = relation_final(labels)
    pair = CrossPair.objects.select_for_update().get(pk=item.pair_id)
    source = Relation.Source.POOL if final == -1 else (
        Relation.Source.HUMAN if len(labels) == 1 else Relation.Source.SECOND_REVIEW)
    Relation.objects.update_or_create(query_id=pair.query_id, trajectory_id=pair.trajectory_id, defaults=dict(
        label=final, source=source, stratum=pair.stratum, item=item, pseudo=False, rule=None,
        evidence={"proposal": pair.proposal, "reviews": labels}))
    pair.review = CrossPair.Review.DONE
    pair.save(update_fields=["review"])


STAGE_HANDLERS[WorkItem.Stage.PAIR] = StageHandler(check=_check_pair, after_vote=lambda **_: None, rule=_pair_rule,
                                                   on_closed=_on_pair_closed)


# -- completeness ----------------------------------------------------------------------------------
def completeness_report(*, split: str, limit: int = 200) -> dict:
    """Which relations the Traj2T and OCVR galleries of ``split`` need and which are not binary.

    Both protocols score every admitted query against every benchmark trajectory of the split
    (Traj2T ranks all queries per trajectory; OCVR needs each video's relevance, i.e. every member),
    so every (query, trajectory) pair must carry a verified 1 or 0 (pseudo-labels do not count).
    """
    queries, members = split_members(split)
    q_ids = [q.pk for q in queries]
    t_ids = [m.trajectory_id for m in members]
    binary = set(Relation.objects.filter(query_id__in=q_ids, trajectory_id__in=t_ids, label__in=(0, 1), pseudo=False)
                 .values_list("query_id", "trajectory_id"))
    missing = [(q, t) for q in q_ids for t in t_ids if (q, t) not in binary]
    by_kind = {"within_video": 0, "cross_video": 0}
    video_of_query = {q.pk: q.video_id for q in queries}
    video_of_traj = {m.trajectory_id: m.pool.video_id for m in members}
    for q, t in missing:
        by_kind["within_video" if video_of_query[q] == video_of_traj[t] else "cross_video"] += 1
    return {"split": split, "queries": len(q_ids), "trajectories": len(t_ids), "needed": len(q_ids) * len(t_ids),
            "binary": len(q_ids) * len(t_ids) - len(missing), "missing": len(missing), "missing_by_kind": by_kind,
            "complete": not missing and bool(q_ids), "missing_pairs": [list(p) for p in missing[:limit]]}


def completion_pairs_queue(*, split: str) -> int:
    """Send every cross-video pair the completeness report still misses (and that nobody reviews
    yet) to pair review, in the ``completion`` stratum, with the writer's proposal. For dev/test
    splits whose mining budgets did not cover every pair. Returns the number queued."""
    report = completeness_report(split=split, limit=10**9)
    queries = {q.pk: q for q in Query.objects.filter(pk__in={q for q, _ in report["missing_pairs"]})}
    writer = backends.build_writer(None, None)
    queued = 0
    facts_cache: dict[int, list] = {}
    for q_id, t_id in report["missing_pairs"]:
        query = queries[q_id]
        if query.video_id == PoolMember.objects.filter(trajectory_id=t_id).values_list("pool__video_id", flat=True).first():
            continue                                 # within-video: the relation row covers it
        with transaction.atomic():
            if CrossPair.objects.filter(query_id=q_id, trajectory_id=t_id).exists():
                pair = CrossPair.objects.get(query_id=q_id, trajectory_id=t_id)
                if pair.review != CrossPair.Review.NOT_SAMPLED:
                    continue
                pair.review = CrossPair.Review.QUEUED
                pair.save(update_fields=["review"])
            else:
                if t_id not in facts_cache:
                    d = Description.objects.filter(trajectory_id=t_id, pool=PoolMember.objects.filter(
                        trajectory_id=t_id).values("pool_id")[:1]).select_related("approved_version").first()
                    facts_cache[t_id] = approved_facts(d) if d is not None else []
                proposal = writer.propose_relation(query.predicates, facts_cache[t_id], text=query.text)
                pair = CrossPair.objects.create(query=query, trajectory_id=t_id, stratum="completion",
                                                strata=["completion"], provenance=[{"run": "completion"}], similarity=0.0,
                                                proposal=proposal, review=CrossPair.Review.QUEUED)
            WorkItem.objects.get_or_create(stage=WorkItem.Stage.PAIR, pair=pair, defaults=dict(
                video_id=query.video_id, panel_size=1, required_votes=1, prelabels={"proposal": pair.proposal}))
            queued += 1
    return queued
