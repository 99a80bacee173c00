"""What a release holds, table by table: columns, their types in each file, keys and references.

Every table is a list of typed columns read from one model (or derived from other tables), a key
that names a record across releases (diffs), and references to other tables' keys (checked when a
release is validated or imported). JSON Lines holds each value as the platform stores it; Parquet
holds the arrow type of :attr:`Table.schema`: ids as int64, times as ``timestamp[us, tz=UTC]``,
packed frames, scores and boxes as lists, and the JSON columns whose structure is fixed (a
``shape``, :mod:`.shapes`) as structs and lists. JSON columns whose keys vary with the backend or
the stage that wrote them (configurations, logs, statistics, model inputs and outputs) stay
canonical JSON text in both files. Labels are one encoding everywhere: ``1`` match, ``0`` mismatch,
``-1`` unknown (⊥), as int64.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

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
from annotation.releases.services.release_io.shapes import (
    EVIDENCE,
    IDS,
    PREDICATES,
    PROPOSAL,
    RATINGS,
    STRINGS,
)
from trajectories.models import (
    DuplicateCandidate,
    ProposalConfig,
    ProposalRun,
    Source,
    SplitGroup,
    Trajectory,
    Video,
)

# How a column is written (format 2). JSON Lines holds the value as shown; Parquet the arrow type.
KINDS: dict[str, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "time": pa.timestamp("us", tz="UTC"),        # ISO 8601 in UTC in JSON Lines
    "json": pa.string(),                         # nested JSON in JSON Lines; canonical JSON text in Parquet
                                                 # (or the column's shape, when it has one)
    "int32s": pa.list_(pa.int32()),              # packed int32 frames -> [f, ...]
    "float32s": pa.list_(pa.float32()),          # packed float32 scores -> [s, ...]
    "boxes": pa.list_(pa.list_(pa.float32())),   # packed float32 [N, 4] -> [[x1, y1, x2, y2], ...]
    "user": pa.string(),                         # an account id -> its pseudonym
    "ids": pa.list_(pa.int64()),                 # a list of ids (a run's released pools, by run id)
}
# how ReleaseScope.chunks reads a column of each kind (reading.TYPES)
READ_TYPES = {"int": "int", "float": "float", "str": "str", "bool": "bool", "time": "time", "json": "json",
              "int32s": "bytes", "float32s": "bytes", "boxes": "bytes", "user": "int", "ids": "int"}


@dataclass(frozen=True)
class Column:
    name: str                                    # the column's name in the files
    kind: str = "int"                            # one of KINDS
    source: str = ""                             # the values() path it is read from ("" = name)
    ref: str = ""                                # "table" or "table.column" this value names ("" = none)
    derived: bool = False                        # computed when exported; not written back on import
    doc: str = ""                                # one line for the dataset card and the Croissant file
    shape: pa.DataType | None = None             # a json column's arrow type in Parquet (None: JSON text)

    @property
    def path(self) -> str:
        return self.source or self.name


@dataclass(frozen=True)
class Table:
    name: str                                    # file stem and Croissant record set
    doc: str                                     # what a row is
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ("id",)               # columns naming a record across releases
    model: type | None = None                    # None: derived from other records, not imported

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.shape or KINDS[c.kind]) for c in self.columns])


def _c(name, kind="int", **kw) -> Column:
    return Column(name, kind, **kw)


CREATED = _c("created_at", "time")
TABLES: tuple[Table, ...] = (
    Table("reviewers", "a person who voted, corrected or audited, under a pseudonym (the same in every release)",
          (_c("id", doc="the pseudonym's number, the same in every release of this instance"),
           _c("pseudonym", "str", doc="the name used in votes, versions and audit judgments")), model=None),
    Table("sources", "a source recording (camera, session)",
          (_c("id"), _c("name", "str"), _c("description", "str"), CREATED), model=Source),
    Table("split_groups", "clips that share a split (duplicates, related clips)",
          (_c("id"), _c("name", "str"), _c("split", "str"), _c("locked_at", "time"), CREATED), model=SplitGroup),
    Table("videos", "a video: its file, geometry and split",
          (_c("id"), _c("source_id", ref="sources"), _c("split_group_id", ref="split_groups"),
           _c("split", "str", source="split_group__split", derived=True), _c("name", "str"), _c("kind", "str"),
           _c("path", "str", doc="relative path of the file (under media/ when the release includes it)"),
           _c("content_sha256", "str"), _c("size_bytes"), _c("fps", "float"), _c("frame_count"), _c("width"),
           _c("height"), _c("duration_s", "float"), _c("codec", "str"), _c("seekable", "bool"),
           _c("metadata", "json"), CREATED), model=Video),
    Table("proposal_configs", "a versioned tracker configuration: backend, checkpoint and its SHA-256, prompts",
          (_c("id"), _c("name", "str"), _c("version"), _c("backend", "str"), _c("checkpoint_path", "str"),
           _c("checkpoint_sha256", "str"), _c("model_config_path", "str"), _c("categories", "json", shape=STRINGS),
           _c("anchor_policy", "json"), _c("detector_settings", "json"), _c("tracker_settings", "json"),
           _c("software", "json"), _c("config_hash", "str"), CREATED), model=ProposalConfig),
    Table("proposal_runs", "one tracker run over one video",
          (_c("id"), _c("video_id", ref="videos"), _c("config_id", ref="proposal_configs"), _c("status", "str"),
           _c("trajectory_count"), _c("duplicate_count"), _c("error", "str"), _c("stats", "json"), CREATED,
           _c("finished_at", "time")), model=ProposalRun),
    Table("trajectories", "a proposed trajectory with its raw observations and quality signals",
          (_c("id"), _c("run_id", ref="proposal_runs"), _c("video_id", ref="videos"), _c("track_id"),
           _c("category", "str"), _c("n_obs"), _c("first_frame"), _c("last_frame"),
           _c("frames", "int32s", doc="frame indices (0-based), increasing"),
           _c("boxes", "boxes", doc="[x1, y1, x2, y2] per frame, original pixels"), _c("scores", "float32s"),
           _c("temporal_coverage", "float"), _c("longest_run"), _c("median_area", "float"), _c("abrupt_changes"),
           _c("mean_score", "float"), CREATED), model=Trajectory),
    Table("duplicates", "a pair of trajectories proposed for identity review, with its signals",
          (_c("id"), _c("video_id", ref="videos"), _c("trajectory_a_id", ref="trajectories"),
           _c("trajectory_b_id", ref="trajectories"), _c("reasons", "json", shape=STRINGS), _c("mean_iou", "float"),
           _c("covisible_frames"), _c("gap_frames"), _c("endpoint_iou", "float"),
           _c("appearance_similarity", "float"), _c("origin", "str"), CREATED), model=DuplicateCandidate),
    Table("pools", "a frozen candidate pool version of a video, with its consolidation lineage",
          (_c("id"), _c("video_id", ref="videos"), _c("version"), _c("run_id", ref="proposal_runs"),
           _c("supersedes_id", ref="pools"), _c("reason", "str"), _c("n_members"), _c("lineage", "json"),
           _c("content_sha256", "str"), _c("frozen_at", "time"), CREATED), model=CandidatePool),
    Table("pool_members", "a candidate of a pool: its consolidated observations",
          (_c("id"), _c("pool_id", ref="pools"), _c("trajectory_id", ref="trajectories"), _c("role", "str"),
           _c("group_representative_id", ref="trajectories"), _c("n_obs"), _c("n_removed"),
           _c("frames", "int32s"), _c("boxes", "boxes")), key=("pool_id", "trajectory_id"), model=PoolMember),
    Table("description_runs", "a describer (VLM) run: backend, prompt version and hash, budget",
          (_c("id"), _c("backend", "json"), _c("prompt_version", "str"), _c("prompt_sha256", "str"),
           _c("budget", "json"), _c("stats", "json"), _c("pools", "ids", source="id", ref="pools"), CREATED),
          model=DescriptionRun),
    Table("descriptions", "the description of a pool member and where its review ended",
          (_c("id"), _c("run_id", ref="description_runs"), _c("pool_id", ref="pools"),
           _c("trajectory_id", ref="trajectories"), _c("status", "str"), _c("failure", "str"),
           _c("raw_outputs", "json"), _c("attempts"), _c("inputs", "json"),
           _c("approved_version_id", ref="description_versions"), CREATED), model=Description),
    Table("description_versions", "one version of a description: the model's, a correction, a consolidation",
          (_c("id"), _c("description_id", ref="descriptions"), _c("number"), _c("origin", "str"),
           _c("parent_id", ref="description_versions"), _c("content", "json"), _c("content_sha256", "str"),
           _c("created_by", "user", source="created_by_id", ref="reviewers.pseudonym"), CREATED),
          model=DescriptionVersion),
    Table("facts", "an approved fact (D_r^H) of a pool member, with its interval and evidence frames",
          (_c("version_id", ref="description_versions"), _c("position"), _c("description_id", ref="descriptions"),
           _c("trajectory_id", ref="trajectories"), _c("pool_id", ref="pools"), _c("fact_id", "str"),
           _c("kind", "str"), _c("name", "str"), _c("value", "str"), _c("start_frame"),
           _c("end_frame", doc="half-open interval end"), _c("evidence_frames", "json", shape=IDS),
           _c("scope", "str"),
           _c("known", "bool")), key=("version_id", "position"), model=None),
    Table("generation_runs", "a query-writer (LLM) run: backend, prompt version and hash, budget",
          (_c("id"), _c("backend", "json"), _c("prompt_version", "str"), _c("prompt_sha256", "str"),
           _c("budget", "json"), _c("stats", "json"), _c("pools", "ids", source="id", ref="pools"), CREATED),
          model=GenerationRun),
    Table("queries", "a query of any status: text, required predicates citing facts, revisions, rejection reason",
          (_c("id"), _c("pool_id", ref="pools"), _c("video_id", ref="videos"), _c("target_id", ref="trajectories"),
           _c("split", "str", source="video__split_group__split", derived=True),
           _c("source_version_id", ref="description_versions"), _c("run_id", ref="generation_runs"),
           _c("text", "str"), _c("predicates", "json", shape=PREDICATES), _c("revision"),
           _c("parent_id", ref="queries"),
           _c("status", "str"), _c("rejection_reason", "str"), _c("raw_output", "str"),
           _c("ratings", "json", shape=RATINGS),
           CREATED), model=Query),
    Table("benchmark", "an evaluated query: its split, video, pool version, target and complete candidate list",
          (_c("query_id", ref="queries"), _c("split", "str"), _c("video_id", ref="videos"), _c("pool_id", ref="pools"),
           _c("pool_version"), _c("target_id", ref="trajectories"), _c("text", "str"),
           _c("predicates", "json", shape=PREDICATES),
           _c("candidates", "ids", ref="trajectories", doc="the pool members' trajectory ids")),
          key=("query_id",), model=None),
    Table("mining_runs", "a cross-video mining run: budgets, seed, encoders, strata definition and log",
          (_c("id"), _c("split", "str"), _c("config", "json"), _c("log", "json"), CREATED), model=MiningRun),
    Table("pseudo_rules", "a pseudo-label rule for easy negatives with its declared bound and calibration",
          (_c("id"), _c("name", "str"), _c("rule", "json"), _c("rule_sha256", "str"), _c("declared_bound", "float"),
           _c("calibration", "json"), _c("calibrated_at", "time"), _c("accepted", "bool"), CREATED),
          model=PseudoLabelRule),
    Table("cross_pairs", "a mined cross-video pair: stratum, strata, provenance, the writer's proposal, review",
          (_c("id"), _c("query_id", ref="queries"), _c("trajectory_id", ref="trajectories"), _c("stratum", "str"),
           _c("strata", "json", shape=STRINGS), _c("provenance", "json"), _c("similarity", "float"),
           _c("proposal", "json", shape=PROPOSAL),
           _c("review", "str"), CREATED), key=("query_id", "trajectory_id"), model=CrossPair),
    Table("work_items", "a review decision: stage, target, model suggestions shown, state and decision",
          (_c("id"), _c("stage", "str"), _c("video_id", ref="videos"), _c("trajectory_id", ref="trajectories"),
           _c("duplicate_id", ref="duplicates"), _c("description_version_id", source="description_id",
                                                    ref="description_versions"),
           _c("query_id", ref="queries"), _c("pair_id", ref="cross_pairs.id"), _c("prelabels", "json"),
           _c("disputed", "json", shape=IDS), _c("panel_size"), _c("required_votes"), _c("state", "str"),
           _c("decision", "str"), _c("decided_at", "time"), _c("reopened_at", "time"), CREATED), model=WorkItem),
    Table("votes", "one person's vote on a review item (adjudications included), with reasons and time",
          (_c("id"), _c("item_id", ref="work_items"),
           _c("annotator", "user", source="annotator_id", ref="reviewers.pseudonym"), _c("label", "str"),
           _c("correction_id", ref="description_versions"), _c("payload", "json"),
           _c("reasons", "json", shape=STRINGS),
           _c("comment", "str"), _c("time_spent_ms"), _c("is_adjudication", "bool"), CREATED), model=Vote),
    Table("relation_judgments", "one reviewer's label of one candidate of a relation row (part of a vote)",
          (_c("id"), _c("vote_id", ref="votes"), _c("trajectory_id", ref="trajectories"), _c("label")),
          model=RelationJudgment),
    Table("relations", "the verified label of a (query, trajectory) pair: 1, 0 or -1 (unknown), with evidence",
          (_c("id"), _c("query_id", ref="queries"), _c("trajectory_id", ref="trajectories"),
           _c("label", doc="1 match, 0 mismatch, -1 unknown"), _c("source", "str"),
           _c("stratum", "str", doc="within, or the mining stratum"),
           _c("pseudo", "bool", doc="an automatic easy negative: training only, never ground truth"),
           _c("evidence", "json", shape=EVIDENCE), _c("item_id", ref="work_items"), _c("rule_id", ref="pseudo_rules"),
           _c("decided_at", "time")), key=("query_id", "trajectory_id"), model=Relation),
    Table("audits", "an audit of a split: sizes, seed and the population it sampled",
          (_c("id"), _c("split", "str"), _c("kinds", "json", shape=STRINGS), _c("n_random"), _c("n_difficult"),
           _c("seed"),
           _c("population", "json"), _c("lease_seconds"), CREATED), model=Audit),
    Table("audit_samples", "an audited record: stratum (random or difficult), reasons, the record as accepted",
          (_c("id"), _c("audit_id", ref="audits"), _c("position"), _c("stratum", "str"), _c("kind", "str"),
           _c("relation_id", ref="relations.id"), _c("query_id", ref="queries"),
           _c("description_id", ref="descriptions"), _c("recorded", "json"), _c("reasons", "json", shape=STRINGS),
           _c("items", "json", shape=IDS)), model=AuditSample),
    Table("audit_judgments", "an auditor's verdict on a sample: correct, or error with its type",
          (_c("id"), _c("sample_id", ref="audit_samples"),
           _c("auditor", "user", source="auditor_id", ref="reviewers.pseudonym"), _c("verdict", "str"),
           _c("error_type", "str"), _c("note", "str"), _c("time_spent_ms"), CREATED), model=AuditJudgment),
)
TABLE = {t.name: t for t in TABLES}
