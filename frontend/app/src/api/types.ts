// The UI's names for the REST API's shapes. Every type here is an alias of, or is derived from,
// the generated `components["schemas"]` in schema.gen.ts (`make api-types` regenerates it from
// /api/schema/). Two derivations recur:
// - `Sent<T>`: a response field that DRF always writes but that the schema marks optional
//   (model fields with a default are optional on input, and the schema shares the declaration).
// - `Json<T, {...}>`: a JSON field that the schema leaves free-form (`unknown`), given the
//   structure the UI reads from it. Typing that field in its serializer lets the entry go.

import type { components } from "./schema.gen";

type Schemas = components["schemas"];

/** Every field present, as DRF's serializers always send them. */
export type Sent<T> = { [K in keyof T]-?: Exclude<T[K], undefined> };

/** `T` with the named free-form JSON fields given the structure the UI reads. */
type Json<T, Fields extends { [K in keyof T]?: unknown }> = Omit<T, keyof Fields> & Fields;

type Dict<V = unknown> = Record<string, V>;

// -- people ---------------------------------------------------------------------------------------
export type Role = "annotator" | "adjudicator" | "auditor" | "manager";
export type Me = Json<Schemas["MeOutput"], { roles: Role[] }>;

/** One page of a list endpoint (DRF's LimitOffsetPagination: `?limit=&offset=`). The schema
 *  declares list responses as bare arrays; this is the envelope `common.pagination` wraps them in. */
export interface Page<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

// -- media and trajectories -----------------------------------------------------------------------
export type Split = Schemas["SplitGroupOutputSplitEnum"];
export type Video = Schemas["VideoOutput"];
export type TrajectorySummary = Schemas["TrajectoryOutput"];
export type TrajectoryDetail = Json<Schemas["TrajectoryDetailOutput"], { boxes: [number, number, number, number][] }>;
export type Crop = Schemas["TrajectoryCropListOutput"];

// -- review ---------------------------------------------------------------------------------------
/** A 1 | 0 | ⊥ relation label as the API stores it (⊥ is -1). */
export type RelationLabel = 1 | 0 | -1;

/** One attribute or event of a trajectory (models/facts.py `Fact`). Intervals are half-open
 *  `[start_frame, end_frame)`; `known: false` supports and contradicts nothing. */
export type Fact = Json<Schemas["FactOutput"], { kind: "attribute" | "event"; scope: "whole" | "interval" }>;

/** A description's content (models/facts.py `Description`): what a correction sends in full. */
export type DescriptionContent = { appearance: string; motion: string; facts: Fact[] };

export type DescriptionTarget = Json<Schemas["DescriptionTarget"], { content: DescriptionContent; inputs: Dict }>;
export type Predicate = Schemas["Predicate"];
/** A model's suggestion for one (query, trajectory) pair; shown as a hint, it never decides. */
export type ModelProposal = Json<Schemas["ModelProposal"], { label: RelationLabel }>;
export type RowCandidate = Json<Schemas["RowCandidate"], { prelabel: ModelProposal | null }>;
export type RelationRowTarget = Json<Schemas["RelationRowTarget"], { candidates: RowCandidate[] }>;
export type PairTarget = Json<Schemas["PairTarget"], { proposal: ModelProposal | null }>;

/** What is being judged: one trajectory (usability, description), a pair (identity), a query's
 *  row against its pool (relation) or a query and a trajectory of another video (pair). The
 *  stage's part is filled, the others are null. */
export type Target = Json<Schemas["Target"], {
  description: DescriptionTarget | null;
  relation_row: RelationRowTarget | null;
  pair: PairTarget | null;
}>;

export type OwnVote = Json<Sent<Schemas["OwnVote"]>, {
  reasons: string[];
  payload: Dict;
  judgments: Dict<RelationLabel>;
}>;

/** What a vote sends besides the label (the stage decides which parts it needs). */
export type VoteInput = Json<Schemas["VoteInputRequest"], {
  label: string;
  time_spent_ms: number;
  client_request_id: string;
  correction?: DescriptionContent;
  judgments?: Dict<RelationLabel>;
  next?: boolean;
}>;

/** An annotator's seat on a work item (after a claim: the item likely to come next, `upcoming`). */
export type Assignment = Json<Schemas["AssignmentOutput"], { target: Target; my_vote: OwnVote | null }>;
export type Upcoming = Schemas["Upcoming"];
/** A vote's answer with the next claimed item (`next: null`: no work left). */
export type VoteAnswer = OwnVote & { next: Assignment | null };
export type SkipAnswer = { next: Assignment | null };

/** The managers' seat board: an item with its seats, holders, leases and seat events. */
export type SeatEvent = Schemas["SeatEvent"];
export type SeatItem = Schemas["SeatItem"];

export type AdjudicationVote = Json<Sent<Schemas["AdjudicationVote"]>, { reasons: string[]; payload: Dict }>;
export type AdjudicationItem = Json<Schemas["AdjudicationItem"], { target: Target; votes: AdjudicationVote[] }>;
/** A description correction that lost to the approvals of another version (recorded dissent). */
export type Dissent = Schemas["DissentOutput"];

/** A review stage as the server declares it (GET /api/review/stages/): its labels in vote-key
 *  order with their button text, the labels that decide an item, the reasons an annotator may
 *  give, and the panel size and votes required. */
export type StageDeclaration = Schemas["StageOutput"];

// -- jobs and proposal runs -----------------------------------------------------------------------
export type JobStatus = NonNullable<Schemas["JobOutput"]["status"]>;
export type Job = Sent<Schemas["JobOutput"]>;
export type JobSummary = Sent<Schemas["JobSummaryOutput"]>;
/** The run behind a job after a cancel or a retry. */
export type JobRun = Sent<Schemas["JobRunOutput"]>;
export type ProposalRun = Json<Sent<Schemas["ProposalRunOutput"]>, { job: JobSummary | null }>;
/** A proposal run's review: its items by state, and whether its pool may be frozen. */
export type RunReadiness = Schemas["RunReadiness"];

export type Pool = Sent<Schemas["PoolOutput"]>;
export type PoolMember = Json<Schemas["PoolMemberOutput"], { boxes: [number, number, number, number][] }>;
export type PoolDetail = Json<Sent<Schemas["PoolDetailOutput"]>, { members: PoolMember[] }>;

/** /api/ui/queues/: the work waiting for the signed-in person, per task type. */
export type QueueCount = Schemas["QueueOutput"];
export type Queues = Schemas["QueuesOutput"];

/** /api/ui/progress/: pipeline progress per stage and split. */
export type Progress = Json<Schemas["ProgressOutput"], {
  proposal_runs: Dict<Dict<number>>;
  review: Dict<Dict<Dict<number>>>;
  pools: Dict<{ videos: number; videos_with_pool: number; pools: number }>;
}>;

// -- agreement (GET /api/review/agreement/: the schema declares a free-form object) ---------------
export type MeanMedian = { n: number; mean: number | null; median: number | null };
export type RaterStats = {
  n_votes: number;
  n_panel_votes: number;
  n_adjudication_votes: number;
  n_scored: number;
  agreement_with_majority: number | null;
  mean_time: number | null;
};
export type Agreement = {
  stage: string;
  split: string;
  n_items: number;
  n_votes: number;
  n_panel_votes: number;
  n_adjudication_votes: number;
  labels: string[];
  label_counts: Dict<number>;
  vote_distributions: { panel: number; n_items: number; patterns: Dict<number>; detail: Dict<number> };
  raw_agreement: number | null;
  fleiss_kappa: number | null;
  fleiss_n_items: number;
  krippendorff_alpha: number | null;
  alpha_n_items: number;
  n_adjudicated_items: number;
  adjudication_rate: number | null;
  time_per_vote: MeanMedian | null;
  time_per_item: MeanMedian | null;
  per_rater: Dict<RaterStats>;
  /** Who saw each unit and what the figures measure. */
  review: ReviewDesign;
  /** Single-review stages only: how many units the first review disputed (second review). */
  dispute?: Dispute;
  /** Single-review stages only: first labels against the blind audits' random samples. */
  audit_agreement?: AuditAgreement;
};
export type ReviewDesign = {
  kind: "panel" | "single_review";
  unit: string;
  people_per_unit: number | string;
  measured: string;
};
export type Dispute = {
  n_units: number;
  n_disputed: number;
  rate: number | null;
  ci95: [number, number] | null;
  first_labels: Dict<number>;
  second_review_labels: Dict<number>;
};
export type AuditAgreement = {
  n_judged: number;
  n_agree: number;
  agreement: number | null;
  ci95: [number, number] | null;
  table: Dict<Dict<number>>;
};

// -- describer, query-writer and mining runs, completeness, snapshots ------------------------------
/** A describer (VLM) or query-writer (LLM) run over frozen pools. */
export type ModelRun = Json<Sent<Schemas["DescriptionRunOutput"] | Schemas["GenerationRunOutput"]>, {
  backend: Dict;
  budget: Dict;
  stats: Dict<number>;
  job: JobSummary | null;
}>;
export type MiningRun = Json<Sent<Schemas["MiningRunOutput"]>, { config: Dict; log: Dict; job: JobSummary | null }>;
export type Completeness = Json<Schemas["CompletenessOutput"], { missing_pairs: [number, number][] }>;

/** n_queries, n_tracks, n_videos, n_relations, zero-negative rates, and counts by label, source
 *  and stratum (models.snapshot.RelationSnapshotData.counts). */
export type SnapshotCounts = Partial<Dict<number> & {
  label: Dict<number>;
  source: Dict<number>;
  stratum: Dict<number>;
}>;
export type Snapshot = Json<Sent<Schemas["SnapshotOutput"]>, { pool_versions: Dict<number>; counts: SnapshotCounts }>;

export type Query = Json<Schemas["QueryOutput"], { ratings?: Dict }>;

// -- training and evaluation ----------------------------------------------------------------------
export type RunStatus = JobStatus | "cancelled";

/** Per-step columns of a training run: `step` and `attempt`, then whatever the trainer reported
 *  (loss and its parts, lr, label counts, zero-negative rates, seconds). */
export type StepSeries = { step: number[] } & Dict<(number | null)[]>;

type TrainingRunFields = {
  status: RunStatus;
  config: Dict;
  launch: Dict;
  resumes: { attempt: number; from_step: number }[];
  result: Dict;
  metrics: Dict;
  job: JobSummary | null;
  defaults_version: DefaultsVersion;
};
export type TrainingRun = Json<Sent<Schemas["TrainingRunOutput"]>, TrainingRunFields>;
export type TrainingRunDetail = Json<Sent<Schemas["TrainingRunDetailOutput"]>, TrainingRunFields & { series: StepSeries }>;

export type EvaluationRun = Json<Sent<Schemas["EvaluationRunOutput"]>, {
  kind: "trained" | "untrained" | "random";
  status: RunStatus;
  config: Dict;
  metrics: Dict;
  job: JobSummary | null;
}>;

// -- experiments ----------------------------------------------------------------------------------
export type ExperimentStatus = "running" | "succeeded" | "failed" | "cancelled";
export type ExperimentTask = "t2traj" | "traj2t" | "ocvr";
export type ExperimentMetric = "R@1" | "R@3" | "mAP";

/** One variant's row of a result block (models/experiments/table.py), in percent. `mean`, `std`
 *  are null when the variant has no finished seed; `delta`, `low`, `high`, `p_value` (the paired
 *  bootstrap over queries) are null for the reference (and for a variant sharing no query with
 *  it); `hier_*` (the hierarchical bootstrap over seeds, then queries) are also null under two
 *  paired seeds, and `hier_note` then says why. `defaults` names each seed's defaults version and
 *  `older_defaults` marks a row with a seed on older defaults than the table's newest (tables
 *  made before these fields lack them). */
export type ExperimentTableRow = {
  variant: string;
  reference: boolean;
  n_seeds: number;
  seeds: number[];
  values: (number | null)[];
  mean: number | null;
  std: number | null;
  delta: number | null;
  low: number | null;
  high: number | null;
  p_value: number | null;
  n_queries: number;
  hier_low?: number | null;
  hier_high?: number | null;
  hier_p_value?: number | null;
  hier_note?: string | null;
  defaults?: string[];
  older_defaults?: boolean;
};
/** The defaults versions an experiment table holds (models/experiments/table.py defaults_summary). */
export type ExperimentDefaults = { versions: string[]; newest: string | null; mixed: boolean; note: string };
export type ExperimentTableBlock = { task: ExperimentTask; metric: ExperimentMetric; stratum: string; rows: ExperimentTableRow[] };
/** An experiment's table; `{}` until a cell has succeeded. */
export type ExperimentResult = {
  reference: string;
  variants: string[];
  confidence: number;
  n_resamples: number;
  stamps: string[];
  snapshot_sha256: string;
  eval_snapshot_sha256: string;
  code_version: Dict<unknown>;
  runs: number[];
  tables: ExperimentTableBlock[];
  intervals?: Dict<string>;
  defaults?: ExperimentDefaults;
};
/** What a run or experiment read its unset settings from (workers/defaults.py); `{}` before
 *  versions were kept. */
export type DefaultsVersion = { model_kind?: string; model?: number; train?: number; commit?: string;
  resumed_over?: DefaultsVersion };
type ExperimentFields = { status: ExperimentStatus; spec: Dict; code_version: Dict<unknown>; defaults_version: DefaultsVersion };
export type Experiment = Json<Sent<Schemas["ExperimentOutput"]>, ExperimentFields>;
export type ExperimentCell = Json<Sent<Schemas["ExperimentCell"]>, { status: RunStatus }>;
export type ExperimentDetail = Json<Sent<Schemas["ExperimentDetailOutput"]>, ExperimentFields & {
  cells: ExperimentCell[];
  result: Partial<ExperimentResult>;
}>;
/** GET /api/experiments/presets/ (the schema declares a free-form object). */
export type ExperimentPreset = { name: string; model_kind: string; reference: string; variants: Dict<Dict>; description: string };

// -- audits and releases --------------------------------------------------------------------------
export type Audit = Json<Sent<Schemas["AuditOutput"]>, {
  kinds: string[];
  population: Dict<{ accepted: number; difficult: number; difficult_by_reason?: Dict<number> }>;
}>;

/** What an auditor checks: the record as accepted, nothing about how it was decided. */
export type AuditTarget = Json<Schemas["AuditTarget"], { kind: "relation" | "query" | "description"; record: Dict }>;
export type AuditJudgment = Schemas["AuditJudgmentOutput"];

/** GET /api/audits/{id}/stats/ (the schema declares a free-form object). */
export type AuditStratumStats = {
  sampled: number;
  judged: number;
  errors: number;
  error_rate: number | null;
  ci95: [number, number];
  upper95: number;
  errors_by_type: Dict<number>;
  by_reason: Dict<{ judged: number; errors: number }>;
  population?: number;
  estimated_residual_errors?: number | null;
};
export type AuditStats = {
  audit: number;
  split: string;
  seed: number;
  kinds: string[];
  samples: number;
  judged: number;
  by_kind: Dict<Dict<AuditStratumStats>>;
};

type ReleaseFields = { splits: string[]; parent_ref: Dict; counts: Dict<number>; changes: Dict };
export type Release = Json<Sent<Schemas["ReleaseOutput"]>, ReleaseFields>;
export type ReleaseDetail = Json<Sent<Schemas["ReleaseDetailOutput"]>, ReleaseFields & { config: Dict; stats: Dict }>;
/** A review item as the managers' search lists it. */
export type FoundItem = Sent<Schemas["WorkItemFound"]>;
/** One found item opened on its own: its labels and what it shows its reviewers, no one's vote. */
export type FoundItemOverview = Json<Sent<Schemas["WorkItemOverview"]>, { target: Target }>;
export type RelationRecord = Schemas["RelationOutput"];
export type ReleasePreflight = Json<Sent<Schemas["ReleasePreflightOutput"]>, { incomplete: Dict<Completeness> }>;
export type ReleaseVerify = Sent<Schemas["ReleaseVerifyOutput"]>;
export type ReleaseDiff = Json<Schemas["ReleaseDiffOutput"], { records: { table: string; key: unknown; change: string }[] }>;
