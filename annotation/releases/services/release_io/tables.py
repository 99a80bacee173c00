"""Which records belong to a release, and their values as a release writes them.

The tables themselves (columns, types, keys, references) are in :mod:`.schema`, re-exported here.
Rows are streamed from the database in key order, never loaded whole.

A release of some splits holds their *benchmark* (the videos with a current frozen pool of at least
two candidates and an accepted query, DESIGN 2.8) and everything behind it: the videos' sources and
split groups, every frozen pool version of those videos and the proposal runs they came from (all
their trajectories, so every usability vote resolves), descriptions and their versions, queries of
every status, relations (``⊥`` and pseudo-labels included, tagged), mined pairs with strata and
provenance, the review items and votes of all of these, the split's mining runs, the pseudo-label
rules, and the split's audits. Only decided work is published: an item still open keeps its votes,
pre-labels, disputed candidates and its pair's proposal out (counted in the statistics as withheld).
People appear under pseudonyms (``reviewer-48213``, a number drawn at random), the same in every release
(:mod:`annotation.releases.services.pseudonyms`). Left out: account details, job
rows, claims (seats), appearance descriptors (recomputable from the video and the boxes), client
request ids.
"""
from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from django.db import connection
from django.db.models import Q, QuerySet

from annotation.benchmark.services.mining import SPLITS
from annotation.benchmark.services.queries import benchmark_videos
from annotation.curation.stages.base import CLOSED_STATES
from annotation.models import (
    Audit,
    AuditJudgment,
    AuditSample,
    CandidatePool,
    CrossPair,
    Description,
    DescriptionRun,
    DescriptionVersion,
    GenerationRun,
    MiningRun,
    PoolMember,
    PseudoLabelRule,
    Query,
    Relation,
    RelationJudgment,
    Vote,
    WorkItem,
)
from annotation.releases.services.pseudonyms import reviewer_pseudonyms
from annotation.releases.services.release_io.reading import arrays_of, record_batches
from annotation.releases.services.release_io.schema import (  # noqa: F401 (the tables, re-exported)
    KINDS,
    READ_TYPES,
    TABLE,
    TABLES,
    Column,
    Table,
)
from common.columns import AnyOf, any_of, integer_columns
from trajectories.models import (
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    Trajectory,
    Video,
)

CHUNK = 2000                                     # rows a Django iterator fetches at a time
FETCH = 10_000                                   # rows of a chunk (ReleaseScope.chunks)
# what an open review item shows its reviewers and a release leaves out (ReleaseScope._withholding)
WITHHELD = {"work_items": {"prelabels": {}, "disputed": []}, "cross_pairs": {"proposal": {}}}


# -- values ----------------------------------------------------------------------------------------
def export_value(kind: str, value, scope: ReleaseScope, table: str):
    """A database value as written to JSON Lines (Parquet takes the same in its arrow type)."""
    if value is None:
        return None
    if kind in ("int", "float", "str", "bool", "json"):
        return value
    if kind == "time":
        return value.astimezone(dt.UTC).isoformat()
    if kind == "int32s":
        return np.frombuffer(bytes(value), dtype="<i4").tolist()
    if kind == "float32s":
        return np.frombuffer(bytes(value), dtype="<f4").tolist()
    if kind == "boxes":
        return np.frombuffer(bytes(value), dtype="<f4").reshape(-1, 4).tolist()
    if kind == "user":
        return scope.pseudonyms[value]
    if kind == "ids":
        return scope.run_pools[table].get(value, [])
    raise ValueError(f"unknown column kind {kind!r}")


def import_value(kind: str, value, users: dict[str, int]):
    """A JSON Lines value as stored in the database (the inverse of :func:`export_value`)."""
    if value is None:
        return None
    if kind == "time":
        return dt.datetime.fromisoformat(value)
    if kind == "int32s":
        return np.asarray(value, dtype="<i4").tobytes()
    if kind == "float32s":
        return np.asarray(value, dtype="<f4").tobytes()
    if kind == "boxes":
        return np.asarray(value, dtype="<f4").reshape(-1, 4).tobytes()
    if kind == "user":
        return users[value]
    return value


# -- what belongs to a release ---------------------------------------------------------------------
@dataclass
class ReleaseScope:
    """The records of a release of ``splits`` (see the module docstring), as querysets."""

    splits: list[str]
    videos: list[int] = field(default_factory=list)
    pools: list[int] = field(default_factory=list)
    current_pools: list[int] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    _pseudonyms: dict[int, str] | None = None
    _run_pools: dict[str, dict[int, list[int]]] | None = None
    _closed_items: np.ndarray | None = None

    @classmethod
    def of(cls, splits: list[str]) -> ReleaseScope:
        unknown = [s for s in splits if s not in SPLITS]
        if unknown or not splits:
            raise ValueError(f"splits must be a non-empty subset of {SPLITS}, got {splits!r}")
        splits = sorted(set(splits), key=SPLITS.index)
        videos = sorted(v for s in splits for v in benchmark_videos(split=s))
        pools = CandidatePool.objects.filter(any_of("video_id", videos), frozen_at__isnull=False).order_by("id")
        return cls(splits=splits, videos=videos, pools=list(pools.values_list("id", flat=True)),
                   current_pools=list(pools.filter(superseded_by__isnull=True).values_list("id", flat=True)),
                   runs=sorted(set(pools.values_list("run_id", flat=True))))

    # querysets, one per model table
    def queryset(self, table: str) -> QuerySet:
        V, P, R = self.videos, self.pools, self.runs
        items = self.queryset("work_items") if table in ("votes", "relation_judgments") else None
        samples = self.queryset("audit_samples") if table == "audit_judgments" else None
        querysets = {
            "sources": lambda: Source.objects.filter(any_of("videos__id", V)).distinct(),
            "split_groups": lambda: SplitGroup.objects.filter(any_of("videos__id", V)).distinct(),
            "videos": lambda: Video.objects.filter(any_of("id", V)),
            "proposal_configs": lambda: ProposalConfig.objects.filter(any_of("runs__id", R)).distinct(),
            "proposal_runs": lambda: ProposalRun.objects.filter(any_of("id", R)),
            "trajectories": lambda: Trajectory.objects.filter(any_of("run_id", R)),
            "duplicates": lambda: DuplicateCandidate.objects.filter(any_of("trajectory_a__run_id", R),
                                                                    any_of("trajectory_b__run_id", R)),
            "pools": lambda: CandidatePool.objects.filter(any_of("id", P)),
            "pool_members": lambda: PoolMember.objects.filter(any_of("pool_id", P)),
            "description_runs": lambda: DescriptionRun.objects.filter(
                any_of("descriptions__pool_id", P)).distinct(),
            "descriptions": lambda: Description.objects.filter(any_of("pool_id", P)),
            "description_versions": lambda: DescriptionVersion.objects.filter(any_of("description__pool_id", P)),
            "generation_runs": lambda: GenerationRun.objects.filter(any_of("queries__pool_id", P)).distinct(),
            "queries": lambda: Query.objects.filter(any_of("pool_id", P)),
            "mining_runs": lambda: MiningRun.objects.filter(split__in=self.splits),
            "pseudo_rules": lambda: PseudoLabelRule.objects.all(),
            "cross_pairs": lambda: CrossPair.objects.filter(any_of("query__pool_id", P),
                                                            any_of("trajectory__run_id", R)),
            "work_items": lambda: WorkItem.objects.filter(any_of("video_id", V)).filter(
                Q(any_of("trajectory__run_id", R), stage=WorkItem.Stage.USABILITY)
                | Q(any_of("duplicate__trajectory_a__run_id", R), any_of("duplicate__trajectory_b__run_id", R),
                    stage=WorkItem.Stage.IDENTITY)
                | Q(any_of("description__description__pool_id", P), stage=WorkItem.Stage.DESCRIPTION)
                | Q(any_of("query__pool_id", P), stage=WorkItem.Stage.RELATION)
                | Q(any_of("pair__query__pool_id", P), any_of("pair__trajectory__run_id", R),
                    stage=WorkItem.Stage.PAIR)),
            "votes": lambda: Vote.objects.filter(self._closed("item_id", items)),
            "relation_judgments": lambda: RelationJudgment.objects.filter(self._closed("vote__item_id", items)),
            "relations": lambda: Relation.objects.filter(any_of("query__pool_id", P),
                                                         any_of("trajectory__run_id", R)),
            "audits": lambda: Audit.objects.filter(split__in=self.splits),
            "audit_samples": lambda: AuditSample.objects.filter(audit__split__in=self.splits).filter(
                Q(any_of("relation__query__pool_id", P), any_of("relation__trajectory__run_id", R))
                | Q(any_of("query__pool_id", P)) | Q(any_of("description__pool_id", P))),
            "audit_judgments": lambda: AuditJudgment.objects.filter(sample__in=samples.values("pk")),
        }
        return querysets[table]()

    def _closed(self, path: str, items: QuerySet) -> Q | AnyOf:
        """The condition that ``path`` is one of the release's closed work items (whose votes it
        holds). On PostgreSQL their ids are read once and matched as one array: as a subquery, the
        work items' five-way condition was planned as a loop over every vote's item (about 5 s per
        read at a million items, and an export reads the votes several times)."""
        if connection.vendor != "postgresql":
            return Q(**{f"{path}__in": items.filter(state__in=CLOSED_STATES).values("pk")})
        if self._closed_items is None:
            (ids,) = integer_columns(items.filter(state__in=CLOSED_STATES), "id")
            self._closed_items = np.sort(ids)                                      # [I]
        return any_of(path, self._closed_items.tolist())

    def people(self) -> set[int]:
        """The account ids of everyone the release names (voters, correctors, auditors)."""
        people = set(self.queryset("votes").order_by().values_list("annotator_id", flat=True).distinct())
        people |= set(self.queryset("description_versions").filter(created_by__isnull=False).order_by()
                      .values_list("created_by_id", flat=True).distinct())
        people |= set(self.queryset("audit_judgments").order_by().values_list("auditor_id", flat=True).distinct())
        return people

    @property
    def pseudonyms(self) -> dict[int, str]:
        """Account id -> stored pseudonym of everyone the release names (``release_create`` gives
        newcomers theirs before writing); ValueError when someone has none."""
        if self._pseudonyms is None:
            people = self.people()
            self._pseudonyms = reviewer_pseudonyms(people=people)
            missing = people - self._pseudonyms.keys()
            if missing:
                raise ValueError(f"{len(missing)} people of the release have no pseudonym yet (accounts "
                                 f"{sorted(missing)[:10]}); reviewer_pseudonyms_assign gives them one")
        return self._pseudonyms

    @property
    def run_pools(self) -> dict[str, dict[int, list[int]]]:
        """Per run table, run id -> the released pools it covered."""
        if self._run_pools is None:
            self._run_pools = {}
            for name, model in (("description_runs", DescriptionRun), ("generation_runs", GenerationRun)):
                through = model.pools.through.objects.filter(any_of("candidatepool_id", self.pools))
                mapping: dict[int, list[int]] = {}
                run_field = f"{model._meta.model_name}_id"
                for run, pool in through.order_by(run_field, "candidatepool_id").values_list(run_field,
                                                                                           "candidatepool_id"):
                    mapping.setdefault(run, []).append(pool)
                self._run_pools[name] = mapping
        return self._run_pools

    # rows ------------------------------------------------------------------------------------------
    def rows(self, table: Table) -> Iterator[tuple]:
        """The table's rows in key order, as export values in column order (streamed)."""
        if table.name == "reviewers":
            yield from sorted((int(name.rsplit("-", 1)[1]), name) for name in self.pseudonyms.values())
            return
        if table.name == "facts":
            yield from self._fact_rows()
            return
        if table.name == "benchmark":
            yield from self._benchmark_rows()
            return
        paths = [c.path for c in table.columns]
        key_paths = [table.columns[table.names.index(k)].path for k in table.key]
        kinds = [c.kind for c in table.columns]
        withhold = self._withholding(table)
        qs = self.queryset(table.name).order_by(*key_paths).values_list(*paths)
        for row in qs.iterator(chunk_size=CHUNK):
            yield tuple(export_value(kind, value, self, table.name) for kind, value in zip(kinds, withhold(row)))

    def chunks(self, table: Table) -> Iterator[list[pa.Array]]:
        """The table's rows in key order, ``FETCH`` at a time, as one arrow array per column (types in
        ``READ_TYPES``): the values of :meth:`rows`, except that JSON values are their JSON text, packed
        frames, scores and boxes their bytes, and times their text already (``encode.ChunkEncoder``
        finishes them)."""
        types = [READ_TYPES[c.kind] for c in table.columns]
        if table.model is None:
            json_at = [i for i, c in enumerate(table.columns) if c.kind == "json"]
            rows = self.rows(table)
            while batch := list(itertools.islice(rows, FETCH)):
                columns = [list(column) for column in zip(*batch)]
                for i in json_at:
                    columns[i] = [None if v is None else json.dumps(v) for v in columns[i]]
                yield arrays_of(columns, ["ids" if c.kind == "ids" else t for t, c in zip(types, table.columns)])
            return
        paths = [c.path for c in table.columns]
        key_paths = [table.columns[table.names.index(k)].path for k in table.key]
        qs = self.queryset(table.name).order_by(*key_paths).values_list(*paths)
        # everything the chunks need from the database is read first: the query holds the connection
        withhold = self._withholding_arrays(table)
        lookups = {i: self._lookup(table, c.kind) for i, c in enumerate(table.columns) if c.kind in ("user", "ids")}
        for arrays in record_batches(qs, types=types, size=FETCH):
            arrays = withhold(arrays)
            for i, lookup in lookups.items():
                arrays[i] = lookup(arrays[i])
            yield arrays

    def _lookup(self, table: Table, kind: str) -> Callable[[pa.Array], pa.Array]:
        """Account ids to pseudonyms (``user``), or run ids to the released pools they covered (``ids``),
        as ``export_value`` maps them, for every distinct id once."""
        mapping, missing, arrow_type = ((self.pseudonyms, None, pa.string()) if kind == "user" else
                                        (self.run_pools[table.name], [], pa.list_(pa.int64())))

        def lookup(ids: pa.Array) -> pa.Array:
            distinct = pc.unique(ids.drop_null())
            values = [mapping[i] if missing is None else mapping.get(i, missing) for i in distinct.to_pylist()]
            return pc.take(pa.array(values, arrow_type), pc.index_in(ids, distinct))
        return lookup

    def _withholding_arrays(self, table: Table) -> Callable[[list[pa.Array]], list[pa.Array]]:
        """:meth:`_withholding` of a chunk's arrays (JSON columns hold text)."""
        if table.name not in WITHHELD:
            return lambda arrays: arrays
        blanks = {table.names.index(name): json.dumps(value) for name, value in WITHHELD[table.name].items()}
        if table.name == "work_items":
            state = table.names.index("state")
            hidden = lambda arrays: pc.invert(pc.is_in(arrays[state], pa.array(sorted(CLOSED_STATES))))  # noqa: E731
        else:
            pairs = pa.array(sorted(self.open_items().filter(stage=WorkItem.Stage.PAIR)
                                    .values_list("pair_id", flat=True)), pa.int64())
            key = table.names.index("id")
            hidden = lambda arrays: pc.is_in(arrays[key], pairs)  # noqa: E731

        def withhold(arrays: list[pa.Array]) -> list[pa.Array]:
            mask = hidden(arrays)
            for i, blank in blanks.items():
                arrays[i] = pc.if_else(mask, pa.scalar(blank, pa.string()), arrays[i])
            return arrays
        return withhold

    def open_items(self) -> QuerySet:
        """The release's review items still open (collecting votes or awaiting adjudication)."""
        return self.queryset("work_items").exclude(state__in=CLOSED_STATES)

    def _withholding(self, table: Table) -> Callable[[tuple], tuple]:
        """What an open item shows its reviewers stays out of a release: its pre-labels and disputed
        candidates, and the writer's proposal of its pair (its votes are out of ``queryset``)."""
        if table.name not in WITHHELD:
            return lambda row: row
        blank = {table.names.index(name): value for name, value in WITHHELD[table.name].items()}
        if table.name == "work_items":
            state = table.names.index("state")
            return lambda row: row if row[state] in CLOSED_STATES else \
                tuple(blank.get(i, value) for i, value in enumerate(row))
        pairs = set(self.open_items().filter(stage=WorkItem.Stage.PAIR).values_list("pair_id", flat=True))
        key = table.names.index("id")
        return lambda row: row if row[key] not in pairs else \
            tuple(blank.get(i, value) for i, value in enumerate(row))

    def _fact_rows(self) -> Iterator[tuple]:
        approved = (Description.objects.filter(any_of("pool_id", self.pools), status=Description.Status.APPROVED,
                                               approved_version__isnull=False).order_by("approved_version_id")
                    .values_list("approved_version_id", "id", "trajectory_id", "pool_id", "approved_version__content"))
        for version, description, trajectory, pool, content in approved.iterator(chunk_size=CHUNK):
            for position, f in enumerate(content.get("facts", [])):
                yield (version, position, description, trajectory, pool, f.get("id"), f.get("kind"), f.get("name"),
                       f.get("value"), f.get("start_frame"), f.get("end_frame"), f.get("evidence_frames", []),
                       f.get("scope", "whole"), bool(f.get("known", True)))

    def _benchmark_rows(self) -> Iterator[tuple]:
        members = (PoolMember.objects.filter(any_of("pool_id", self.current_pools)).order_by("pool_id", "trajectory_id")
                   .values_list("pool_id", "trajectory_id"))
        pools, trajectories = [], []
        for chunk in record_batches(members, types=["int", "int"], size=FETCH):
            pools.append(chunk[0].to_numpy())
            trajectories.append(chunk[1].to_numpy())
        pool = np.concatenate(pools) if pools else np.zeros(0, np.int64)                   # [M]
        trajectory = (np.concatenate(trajectories) if trajectories else np.zeros(0, np.int64)).tolist()
        starts = np.flatnonzero(np.concatenate([[True], pool[1:] != pool[:-1]])) if pool.size else pool
        bounds = np.append(starts, pool.size).tolist()
        candidates = {int(pool[a]): trajectory[a:b] for a, b in itertools.pairwise(bounds)}
        queries = (Query.objects.filter(any_of("pool_id", self.current_pools), status=Query.Status.ACCEPTED)
                   .order_by("id")
                   .values_list("id", "video__split_group__split", "video_id", "pool_id", "pool__version", "target_id",
                                "text", "predicates"))
        for q, split, video, pool_id, version, target, text, predicates in queries.iterator(chunk_size=CHUNK):
            yield (q, split, video, pool_id, version, target, text, predicates, candidates.get(pool_id, []))
