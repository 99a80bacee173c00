"""Cross-video expansion (DESIGN 2.9): mining, the writer's proposals, pair review and the
completeness report of dev/test.

A mining run embeds a split's admitted queries and its benchmark trajectories, mines candidate
pairs across videos into strata (``models.curation.mining``) by similarity *and* the structured
compatibility of the query's predicates with each trajectory's approved facts (a definite conflict
is an easy negative, never a potential match; a possible conflict among the similar ones a hard
negative; the reason goes into the pair's provenance), records each pair once (a pair mined again
gains a provenance and keeps its review), asks the query writer for a proposal
``Ŷ ∈ {1, 0, ⊥}`` with decisive predicates and evidence, and routes the pairs: potential matches,
hard negatives and random pairs to pair review, easy negatives to review in a seeded stratified
sample (``easy_review_rate``); the rest stay ``⊥`` (or become pseudo-labels through the gate in
``annotation.benchmark.services.pseudolabels``). Stratum and final label are stored apart.

Targets: on the train split, mining serves the bidirectional loss ``L_bi``, whose rows and columns
are the indexed positive records ``P``, so it targets only trajectories with an accepted source
query (the target of an admitted query; E.3.2): a confirmed mismatch with any other trajectory
would supply no comparison. Dev and test mine every benchmark trajectory (their galleries need
every pair). ``source_query_only`` in the run's config overrides the split's default.

Embeddings: the query text, and for each trajectory the text of its approved description
(appearance and motion; the model's proposal when none is approved, "a person" when there is no
description at all), both through the same frozen sentence encoder (the packaged MiniLM by
default), so the similarity is text-to-text in one space.
"""
from __future__ import annotations

import itertools
import logging
from collections import Counter

import numpy as np
from django.db import transaction

from annotation.benchmark import backends
from annotation.benchmark.services.descriptions import approved_facts
from annotation.benchmark.services.queries import benchmark_videos
from annotation.curation.stages import pair as pair_stage
from annotation.models import (
    CandidatePool,
    CrossPair,
    Description,
    MiningRun,
    PoolMember,
    Query,
    Relation,
    WorkItem,
)
from common.errors import ApplicationError
from common.jobs.runs import run_enqueue
from common.jobs.services import JobReporter, job_create
from common.registry import folders_resolve, refuse_locations
from models.backends.encoders.text import build_text_encoder
from models.curation.compatibility import Compatibility
from models.curation.mining import MiningConfig
from models.curation.mining_search import mine

logger = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")
# Easy negatives are the candidates whose approved facts definitely conflict with a required
# predicate (structured strata), at any similarity unless a run sets easy_max.
DEFAULT_MINING = {"potential_k": 5, "hard_k": 10, "easy_k": 10, "easy_max": None, "random_k": 5, "seed": 0}


def split_members(split: str) -> tuple[list[Query], list[PoolMember]]:
    """The split's admitted queries and the members of its benchmark videos' current pools."""
    videos = benchmark_videos(split=split)
    pools = CandidatePool.objects.filter(video_id__in=videos, frozen_at__isnull=False, superseded_by__isnull=True)
    queries = list(Query.objects.filter(pool__in=pools, status=Query.Status.ACCEPTED).order_by("id"))
    members = list(PoolMember.objects.filter(pool__in=pools).select_related("pool").order_by("trajectory_id"))
    return queries, members


def mining_run_create(*, split: str, config: dict | None = None, writer: dict | None = None, created_by=None,
                      queue: bool = True) -> MiningRun:
    """Record and queue a mining run of ``split``. ``config``: ``models.curation.mining.MiningConfig``
    fields plus ``easy_review_rate`` (fraction of easy negatives sent to review, default 0.2)."""

    if split not in SPLITS:
        raise ApplicationError(f"split must be one of {SPLITS}", code="invalid_split")
    refuse_locations(config or {}, field="config", folders=True)  # text_encoder.path names a registered folder
    config = {**DEFAULT_MINING, **(config or {})}
    rate = config.pop("easy_review_rate", 0.2)
    if not isinstance(rate, int | float) or not 0 <= rate <= 1:
        raise ApplicationError("easy_review_rate must be between 0 and 1", code="invalid_config")
    text_encoder = config.pop("text_encoder", None)
    source_query_only = config.pop("source_query_only", split == "train")
    if not isinstance(source_query_only, bool):
        raise ApplicationError("source_query_only must be true or false", code="invalid_config")
    if config.pop("structured", True) is not True:
        raise ApplicationError("mining strata always read the structured compatibility of the query's predicates "
                               "with the approved facts (structured must be true)", code="invalid_config")
    try:
        mining = MiningConfig.from_dict({**config, "encoders": ["text"], "weights": [1.0], "structured": True})
    except (TypeError, ValueError) as exc:
        raise ApplicationError(f"invalid mining config: {exc}", code="invalid_config") from None
    backends.build_writer(writer, None)   # refuse a bad writer now, not in the worker
    with transaction.atomic():
        job = job_create(kind="mining_run", params={"split": split}, created_by=created_by)
        run = MiningRun.objects.create(split=split, job=job, created_by=created_by,
                                       config={"mining": mining.to_dict(), "easy_review_rate": rate,
                                               "source_query_only": source_query_only,
                                               "text_encoder": text_encoder or {}, "writer": writer or {}})
        job.params = {**job.params, "run": run.pk}
        job.save(update_fields=["params"])
        if queue:
            run_enqueue(run=run)
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

    queries, members = split_members(run.split)
    targets_note = {}
    if run.config.get("source_query_only", run.split == "train"):   # L_bi: only records of P (E.3.2)
        targets = {q.target_id for q in queries}
        targets_note = {"targets": "trajectories with an accepted source query",
                        "members_without_source_query": sum(m.trajectory_id not in targets for m in members)}
        members = [m for m in members if m.trajectory_id in targets]
    if not queries or not members:
        run.log = {"note": "no admitted queries or benchmark trajectories in this split"}
        run.save(update_fields=["log"])
        return run.log
    encoder = build_text_encoder(folders_resolve(run.config.get("text_encoder")) or None)
    traj_texts, facts_by_traj = _trajectory_texts(members)
    q_emb = encoder.encode([q.text for q in queries]).pooled
    t_emb = encoder.encode(traj_texts).pooled
    q_emb = q_emb / np.linalg.norm(q_emb, axis=1, keepdims=True)
    t_emb = t_emb / np.linalg.norm(t_emb, axis=1, keepdims=True)
    config = MiningConfig.from_dict({**run.config["mining"], "encoders": [encoder.name],
                                     "run_name": f"mining-run-{run.pk}"})
    # structured strata: the query's predicates against each trajectory's approved facts (E.3.2)
    structure = Compatibility([q.predicates for q in queries],
                              [facts_by_traj.get(m.trajectory_id, []) for m in members]) if config.structured else None
    # Pairs with a relation are known (never mined, never counted against a budget). Pairs mined
    # before but not yet decided may be mined again: the stored pair gains this run's provenance
    # and is still reviewed once. A re-delivered run mines the same pairs and finds them stored.
    known = list(Relation.objects.filter(query__in=queries).values_list("query_id", "trajectory_id"))
    if reporter is not None:
        reporter(0.2, f"mining {len(queries)} queries × {len(members)} trajectories")
    result = mine(config, query_ids=np.array([q.pk for q in queries]),
                  query_videos=np.array([q.video_id for q in queries]),
                  query_splits=np.array([run.split] * len(queries)), query_emb=q_emb,
                  traj_ids=np.array([m.trajectory_id for m in members]),
                  traj_videos=np.array([m.pool.video_id for m in members]),
                  traj_splits=np.array([run.split] * len(members)), traj_emb=t_emb,
                  known_pairs=np.array(known, dtype=np.int64).reshape(-1, 2), structure=structure)
    q_pos = {q.pk: i for i, q in enumerate(queries)}
    t_pos = {m.trajectory_id: i for i, m in enumerate(members)}
    writer = backends.build_writer(run.config.get("writer") or None, None)
    queries_by_id = {q.pk: q for q in queries}
    rng = np.random.default_rng([run.config["mining"].get("seed", 0), run.pk])
    rate = float(run.config.get("easy_review_rate", 0.2))
    counts = {"pairs": len(result), "queued": 0, "not_sampled": 0, **{f"mined_{k}": v for k, v in result.counts().items()}}
    for i in range(len(result)):
        pair = result.pair(i)
        query = queries_by_id[pair.query_id]
        # why the structure put the pair where it is: the conflicting predicates and the facts' values
        reason = {} if structure is None else {"reason": structure.explain(q_pos[pair.query_id],
                                                                           t_pos[pair.trajectory_id])}
        provenance = [dict(p, mining_run=run.pk, **reason) for p in pair.provenance]
        sampled = pair.stratum != "easy_negative" or rng.random() < rate   # drawn for every pair: reproducible
        stored = CrossPair.objects.filter(query=query, trajectory_id=pair.trajectory_id).first()
        proposal = None if stored is not None else writer.propose_relation(
            query.predicates, facts_by_traj.get(pair.trajectory_id, []), text=query.text)   # outside transactions
        with transaction.atomic():
            existing = CrossPair.objects.select_for_update().filter(query=query, trajectory_id=pair.trajectory_id).first()
            if existing is not None:            # mined before: one pair, every provenance, one review
                if not any(p.get("mining_run") == run.pk for p in existing.provenance):
                    existing.provenance = existing.provenance + provenance
                    existing.strata = sorted(set(existing.strata) | set(pair.strata))
                    existing.save(update_fields=["provenance", "strata"])
                counts["already_stored"] = counts.get("already_stored", 0) + 1
                continue
            if proposal is None:
                proposal = {"label": -1, "predicates": [], "evidence": [], "reason": "stored meanwhile"}
            cross = CrossPair.objects.create(
                query=query, trajectory_id=pair.trajectory_id, stratum=pair.stratum, strata=list(pair.strata),
                provenance=provenance, similarity=pair.similarity, proposal=proposal,
                review=CrossPair.Review.QUEUED if sampled else CrossPair.Review.NOT_SAMPLED)
            if sampled:
                WorkItem.objects.create(stage=WorkItem.Stage.PAIR, video_id=query.video_id, pair=cross,
                                        panel_size=pair_stage.STAGE.panel, required_votes=pair_stage.STAGE.required,
                                        prelabels={"proposal": proposal})
                counts["queued"] += 1
            else:
                counts["not_sampled"] += 1
        if reporter is not None and i % 50 == 0:
            reporter(0.2 + 0.8 * (i + 1) / len(result), f"recorded {i + 1}/{len(result)} pairs")
    run.log = {**result.log, **targets_note, "counts": counts, "strata_definition": config.strata_definition(),
               "config": config.to_dict(), "easy_review_rate": rate}
    run.save(update_fields=["log"])
    return counts


# -- completeness ----------------------------------------------------------------------------------
COMPLETION_BATCH = 5000      # pairs one completion call queues at the most


def _binary_per_query(queries: list[Query], t_video: dict[int, int]) -> tuple[Counter, Counter]:
    """Per query: its verified binary relations to the split's trajectories, (within, across) its
    video. Streams the relations; memory grows with the queries, not with queries × trajectories."""
    within, across = Counter(), Counter()
    q_video = {q.pk: q.video_id for q in queries}
    rows = (Relation.objects.filter(query__in=[q.pk for q in queries], label__in=(0, 1), pseudo=False)
            .values_list("query_id", "trajectory_id").iterator(chunk_size=20_000))
    for q, t in rows:
        video = t_video.get(t)
        if video is not None:
            (within if video == q_video[q] else across)[q] += 1
    return within, across


def _missing_pairs(queries: list[Query], t_video: dict[int, int], done: Counter, n_tracks: int):
    """(query id, trajectory id) pairs without a verified binary label, query by query, reading
    only the queries that miss something."""
    for q in queries:
        if done[q.pk] >= n_tracks:
            continue
        have = set(Relation.objects.filter(query=q, label__in=(0, 1), pseudo=False)
                   .values_list("trajectory_id", flat=True))
        for t in t_video:
            if t not in have:
                yield q.pk, t


def completeness_report(*, split: str, limit: int = 200) -> dict:
    """Which relations the Traj2T and OCVR galleries of ``split`` need and which are not binary.

    Both protocols score every admitted query against every benchmark trajectory of the split
    (Traj2T ranks all queries per trajectory; OCVR needs each video's relevance, i.e. every member),
    so every (query, trajectory) pair must carry a verified 1 or 0 (pseudo-labels do not count).
    Counts come from the stored relations; ``missing_pairs`` lists the first ``limit`` gaps.
    """
    queries, members = split_members(split)
    t_video = {m.trajectory_id: m.pool.video_id for m in members}
    pool_size = Counter(t_video.values())
    n_q, n_t = len(queries), len(t_video)
    within, across = _binary_per_query(queries, t_video)
    needed_within = sum(pool_size[q.video_id] for q in queries)
    binary_within, binary_across = sum(within.values()), sum(across.values())
    missing_within = needed_within - binary_within
    missing_across = n_q * n_t - needed_within - binary_across
    listed = list(itertools.islice(_missing_pairs(queries, t_video, within + across, n_t), max(limit, 0)))
    missing = missing_within + missing_across
    return {"split": split, "queries": n_q, "trajectories": n_t, "needed": n_q * n_t,
            "binary": binary_within + binary_across, "missing": missing,
            "missing_by_kind": {"within_video": missing_within, "cross_video": missing_across},
            "complete": missing == 0 and n_q > 0, "missing_pairs": [list(p) for p in listed]}


def completion_pairs_queue(*, split: str, writer: dict | None = None, limit: int = COMPLETION_BATCH) -> int:
    """Send up to ``limit`` cross-video pairs that the completeness report still misses (and that
    nobody reviews yet) to pair review, in the ``completion`` stratum, with the writer's proposal.
    For dev/test splits whose mining budgets did not cover every pair; call again for more.
    Returns the number of items it opened."""
    queries, members = split_members(split)
    t_video = {m.trajectory_id: m.pool.video_id for m in members}
    by_id = {q.pk: q for q in queries}
    within, across = _binary_per_query(queries, t_video)
    adapter = backends.build_writer(writer, None)
    facts_by_traj = _trajectory_texts(members)[1]
    opened = 0
    for q_id, t_id in _missing_pairs(queries, t_video, within + across, len(t_video)):
        if opened >= limit:
            break
        query = by_id[q_id]
        if query.video_id == t_video[t_id]:
            continue                                 # within-video: the relation row covers it
        stored = CrossPair.objects.filter(query_id=q_id, trajectory_id=t_id).first()
        if stored is not None and stored.review != CrossPair.Review.NOT_SAMPLED:
            continue                                 # under review, or reviewed and left to adjudication
        proposal = stored.proposal if stored is not None else adapter.propose_relation(
            query.predicates, facts_by_traj.get(t_id, []), text=query.text)   # outside transactions
        with transaction.atomic():
            pair, created = CrossPair.objects.get_or_create(query_id=q_id, trajectory_id=t_id, defaults=dict(
                stratum="completion", strata=["completion"], provenance=[{"run": "completion"}], similarity=0.0,
                proposal=proposal, review=CrossPair.Review.QUEUED))
            if not created:
                pair.review = CrossPair.Review.QUEUED
                pair.save(update_fields=["review"])
            _, made = WorkItem.objects.get_or_create(stage=WorkItem.Stage.PAIR, pair=pair, defaults=dict(
                video_id=query.video_id, panel_size=pair_stage.STAGE.panel, required_votes=pair_stage.STAGE.required,
                prelabels={"proposal": pair.proposal}))
            opened += made
    return opened
