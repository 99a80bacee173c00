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

/** What is being judged: one trajectory (usability) or a pair (identity). */
export interface Target {
  video: number;
  trajectory: number | null;
  trajectory_a: number | null;
  trajectory_b: number | null;
}

export interface OwnVote {
  id: number;
  label: string;
  reasons: string[];
  time_spent_ms: number | null;
  created_at: string;
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
