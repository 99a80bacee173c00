// Shapes of the REST API's responses that the UI reads (see /api/schema/).

export type Role = "annotator" | "adjudicator" | "auditor" | "manager";

export interface Me {
  id: number;
  username: string;
  roles: Role[];
}

export interface Page<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

export interface Video {
  id: number;
  name: string;
  split: string;
  fps: number;
  frame_count: number;
  width: number;
  height: number;
}

export interface TrajectorySummary {
  id: number;
  video: number;
  run: number;
  track_id: number;
  category: string;
  n_obs: number;
  first_frame: number;
  last_frame: number;
  temporal_coverage: number;
  longest_run: number;
  median_area: number;
  abrupt_changes: number;
  mean_score: number | null;
}

export interface TrajectoryDetail {
  id: number;
  video: number;
  run: number;
  track_id: number;
  category: string;
  n_obs: number;
  first_frame: number;
  last_frame: number;
  temporal_coverage: number;
  longest_run: number;
  median_area: number;
  abrupt_changes: number;
  mean_score: number | null;
  frames: number[];
  boxes: [number, number, number, number][];
}

export interface Crop {
  frame_index: number;
  box: number[];
  crop_url: string;
  marked_url: string;
}

/** What is being judged: one trajectory (usability, description), a pair (identity), a query's
 *  row against its pool (relation) or a query and a trajectory of another video (pair). The
 *  stage's part is filled, the others are null (absent in older answers). */
export interface Target {
  video: number;
  trajectory: number | null;
  trajectory_a: number | null;
  trajectory_b: number | null;
  description?: DescriptionTarget | null;
  relation_row?: RelationRowTarget | null;
  pair?: PairTarget | null;
}

/** A 1 | 0 | ⊥ relation label as the API stores it (⊥ is -1). */
export type RelationLabel = 1 | 0 | -1;

/** One attribute or event of a trajectory (models/facts.py `Fact`). Intervals are half-open
 *  `[start_frame, end_frame)`; `known: false` supports and contradicts nothing. */
export interface Fact {
  id: string;
  kind: "attribute" | "event";
  name: string;
  value: string;
  start_frame: number;
  end_frame: number;
  evidence_frames: number[];
  scope: "whole" | "interval";
  known: boolean;
}

/** A description's content (models/facts.py `Description`): what a correction sends in full. */
export interface DescriptionContent {
  appearance: string;
  motion: string;
  facts: Fact[];
}

export interface DescriptionTarget {
  description: number;
  version: number; // vote on exactly this version
  number: number;
  origin: string; // model, or consolidated for a second round
  content: DescriptionContent;
  content_sha256: string;
  inputs: Record<string, unknown>;
}

export interface Predicate {
  name: string;
  value: string;
  fact_ids: string[];
}

/** A model's suggestion for one (query, trajectory) pair; shown as a hint, it never decides. */
export interface ModelProposal {
  label: RelationLabel;
  predicates: unknown[];
  evidence: unknown[];
}

export interface RowCandidate {
  trajectory: number;
  prelabel: ModelProposal | null;
}

export interface RelationRowTarget {
  query: number;
  text: string;
  predicates: Predicate[];
  pool: number;
  review_round: number; // 1: label every candidate; 2: only the disputed ones
  rate_query: boolean; // the vote must rate the query (faithful, natural 1-5)
  candidates: RowCandidate[];
}

export interface PairTarget {
  pair: number;
  query: number;
  text: string;
  predicates: Predicate[];
  query_video: number;
  trajectory: number;
  trajectory_video: number;
  proposal: ModelProposal | null;
}

export interface OwnVote {
  id: number;
  label: string;
  reasons: string[];
  time_spent_ms: number | null;
  created_at: string;
  correction?: number | null; // the corrected version's id (description votes)
  payload?: Record<string, unknown>;
  judgments?: Record<string, RelationLabel>;
}

/** What a vote sends besides the label (the stage decides which parts it needs). */
export interface VoteInput {
  label: string;
  reasons?: string[];
  time_spent_ms: number;
  client_request_id: string;
  correction?: DescriptionContent;
  payload?: Record<string, unknown>;
  judgments?: Record<string, RelationLabel>;
}

/** An annotator's seat on a work item. */
export interface Assignment {
  item: number;
  stage: string;
  labels: string[];
  target: Target;
  lease_expires_at: string;
  my_vote: OwnVote | null;
}

export interface AdjudicationVote {
  id: number;
  annotator: string;
  label: string;
  reasons: string[];
  comment: string;
  is_adjudication: boolean;
  time_spent_ms: number | null;
  created_at: string;
  correction?: number | null;
  payload?: Record<string, unknown>;
}

export interface AdjudicationItem {
  item: number;
  stage: string;
  labels: string[];
  target: Target;
  votes: AdjudicationVote[];
}

export type JobStatus = "queued" | "running" | "succeeded" | "failed";

export interface Job {
  id: number;
  kind: string;
  status: JobStatus;
  progress: number;
  message: string;
  log_tail: string;
  error: string;
  queue: string;
  attempts: number;
  worker: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  updated_at: string;
}

export interface JobSummary {
  id: number;
  status: JobStatus;
  progress: number;
  message: string;
  queue: string;
  updated_at: string;
}

export interface ProposalRun {
  id: number;
  video: number;
  config: number;
  status: JobStatus;
  trajectory_count: number;
  duplicate_count: number;
  error: string;
  job: JobSummary | null;
  created_at: string;
  finished_at: string | null;
}

export interface Pool {
  id: number;
  video: number;
  version: number;
  run: number;
  supersedes: number | null;
  reason: string;
  n_members: number;
  content_sha256: string;
  frozen_at: string;
}

export interface MeanMedian {
  n: number;
  mean: number | null;
  median: number | null;
}

export interface RaterStats {
  n_votes: number;
  n_panel_votes: number;
  n_adjudication_votes: number;
  n_scored: number;
  agreement_with_majority: number | null;
  mean_time: number | null;
}

export interface Agreement {
  stage: string;
  split: string;
  n_items: number;
  n_votes: number;
  n_panel_votes: number;
  n_adjudication_votes: number;
  labels: string[];
  label_counts: Record<string, number>;
  vote_distributions: { panel: number; n_items: number; patterns: Record<string, number>; detail: Record<string, number> };
  raw_agreement: number | null;
  fleiss_kappa: number | null;
  fleiss_n_items: number;
  krippendorff_alpha: number | null;
  alpha_n_items: number;
  n_adjudicated_items: number;
  adjudication_rate: number | null;
  time_per_vote: MeanMedian | null;
  time_per_item: MeanMedian | null;
  per_rater: Record<string, RaterStats>;
}

/** /api/ui/queues/: the work waiting for the signed-in person, per task type. */
export interface QueueCount {
  stage: string;
  kind: "review" | "adjudication";
  available: number; // items this person can take now (capped: see `more`)
  more: boolean; // true when there are more than `available`
  in_progress: number | null; // the item this person holds a seat on and has not voted yet
  done: number; // votes this person has cast in this queue
}

export interface Queues {
  queues: QueueCount[];
}

/** /api/ui/progress/: pipeline progress per stage and split. */
export interface Progress {
  splits: string[];
  videos: Record<string, number>;
  proposal_runs: Record<string, Record<string, number>>;
  review: Record<string, Record<string, Record<string, number>>>;
  pools: Record<string, { videos: number; videos_with_pool: number; pools: number }>;
}

// -- descriptions, queries, relations, mining, snapshots ------------------------------------------
/** A describer (VLM) or query-writer (LLM) run over frozen pools. */
export interface ModelRun {
  id: number;
  pools: number[];
  backend: Record<string, unknown>;
  prompt_version: string;
  prompt_sha256: string;
  budget: Record<string, unknown>;
  stats: Record<string, number>;
  job: JobSummary | null;
  created_by: number | null;
  created_at: string;
}

export interface MiningRun {
  id: number;
  split: string;
  config: Record<string, unknown>;
  log: Record<string, unknown>;
  job: JobSummary | null;
  created_by: number | null;
  created_at: string;
}

export interface Completeness {
  split: string;
  queries: number;
  trajectories: number;
  needed: number;
  binary: number;
  missing: number;
  missing_by_kind: Record<string, number>; // within_video, cross_video
  complete: boolean;
  missing_pairs: [number, number][]; // [query, trajectory]
}

export interface SnapshotCounts {
  n_queries?: number;
  n_tracks?: number;
  n_videos?: number;
  n_relations?: number;
  zero_neg_row_rate?: number;
  zero_neg_col_rate?: number;
  label?: Record<string, number>;
  source?: Record<string, number>;
  stratum?: Record<string, number>;
}

export interface Snapshot {
  id: number;
  split: string;
  name: string;
  content_sha256: string;
  path: string;
  pool_versions: Record<string, number>;
  /** n_queries, n_tracks, n_videos, n_relations, zero-negative rates, and counts by label,
   *  source and stratum (models.snapshot.RelationSnapshotData.counts). */
  counts: SnapshotCounts;
  complete: boolean;
  sealed_at: string;
  created_by: number | null;
  created_at: string;
}

export interface Query {
  id: number;
  pool: number;
  video: number;
  target: number;
  source_version: number;
  run: number | null;
  text: string;
  predicates: Predicate[];
  revision: number;
  parent: number | null;
  status: string;
  rejection_reason: string;
  ratings?: Record<string, unknown>;   // absent for readers who are only auditors
  created_by: number | null;
  created_at: string;
}

export interface PoolMember {
  trajectory: number;
  role: string;
  group_representative: number | null;
  n_obs: number;
  n_removed: number;
  frames: number[];
  boxes: [number, number, number, number][];
}

export interface PoolDetail extends Pool {
  lineage: unknown;
  members: PoolMember[];
}

// -- training and evaluation ---------------------------------------------------------------------
export type RunStatus = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** Per-step columns of a training run: `step` and `attempt`, then whatever the trainer reported
 *  (loss and its parts, lr, label counts, zero-negative rates, seconds). */
export type StepSeries = { step: number[] } & Record<string, (number | null)[]>;

export interface TrainingRun {
  id: number;
  snapshot: number;
  eval_snapshot: number | null;
  model_kind: string;
  config: Record<string, unknown>;
  launch: Record<string, unknown>;
  status: RunStatus;
  progress: number;
  steps_total: number;
  steps_done: number;
  resumes: { attempt: number; from_step: number }[];
  cancel_requested: boolean;
  result: Record<string, unknown>;
  metrics: Record<string, unknown>;
  evaluation: number | null;
  error: string;
  out_dir: string;
  job: JobSummary | null;
  created_by: number | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  updated_at: string;
}

export interface TrainingRunDetail extends TrainingRun {
  series: StepSeries;
}

export interface EvaluationRun {
  id: number;
  kind: "trained" | "untrained" | "random";
  training_run: number | null;
  snapshot: number;
  model_kind: string;
  config: Record<string, unknown>;
  status: RunStatus;
  metrics: Record<string, unknown>;
  error: string;
  job: JobSummary | null;
  created_by: number | null;
  created_at: string;
  finished_at: string | null;
  updated_at: string;
}

// -- audits and releases -------------------------------------------------------------------------
export interface Audit {
  id: number;
  split: string;
  kinds: string[];
  n_random: number;
  n_difficult: number;
  seed: number;
  population: Record<string, { accepted: number; difficult: number; difficult_by_reason?: Record<string, number> }>;
  lease_seconds: number;
  n_samples: number;
  n_judged: number;
  created_by: number | null;
  created_at: string;
}

/** What an auditor checks: the record as accepted, nothing about how it was decided. */
export interface AuditTarget {
  sample: number;
  audit: number;
  kind: "relation" | "query" | "description";
  claim_expires_at: string;
  record: Record<string, unknown>;
  error_types: string[];
}

export interface AuditStratumStats {
  sampled: number;
  judged: number;
  errors: number;
  error_rate: number | null;
  ci95: [number, number];
  upper95: number;
  errors_by_type: Record<string, number>;
  by_reason: Record<string, { judged: number; errors: number }>;
  population?: number;
  estimated_residual_errors?: number | null;
}

export interface AuditStats {
  audit: number;
  split: string;
  seed: number;
  kinds: string[];
  samples: number;
  judged: number;
  by_kind: Record<string, Record<string, AuditStratumStats>>;
}

export interface Release {
  id: number;
  name: string;
  version: string;
  description: string;
  license: string;
  splits: string[];
  parent: number | null;
  parent_ref: Record<string, unknown>;
  origin: string;
  media_included: boolean;
  path: string;
  manifest_sha256: string;
  counts: Record<string, number>;
  changes: Record<string, unknown>;
  sealed_at: string;
  created_by: number | null;
  created_at: string;
}

export interface ReleaseDetail extends Release {
  config: Record<string, unknown>;
  stats: Record<string, unknown>;
  files: { path: string; sha256: string; size_bytes: number; rows: number | null }[];
}

export interface ReleaseDiff {
  old: Record<string, unknown>;
  new: Record<string, unknown>;
  tables: Record<string, { added: number; removed: number; changed: number }>;
  records: { table: string; key: unknown; change: string }[];
  total: number;
  truncated: boolean;
}
