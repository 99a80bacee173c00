"""Queries (DESIGN 2.7) and their within-video relation rows (DESIGN 2.8).

A generation run asks the query writer for queries from each approved description's facts alone
(no other candidate is shown to it). Every predicate must cite approved facts of that description
(``models.facts.check_query``); a proposal that does not is stored ``rejected`` with the reason.
Each proposed query opens one ``relation`` review item: the query against its video's complete
frozen pool, candidates without approved descriptions included. The writer's pre-labels highlight
facts; they never decide.

A relation item starts with one reviewer. Pairs the reviewer marks ``⊥`` or labels against a
binary pre-label are disputed: the panel widens to two and an independent second reviewer labels
those pairs; ``annotation.rules.relation_final`` gives each pair's final label and what stays
unresolved is ``⊥``. Then the query is admitted or rejected by the rules of DESIGN 2.8. How a
row is reviewed and what decides admission is the relation stage's
(``annotation.curation.stages.relation``); this module opens the rows with its panel.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation.benchmark import backends
from annotation.benchmark.services.descriptions import approved_facts
from annotation.benchmark.services.runs import frozen_pools_check, model_run_record
from annotation.curation.stages import relation
from annotation.models import (
    CandidatePool,
    Description,
    GenerationRun,
    PoolMember,
    Query,
    WorkItem,
)
from common.errors import ApplicationError, ConflictError
from common.jobs.services import JobReporter
from models.facts import Fact, Predicate, QueryProposal, check_query

logger = logging.getLogger(__name__)
OPEN_QUERY_STATES = (Query.Status.IN_REVIEW, Query.Status.ACCEPTED)


# -- generation ------------------------------------------------------------------------------------
def generation_run_create(*, pools: list[CandidatePool], backend: dict | None = None, budget: dict | None = None,
                          created_by=None, queue: bool = True) -> GenerationRun:
    """Record a query-writer run over the approved descriptions of frozen pools and queue it."""
    frozen_pools_check(pools, purpose="write queries for")
    return model_run_record(model=GenerationRun, kind="generation_run", pools=pools,
                            settings=backends.writer_settings(backend, budget), created_by=created_by,
                            queue=queue)


def _pool_facts(pool: CandidatePool) -> dict[int, list]:
    """Approved facts per pool member (empty for members without an approved description)."""
    out = {m.trajectory_id: [] for m in PoolMember.objects.filter(pool=pool).only("trajectory_id")}
    for d in Description.objects.filter(pool=pool, status=Description.Status.APPROVED).select_related("approved_version"):
        out[d.trajectory_id] = approved_facts(d)
    return out


def _prelabels(text: str, predicates: list[dict], writer: backends.WriterAdapter | None,
               facts_by_member: dict[int, list]) -> dict:
    """The writer's reading of a query against every pool member (hints; never decisions). Called
    outside transactions: a model endpoint may take seconds per call."""
    if writer is None:
        return {}
    return {str(tid): writer.propose_relation(predicates, facts, text=text) if facts else
            {"label": -1, "predicates": [], "evidence": []} for tid, facts in facts_by_member.items()}


def _open_relation_item(query: Query, prelabels: dict) -> WorkItem:
    """The query's relation row against its complete pool."""
    return WorkItem.objects.create(stage=WorkItem.Stage.RELATION, video_id=query.video_id, query=query,
                                   panel_size=relation.STAGE.panel, required_votes=relation.STAGE.required,
                                   prelabels=prelabels)


def _close_open_items(queries) -> None:
    """Close the relation and pair items of queries that were replaced (revised, or their pool was);
    a vote arriving later gets 409 ``item_closed``. Locks the items before the queries change."""
    open_states = (WorkItem.State.OPEN, WorkItem.State.ADJUDICATE)
    ids = list(WorkItem.objects.filter(Q(query__in=queries) | Q(pair__query__in=queries), state__in=open_states)
               .values_list("pk", flat=True))
    locked = list(WorkItem.objects.select_for_update().filter(pk__in=ids, state__in=open_states)
                  .values_list("pk", flat=True))
    WorkItem.objects.filter(pk__in=locked).update(state=WorkItem.State.UNRESOLVED, decided_at=timezone.now())


def generation_run_execute(*, run: GenerationRun, reporter: JobReporter | None = None) -> dict:
    """Write queries for every approved description of the run's pools that has none from this run;
    idempotent under re-delivery. Returns counts."""
    writer = backends.build_writer(run.backend, run.budget)
    counts = {"proposed": 0, "rejected": 0, "descriptions": 0}
    pools = list(run.pools.all().select_related("video"))
    for p_index, pool in enumerate(pools):
        facts_by_member = _pool_facts(pool)
        done = set(Query.objects.filter(run=run, pool=pool).values_list("target_id", flat=True))
        for d in Description.objects.filter(pool=pool, status=Description.Status.APPROVED).select_related("approved_version"):
            if d.trajectory_id in done:
                continue
            facts = facts_by_member[d.trajectory_id]
            written, info = writer.generate(facts)
            if info.get("prompt_sha256") and run.prompt_sha256 != info["prompt_sha256"]:
                run.prompt_version, run.prompt_sha256 = info.get("prompt_version", ""), info["prompt_sha256"]
                run.save(update_fields=["prompt_version", "prompt_sha256"])
            counts["descriptions"] += 1
            prepared = []
            for w in written:
                reasons = check_query(w.proposal, facts) if w.proposal is not None else [w.reason or "invalid output"]
                prelabels = {} if reasons else _prelabels(w.proposal.text, [vars(p) for p in w.proposal.predicates],
                                                          writer, facts_by_member)
                prepared.append((w, reasons, prelabels))
            with transaction.atomic():
                for w, reasons, prelabels in prepared:
                    common = dict(pool=pool, video=pool.video, target_id=d.trajectory_id,
                                  source_version=d.approved_version, run=run, raw_output=w.raw[:20000])
                    if reasons:
                        Query.objects.create(**common, text=(w.proposal.text if w.proposal else "")[:2000],
                                             predicates=[vars(p) for p in w.proposal.predicates] if w.proposal else [],
                                             status=Query.Status.REJECTED, rejection_reason="; ".join(reasons))
                        counts["rejected"] += 1
                        continue
                    query = Query.objects.create(**common, text=w.proposal.text,
                                                 predicates=[vars(p) for p in w.proposal.predicates],
                                                 status=Query.Status.IN_REVIEW)
                    _open_relation_item(query, prelabels)
                    counts["proposed"] += 1
        if reporter is not None:
            reporter((p_index + 1) / len(pools), f"pool {p_index + 1}/{len(pools)}")
    run.stats = counts
    run.save(update_fields=["stats"])
    return counts


def query_revise(*, query: Query, text: str, predicates: list[dict], revised_by) -> Query:
    """A new revision of a query's wording or predicates; the old one is superseded (its open items
    closed) and the new wording is verified against the video's current pool. The predicates must
    cite the approved facts the query was written from. A query marked for re-verification moves
    to the new pool version this way (its target must still be a member). Locks the query's items,
    then the query."""
    text = (text or "").strip()
    if not 3 <= len(text) <= 500:
        raise ApplicationError("a query text has 3 to 500 characters", code="invalid_query")
    try:
        proposal = QueryProposal(text=text, predicates=[Predicate(**p) for p in predicates])
    except TypeError:
        raise ApplicationError("predicates are objects with name, value and fact_ids", code="invalid_query") from None
    facts = [Fact(**f) for f in query.source_version.content["facts"] if f.get("known", True)]
    reasons = check_query(proposal, facts)
    if reasons:
        raise ApplicationError("; ".join(reasons), code="unsupported_predicate", extra={"reasons": reasons})
    pool = CandidatePool.objects.filter(video_id=query.video_id, frozen_at__isnull=False,
                                        superseded_by__isnull=True).order_by("-version").first()
    if pool is None or not PoolMember.objects.filter(pool=pool, trajectory_id=query.target_id).exists():
        raise ConflictError(f"the query's trajectory {query.target_id} is not in the video's current pool; write a "
                            "new query instead", code="target_not_in_pool")
    predicate_dicts = [vars(p) for p in proposal.predicates]
    writer = backends.build_writer(query.run.backend, query.run.budget) if query.run else None
    prelabels = _prelabels(text, predicate_dicts, writer, _pool_facts(pool))
    with transaction.atomic():
        _close_open_items([query.pk])
        query = Query.objects.select_for_update().get(pk=query.pk)
        if query.status in (Query.Status.SUPERSEDED, Query.Status.REJECTED):
            raise ConflictError(f"query {query.pk} is {query.status}; revise its latest revision", code="query_closed")
        query.status = Query.Status.SUPERSEDED
        query.save(update_fields=["status"])
        revision = Query.objects.create(pool=pool, video=query.video, target=query.target,
                                        source_version=query.source_version, run=query.run, text=text,
                                        predicates=predicate_dicts, revision=query.revision + 1,
                                        parent=query, status=Query.Status.IN_REVIEW, created_by=revised_by)
        _open_relation_item(revision, prelabels)
    return revision


def queries_mark_for_reverification(old_pool: CandidatePool, new_pool: CandidatePool) -> None:
    """Queries of a replaced pool stop being reviewed and wait for a revision on the new one.
    Called by ``annotation.curation.services.pools.pool_freeze`` inside the transaction that makes
    the new pool version."""
    affected = list(Query.objects.filter(pool=old_pool, status__in=OPEN_QUERY_STATES).values_list("pk", flat=True))
    _close_open_items(affected)
    Query.objects.filter(pk__in=affected).update(status=Query.Status.NEEDS_REVERIFICATION)


# -- benchmark membership --------------------------------------------------------------------------
def benchmark_videos(*, split: str) -> list[int]:
    """Videos that enter the benchmark: a current frozen pool with ≥2 candidates and ≥1 accepted query."""
    current = CandidatePool.objects.filter(video__split_group__split=split, frozen_at__isnull=False,
                                           superseded_by__isnull=True)
    rows = current.annotate(accepted=Count("queries", filter=Q(queries__status=Query.Status.ACCEPTED))) \
        .filter(n_members__gte=2, accepted__gte=1).values_list("video_id", flat=True)
    return sorted(rows)
