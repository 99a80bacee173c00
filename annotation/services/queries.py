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
unresolved is ``⊥``. Then the query is admitted or rejected by the rules of DESIGN 2.8.
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation import backends
from annotation.models import (
    CandidatePool,
    Description,
    GenerationRun,
    PoolMember,
    Query,
    Relation,
    RelationJudgment,
    Vote,
    WorkItem,
)
from annotation.rules import relation_disputed, relation_final
from annotation.services.descriptions import approved_facts
from annotation.services.pools import REVERIFY_HOOKS
from annotation.services.runs import frozen_pools_check, model_run_record
from annotation.services.votes import STAGE_HANDLERS, StageHandler
from common.errors import ApplicationError, ConflictError
from models.facts import Fact, Predicate, QueryProposal, check_query
from workers.services import JobReporter

logger = logging.getLogger(__name__)
MIN_NATURALNESS = 3          # ratings 1-5; below this the query is rejected as unnatural
OPEN_QUERY_STATES = (Query.Status.IN_REVIEW, Query.Status.ACCEPTED)


# -- generation ------------------------------------------------------------------------------------
def generation_run_create(*, pools: list[CandidatePool], backend: dict | None = None, budget: dict | None = None,
                          created_by=None, queue: bool = True) -> GenerationRun:
    """Record a query-writer run over the approved descriptions of frozen pools and queue it."""
    frozen_pools_check(pools, purpose="write queries for")
    return model_run_record(model=GenerationRun, kind="generation_run", pools=pools,
                            settings=backends.writer_settings(backend, budget), created_by=created_by,
                            task=_task if queue else None)


def _task():
    from annotation.tasks import generation_run_task

    return generation_run_task


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
                                   panel_size=1, required_votes=1, prelabels=prelabels)


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


def _mark_for_reverification(old_pool: CandidatePool, new_pool: CandidatePool) -> None:
    """Queries of a replaced pool stop being reviewed and wait for a revision on the new one."""
    affected = list(Query.objects.filter(pool=old_pool, status__in=OPEN_QUERY_STATES).values_list("pk", flat=True))
    _close_open_items(affected)
    Query.objects.filter(pk__in=affected).update(status=Query.Status.NEEDS_REVERIFICATION)


if _mark_for_reverification not in REVERIFY_HOOKS:
    REVERIFY_HOOKS.append(_mark_for_reverification)


# -- the relation row ------------------------------------------------------------------------------
def _members(item: WorkItem) -> list[int]:
    return list(PoolMember.objects.filter(pool_id=item.query.pool_id).order_by("trajectory_id")
                .values_list("trajectory_id", flat=True))


def _prelabel(item: WorkItem, tid: int) -> int | None:
    entry = item.prelabels.get(str(tid))
    return None if entry is None else int(entry["label"])


def _check_row(*, item: WorkItem, annotator, label: str, correction, payload, judgments) -> dict:
    if correction is not None:
        raise ApplicationError("a relation vote carries no correction", code="unexpected_fields")
    if not isinstance(judgments, dict) or not judgments:
        raise ApplicationError("label the candidates: judgments {trajectory id: 1 | 0 | -1}", code="judgments_required")
    members = set(_members(item))
    try:
        labels = {int(k): int(v) for k, v in judgments.items()}
    except (TypeError, ValueError):
        raise ApplicationError("judgments map trajectory ids to 1, 0 or -1", code="invalid_judgments") from None
    outside = sorted(set(labels) - members)
    if outside:
        raise ApplicationError(f"trajectories {outside} are not in this query's pool", code="not_in_pool",
                               extra={"trajectories": outside})
    if len(labels) != len(judgments):
        raise ApplicationError("each trajectory is labelled once", code="invalid_judgments")
    bad = sorted(k for k, v in labels.items() if v not in (1, 0, -1))
    if bad:
        raise ApplicationError(f"labels must be 1, 0 or -1 (⊥); trajectories {bad} have others", code="invalid_judgments")
    first = not Vote.objects.filter(item=item).exists()
    needed = members if first else set(item.disputed)
    missing = sorted(needed - set(labels))
    if missing:
        raise ApplicationError(f"label every {'candidate' if first else 'disputed candidate'}: missing {missing}",
                               code="incomplete_row", extra={"missing": missing})
    extra = sorted(set(labels) - needed)
    if extra:
        raise ApplicationError(f"the second review labels only the disputed candidates; {extra} are not disputed",
                               code="not_disputed", extra={"trajectories": extra})
    ratings = dict(payload or {})
    if first:
        faithful, natural = ratings.get("faithful"), ratings.get("natural")
        if not isinstance(faithful, bool) or not isinstance(natural, int) or not 1 <= natural <= 5:
            raise ApplicationError("rate the query: faithful (true/false) and natural (1-5)", code="ratings_required")
        ratings = {"faithful": faithful, "natural": natural}
    return {"payload": ratings}


def _store_judgments(*, item: WorkItem, vote: Vote, judgments) -> None:
    RelationJudgment.objects.bulk_create([RelationJudgment(vote=vote, trajectory_id=int(k), label=int(v))
                                          for k, v in judgments.items()])


def _row_labels(item: WorkItem) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    rows = (RelationJudgment.objects.filter(vote__item=item).order_by("vote__created_at", "vote_id")
            .values_list("trajectory_id", "label"))
    for tid, label in rows:
        out.setdefault(tid, []).append(label)
    return out


def _row_rule(item: WorkItem) -> tuple[str, str]:
    n_votes = Vote.objects.filter(item=item).count()
    if n_votes == 0:
        return WorkItem.State.OPEN, ""
    if n_votes == 1 and item.panel_size == 1:
        labels = _row_labels(item)
        disputed = sorted(tid for tid, ls in labels.items() if relation_disputed(ls[0], _prelabel(item, tid)))
        if disputed:
            item.panel_size, item.disputed = 2, disputed
            item.save(update_fields=["panel_size", "disputed"])
            return WorkItem.State.OPEN, ""
    if n_votes < item.panel_size:
        return WorkItem.State.OPEN, ""
    return WorkItem.State.DECIDED, "reviewed"


def _on_row_closed(item: WorkItem) -> None:
    """Write the row's relations and admit or reject the query (DESIGN 2.8)."""
    query = Query.objects.select_for_update().get(pk=item.query_id)
    if query.status != Query.Status.IN_REVIEW:
        return  # revised or re-pooled meanwhile: its row no longer decides anything
    labels = _row_labels(item)
    final = {tid: relation_final(ls) for tid, ls in labels.items()}
    for tid, label in final.items():
        source = (Relation.Source.HUMAN if len(labels[tid]) == 1 else Relation.Source.SECOND_REVIEW) if label != -1 \
            else Relation.Source.POOL
        Relation.objects.update_or_create(query=query, trajectory_id=tid, defaults=dict(
            label=label, source=source, stratum="within", item=item, pseudo=False, rule=None,
            evidence={"prelabel": item.prelabels.get(str(tid)), "reviews": labels[tid]}))
    ratings = Vote.objects.filter(item=item).order_by("created_at", "id").values_list("payload", flat=True).first()
    query.ratings = ratings or {}
    reason = query_admission_problem(query, final)
    if reason:
        query.status, query.rejection_reason = Query.Status.REJECTED, reason
    else:
        query.status = Query.Status.ACCEPTED
    query.save(update_fields=["status", "rejection_reason", "ratings"])


def query_admission_problem(query: Query, row: dict[int, int]) -> str:
    """Why a verified query is not admitted (empty when it is): unfaithful or unnatural wording, a
    row without exactly one match (several fragments, or none), or, on dev/test, a row that is not
    fully binary."""
    ratings = query.ratings or {}
    if ratings.get("faithful") is False:
        return "the reviewer found the query unfaithful to the target's facts"
    if int(ratings.get("natural", MIN_NATURALNESS)) < MIN_NATURALNESS:
        return f"the reviewer rated the query unnatural ({ratings.get('natural')}/5)"
    positives = [tid for tid, label in row.items() if label == 1]
    if len(positives) > 1:
        return f"the query matches {len(positives)} candidates of the pool ({positives}); it must single one out"
    if not positives:
        return "the query matches no candidate of the pool"
    if positives[0] != query.target_id:
        return (f"the query matches trajectory {positives[0]}, not trajectory {query.target_id} it was written "
                "from")
    unknown = [tid for tid, label in row.items() if label == -1]
    if query.video.split in ("dev", "test") and unknown:
        return f"a {query.video.split} query needs a fully binary row; {len(unknown)} candidates stay ⊥ ({unknown})"
    return ""


STAGE_HANDLERS[WorkItem.Stage.RELATION] = StageHandler(check=_check_row, after_vote=_store_judgments, rule=_row_rule,
                                                       on_closed=_on_row_closed)


# -- benchmark membership --------------------------------------------------------------------------
def benchmark_videos(*, split: str) -> list[int]:
    """Videos that enter the benchmark: a current frozen pool with ≥2 candidates and ≥1 accepted query."""
    current = CandidatePool.objects.filter(video__split_group__split=split, frozen_at__isnull=False,
                                           superseded_by__isnull=True)
    rows = current.annotate(accepted=Count("queries", filter=Q(queries__status=Query.Status.ACCEPTED))) \
        .filter(n_members__gte=2, accepted__gte=1).values_list("video_id", flat=True)
    return sorted(rows)
