"""Reads of descriptions, queries, relations, mining and snapshots (DESIGN 2.6-2.10).

Blinding lives here, as in ``annotation.curation.selectors``:

- model suggestions (the writer's pre-labels, the pair proposals, a relation's evidence, the
  describer's raw outputs) are shown to the people who review with them (annotators,
  adjudicators, managers) and never to someone reading as an auditor;
- a reader whose only staff role is auditor reads every record blind (DESIGN 1: auditors re-check
  records blinded to model suggestions and votes): the fields of ``HIDDEN_FROM_AUDITORS`` are left
  out, filtering by them is refused, and of a description only the approved version is shown;
- a description's correction versions are votes: an annotator sees only their own, the model's,
  the consolidated and the approved versions; adjudicators and managers see every version;
- the describer's raw outputs are for managers only;
- a pair's second reviewer never sees the writer's proposal, in review or in the list (it would
  tell what the first reviewer said); what a reviewer is shown of an item is its stage's
  ``read_target`` (``annotation.curation.stages``);
- a person seated on an open relation row or pair reads none of what its stage's ``blinds`` hides
  (``annotation.curation.stages.seated_blind``), whatever their roles: of the queries of the row's
  family, the row's labels, sources and evidence, the ratings, the relations and the mined pairs'
  proposals and labels; of the pair's family, the relation and the pair's proposal and label.
  The hidden relations are left out of the relation list, the rest reads as not recorded (null).
"""
from __future__ import annotations

from dataclasses import asdict

from django.db.models import (
    Case,
    Exists,
    F,
    IntegerField,
    JSONField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)

from annotation.benchmark.services.descriptions import approved_facts
from annotation.curation.stages import seated_blind
from annotation.curation.stages.pair import STAGE as PAIR
from annotation.models import (
    AuditSample,
    CrossPair,
    Description,
    DescriptionDissent,
    DescriptionRun,
    DescriptionVersion,
    GenerationRun,
    MiningRun,
    PoolMember,
    PseudoLabelRule,
    Query,
    Relation,
    RelationSnapshot,
    WorkItem,
)
from common.errors import ApplicationError, NotFoundError
from common.roles import Role, user_has_role

# -- who sees what ---------------------------------------------------------------------------------
# What a blind reader (see ``reads_blind``) never reads of each kind of record: the model's
# suggestions and what gives them away (a relation's evidence, a pair's proposal, similarity, strata
# and mining provenance, a relation's stratum), and the votes and what gives them away (a query's
# ratings, a relation's source and review item, a description version's origin, number, parent and
# author, which tell a reviewer's correction from the describer's output).
HIDDEN_FROM_AUDITORS: dict[str, tuple[str, ...]] = {
    "relation": ("source", "stratum", "item", "evidence"),
    "cross_pair": ("stratum", "strata", "provenance", "similarity", "proposal"),
    "query": ("ratings",),
    "row_entry": ("source", "evidence"),
    "description_version": ("origin", "number", "parent", "created_by"),
}


def reads_blind(user) -> bool:
    """Whether ``user`` reads records blind, as an auditor: they hold no role other than auditor
    (reviewers and managers hold one that needs the suggestions or runs the review)."""
    return not user_has_role(user, Role.ANNOTATOR, Role.ADJUDICATOR, Role.MANAGER)


def model_suggestions_visible(user) -> bool:
    """Whether ``user`` may see model suggestions: reviewers and managers do; a person whose only
    staff role is auditor does not."""
    return not reads_blind(user)


def hidden_filters_refuse(*, viewer, record: str, filters: dict) -> None:
    """Refuse (403 ``hidden_from_auditors``) a blind reader's filter by a field they may not read:
    the rows a filter by stratum returns would tell the strata the answer leaves out."""
    if record not in HIDDEN_FROM_AUDITORS:
        raise ValueError(f"unknown record kind {record!r}; expected one of {sorted(HIDDEN_FROM_AUDITORS)}")
    hidden = sorted(k for k, v in filters.items() if v is not None and k in HIDDEN_FROM_AUDITORS[record])
    if hidden and reads_blind(viewer):
        raise ApplicationError(f"auditors read {record.replace('_', ' ')}s blind and may not filter them by "
                               f"{', '.join(hidden)}", code="hidden_from_auditors", status_code=403,
                               extra={"fields": hidden})


def all_versions_visible(user) -> bool:
    """Whether ``user`` may see every version of a description, other reviewers' corrections
    included (adjudicators decide between them; managers run the review)."""
    return user_has_role(user, Role.ADJUDICATOR, Role.MANAGER)


def raw_outputs_visible(user) -> bool:
    return user_has_role(user, Role.MANAGER)


def _get(queryset: QuerySet, pk: int, what: str):
    row = queryset.filter(pk=pk).first()
    if row is None:
        raise NotFoundError(f"{what} {pk} does not exist", code="not_found")
    return row


# -- descriptions ----------------------------------------------------------------------------------
def description_run_list() -> QuerySet[DescriptionRun]:
    return DescriptionRun.objects.select_related("job").prefetch_related("pools").order_by("-created_at", "-id")


def description_run_get(*, run_id: int) -> DescriptionRun:
    return _get(description_run_list(), run_id, "description run")


def description_list(*, pool_id: int | None = None, status: str | None = None, trajectory_id: int | None = None,
                     video_id: int | None = None) -> QuerySet[Description]:
    qs = Description.objects.select_related("pool").order_by("pool_id", "trajectory_id")
    if pool_id is not None:
        qs = qs.filter(pool_id=pool_id)
    if status:
        qs = qs.filter(status=status)
    if trajectory_id is not None:
        qs = qs.filter(trajectory_id=trajectory_id)
    if video_id is not None:
        qs = qs.filter(pool__video_id=video_id)
    return qs


def description_versions_visible(*, description: Description, viewer) -> list[DescriptionVersion]:
    """The versions ``viewer`` may see (see the module docstring), oldest first: a blind reader
    sees the approved version alone (none before approval), never the describer's suggestion."""
    versions = DescriptionVersion.objects.filter(description=description).order_by("number")
    if reads_blind(viewer):
        versions = versions.filter(pk=description.approved_version_id or 0)
    elif not all_versions_visible(viewer):
        versions = versions.filter(~Q(origin=DescriptionVersion.Origin.CORRECTION)
                                   | Q(created_by_id=getattr(viewer, "pk", None))
                                   | Q(pk=description.approved_version_id or 0))
    return list(versions)


def dissent_visible(*, description_id: int, viewer) -> bool:
    """Whether ``viewer`` may read a description's recorded dissent (corrections are votes):
    adjudicators and managers do; an auditor does, except while they hold an unjudged audit sample
    of that description (the audit is blind to votes; the dissent comes with the verdict); an
    annotator does not (they see no other reviewer's corrections)."""
    if all_versions_visible(viewer):
        return True
    if user_has_role(viewer, Role.ANNOTATOR) or not user_has_role(viewer, Role.AUDITOR):
        return False
    return not AuditSample.objects.filter(description_id=description_id, claimed_by=viewer,
                                          judgment__isnull=True).exists()


def _differences(approved: dict, corrected: dict) -> list[dict]:
    """Where a correction differs from the approved content: the texts, and each fact (by id)
    whose value or known flag differs, or that only one of them has."""
    out = [{"field": key, "approved": approved.get(key), "corrected": corrected.get(key)}
           for key in ("appearance", "motion") if approved.get(key) != corrected.get(key)]
    facts_a = {f["id"]: f for f in approved.get("facts", [])}
    facts_c = {f["id"]: f for f in corrected.get("facts", [])}
    for fid in [*facts_a, *(k for k in facts_c if k not in facts_a)]:
        a, c = facts_a.get(fid), facts_c.get(fid)
        if a != c:
            out.append({"field": f"fact {fid}" + (f" ({(a or c)['name']})" if (a or c).get("name") else ""),
                        "approved": None if a is None else (a.get("value") if a.get("known", True) else "unknown"),
                        "corrected": None if c is None else (c.get("value") if c.get("known", True) else "unknown")})
    return out


def description_dissent_list(*, description_ids) -> list[dict]:
    """The recorded dissent of the descriptions, oldest first: which correction lost to which
    approved version on which item, the reviewer's reasons and where the two differ (no names)."""
    rows = (DescriptionDissent.objects.filter(description_id__in=list(description_ids))
            .select_related("description", "vote", "correction", "approved_version").order_by("description_id", "id"))
    return [{"id": d.pk, "description": d.description_id, "trajectory": d.description.trajectory_id, "item": d.item_id,
             "correction": d.correction_id, "approved_version": d.approved_version_id, "reasons": d.vote.reasons,
             "differences": _differences(d.approved_version.content, d.correction.content), "created_at": d.created_at}
            for d in rows]


def item_dissent(*, item: WorkItem) -> list[dict]:
    """The recorded dissent on the descriptions an item's decision reads: its own description, a
    relation row's pool members' descriptions, a pair's query source and mined trajectory."""
    if item.stage == WorkItem.Stage.DESCRIPTION:
        ids = Description.objects.filter(versions__pk=item.description_id).values_list("pk", flat=True)
    elif item.stage == WorkItem.Stage.RELATION:
        ids = Description.objects.filter(pool_id=item.query.pool_id).values_list("pk", flat=True)
    elif item.stage == WorkItem.Stage.PAIR:
        pair = item.pair
        ids = Description.objects.filter(Q(versions__pk=pair.query.source_version_id)
                                         | Q(trajectory_id=pair.trajectory_id, status=Description.Status.APPROVED)
                                         ).values_list("pk", flat=True)
    else:
        return []
    return description_dissent_list(description_ids=set(ids))


def description_get(*, description_id: int, viewer) -> Description:
    """One description with what ``viewer`` may see of it attached: ``visible_versions``,
    ``facts`` (``D_r^H``, the approved version's known facts with their evidence frames),
    ``visible_raw_outputs`` (``None`` unless the viewer is a manager) and ``visible_dissent``
    (``None`` unless :func:`dissent_visible`)."""
    description = _get(description_list().select_related("approved_version"), description_id, "description")
    description.visible_dissent = (description_dissent_list(description_ids=[description.pk])
                                   if dissent_visible(description_id=description.pk, viewer=viewer) else None)
    description.visible_versions = description_versions_visible(description=description, viewer=viewer)
    description.facts = [asdict(f) for f in approved_facts(description)]
    description.visible_raw_outputs = description.raw_outputs if raw_outputs_visible(viewer) else None
    return description


# -- queries ---------------------------------------------------------------------------------------
def generation_run_list() -> QuerySet[GenerationRun]:
    return GenerationRun.objects.select_related("job").prefetch_related("pools").order_by("-created_at", "-id")


def generation_run_get(*, run_id: int) -> GenerationRun:
    return _get(generation_run_list(), run_id, "generation run")


def query_list(*, viewer, video_id: int | None = None, status: str | None = None, split: str | None = None,
               pool_id: int | None = None, text: str | None = None) -> QuerySet[Query]:
    """Queries with ``visible_ratings``: the first reviewer's ratings, null where ``viewer`` is
    seated on a row of the query's family (see the module docstring)."""
    blind = seated_blind(viewer)
    ratings = F("ratings")
    if blind.queries:
        ratings = Case(When(pk__in=sorted(blind.queries), then=Value(None, output_field=JSONField())),
                       default=F("ratings"), output_field=JSONField())
    qs = Query.objects.annotate(visible_ratings=ratings).order_by("video_id", "id")
    if video_id is not None:
        qs = qs.filter(video_id=video_id)
    if status:
        qs = qs.filter(status=status)
    if split:
        qs = qs.filter(video__split_group__split=split)
    if pool_id is not None:
        qs = qs.filter(pool_id=pool_id)
    if text:
        qs = qs.filter(text__icontains=text.strip())
    return qs


def query_get(*, query_id: int, viewer) -> Query:
    return _get(query_list(viewer=viewer), query_id, "query")


def query_detail(*, query_id: int, viewer) -> Query:
    """One query with its within-video relation row attached (``row``: one entry per member of
    its pool, ``label`` ``None`` where nothing is recorded yet; ``source`` and ``evidence`` left
    out for a blind reader; ``label``, ``source`` and ``evidence`` null for a reader seated on a row
    of the query's family), ``revised_by_id``, and ``visible_raw_output`` (the writer's raw text,
    managers only)."""
    query = query_get(query_id=query_id, viewer=viewer)
    seated = seated_blind(viewer)
    members = list(PoolMember.objects.filter(pool_id=query.pool_id).order_by("trajectory_id")
                   .values_list("trajectory_id", flat=True))
    recorded = {r.trajectory_id: r for r in Relation.objects.filter(query=query, trajectory_id__in=members)
                if not seated.hides(query.pk, r.trajectory_id)}
    row = [{"trajectory": tid, "label": recorded[tid].label if tid in recorded else None,
            "source": recorded[tid].source if tid in recorded else None,
            "evidence": recorded[tid].evidence if tid in recorded else None} for tid in members]
    if reads_blind(viewer):
        row = [{k: v for k, v in entry.items() if k not in HIDDEN_FROM_AUDITORS["row_entry"]} for entry in row]
    query.row = row
    query.revised_by_id = Query.objects.filter(parent=query).values_list("pk", flat=True).first()
    query.visible_raw_output = query.raw_output if raw_outputs_visible(viewer) else None
    return query


# -- relations and mining --------------------------------------------------------------------------
def relation_list(*, viewer, query_id: int | None = None, trajectory_id: int | None = None,
                  label: int | None = None, stratum: str | None = None, pseudo: bool | None = None,
                  split: str | None = None, video_id: int | None = None) -> QuerySet[Relation]:
    """Recorded relations, without those ``viewer`` is blind to while seated (see the module
    docstring)."""
    qs = Relation.objects.order_by("query_id", "trajectory_id")
    blind = seated_blind(viewer)
    if blind:
        qs = qs.exclude(blind.relation_filter())
    if query_id is not None:
        qs = qs.filter(query_id=query_id)
    if trajectory_id is not None:
        qs = qs.filter(trajectory_id=trajectory_id)
    if label is not None:
        qs = qs.filter(label=label)
    if stratum:
        qs = qs.filter(stratum=stratum)
    if pseudo is not None:
        qs = qs.filter(pseudo=pseudo)
    if split:
        qs = qs.filter(query__video__split_group__split=split)
    if video_id is not None:                     # the query's video or the trajectory's
        qs = qs.filter(Q(query__video_id=video_id) | Q(trajectory__video_id=video_id))
    return qs


def mining_run_list() -> QuerySet[MiningRun]:
    return MiningRun.objects.select_related("job").order_by("-created_at", "-id")


def mining_run_get(*, run_id: int) -> MiningRun:
    return _get(mining_run_list(), run_id, "mining run")


MINED_FIELDS = ("stratum", "strata", "provenance", "similarity")


def cross_pair_list(*, viewer, query_id: int | None = None, stratum: str | None = None,
                    review: str | None = None, trajectory_id: int | None = None) -> QuerySet[CrossPair]:
    """Mined pairs with their final label (``label``: the recorded relation, ``None`` while
    unreviewed); stratum and label stay separate fields. ``visible_proposal`` is the writer's
    proposal, ``None`` while the pair waits for its second review or sits open on a blind item:
    those reviews are blind to it (see the module docstring), and this list is open to them. Both read as ``None``
    where ``viewer`` is seated on a row or pair that hides them."""
    final = Relation.objects.filter(query_id=OuterRef("query_id"), trajectory_id=OuterRef("trajectory_id"))
    # a blind item (a calibration sample) hides the proposal from everyone until it closes
    second_review = WorkItem.objects.filter(
        PAIR.awaiting_second_review()
        | Q(prelabels__blind=True, state__in=(WorkItem.State.OPEN, WorkItem.State.ADJUDICATE)),
        pair_id=OuterRef("pk"))
    hidden = [When(Exists(second_review), then=Value(None, output_field=JSONField()))]
    label = Subquery(final.values("label")[:1])
    blind = seated_blind(viewer)
    # what the mining says of a pair (its strata, why its predicates conflict, how similar it is)
    # tells its label as well: hidden with it from a reader seated on the pair's family
    mined = {name: F(name) for name in MINED_FIELDS}
    if blind:
        hidden.insert(0, When(blind.relation_filter(), then=Value(None, output_field=JSONField())))
        label = Case(When(blind.relation_filter(), then=Value(None)), default=label, output_field=IntegerField())
        mined = {name: Case(When(blind.relation_filter(), then=Value(None)), default=F(name),
                            output_field=CrossPair._meta.get_field(name).__class__())
                 for name in MINED_FIELDS}
    qs = CrossPair.objects.annotate(
        label=label,
        visible_proposal=Case(*hidden, default=F("proposal"), output_field=JSONField()),
        **{f"visible_{name}": value for name, value in mined.items()},
    ).order_by("query_id", "trajectory_id")
    if query_id is not None:
        qs = qs.filter(query_id=query_id)
    if (stratum or review) and blind:
        qs = qs.exclude(blind.relation_filter())  # a filter on what is hidden would tell it
    if stratum:
        qs = qs.filter(stratum=stratum)
    if review:
        qs = qs.filter(review=review)
    if trajectory_id is not None:
        qs = qs.filter(trajectory_id=trajectory_id)
    return qs


def pseudo_rule_list() -> QuerySet[PseudoLabelRule]:
    return PseudoLabelRule.objects.order_by("-created_at", "-id")


def pseudo_rule_get(*, rule_id: int) -> PseudoLabelRule:
    return _get(pseudo_rule_list(), rule_id, "pseudo-label rule")


# -- snapshots -------------------------------------------------------------------------------------
def snapshot_list(*, split: str | None = None) -> QuerySet[RelationSnapshot]:
    qs = RelationSnapshot.objects.filter(sealed_at__isnull=False).order_by("-created_at", "-id")
    return qs.filter(split=split) if split else qs


def snapshot_get(*, snapshot_id: int) -> RelationSnapshot:
    snapshot = _get(snapshot_list(), snapshot_id, "relation snapshot")
    snapshot.n_relations = snapshot.relations.count()
    return snapshot
