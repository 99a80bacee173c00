// Typed calls of the REST endpoints the screens use.

import { get, request } from "./client";
import type {
  AdjudicationItem,
  AdjudicationVote,
  Agreement,
  Assignment,
  Audit,
  AuditJudgment,
  AuditStats,
  AuditTarget,
  Completeness,
  Crop,
  EvaluationRun,
  Experiment,
  ExperimentDetail,
  ExperimentPreset,
  FoundItem,
  FoundItemOverview,
  Job,
  JobRun,
  Me,
  MiningRun,
  ModelRun,
  OwnVote,
  Page,
  Pool,
  PoolDetail,
  Progress,
  ProposalRun,
  Query,
  RelationRecord,
  Queues,
  RunReadiness,
  Release,
  ReleaseDetail,
  ReleaseDiff,
  ReleasePreflight,
  ReleaseVerify,
  SeatEvent,
  SeatItem,
  SkipAnswer,
  Snapshot,
  StageDeclaration,
  TrainingRun,
  TrainingRunDetail,
  TrajectoryDetail,
  TrajectorySummary,
  Video,
  VoteAnswer,
  VoteInput,
} from "./types";

const q = (params: Record<string, string | number | undefined>) => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") s.set(k, String(v));
  const text = s.toString();
  return text ? `?${text}` : "";
};

export const api = {
  me: () => get<Me>("/api/me/"),
  queues: () => get<Queues>("/api/ui/queues/"),
  progress: () => get<Progress>("/api/ui/progress/"),

  // review
  reviewStages: () => get<StageDeclaration[]>("/api/review/stages/"),
  /** Claim the next item; `prefer`: the token of the upcoming item fetched ahead (claimed first
   *  while it is still yours to take). */
  claimNext: (stage: string, prefer?: string) => request<Assignment>("/api/review/next/", { method: "POST", body: { stage, prefer } }),
  item: (id: number, signal?: AbortSignal) => get<Assignment>(`/api/review/items/${id}/`, signal),
  vote: (id: number, body: VoteInput) => request<OwnVote>(`/api/review/items/${id}/votes/`, { method: "POST", body }),
  /** Vote and claim the next item of the same stage in one request. */
  voteAndNext: (id: number, body: VoteInput) =>
    request<VoteAnswer>(`/api/review/items/${id}/votes/`, { method: "POST", body: { ...body, next: true }, keepPageWhenSignedOut: true }),
  skip: (id: number, reason: string, prefer?: string) =>
    request<SkipAnswer>(`/api/review/items/${id}/skip/`, { method: "POST", body: { reason, prefer }, keepPageWhenSignedOut: true }),
  seats: (filters: { stage?: string; state?: string; item?: number; run?: number; holder?: string; limit?: number; offset?: number }) =>
    get<Page<SeatItem>>(`/api/review/seats/${q(filters)}`),
  seatRelease: (item: number, seat: number, reason: string) =>
    request<SeatEvent>(`/api/review/items/${item}/seats/${seat}/release/`, { method: "POST", body: { reason } }),
  seatReassign: (item: number, seat: number, to: string, reason: string) =>
    request<SeatEvent>(`/api/review/items/${item}/seats/${seat}/reassign/`, { method: "POST", body: { to, reason } }),

  // adjudication
  adjudicationQueue: () => get<AdjudicationItem[]>("/api/adjudication/"),
  adjudicationItem: (id: number, signal?: AbortSignal) => get<AdjudicationItem>(`/api/adjudication/${id}/`, signal),
  adjudicate: (id: number, body: { label: string; reason: string; client_request_id: string; judgments?: Record<string, number> }) =>
    request<AdjudicationVote>(`/api/adjudication/${id}/`, { method: "POST", body }),

  // media and trajectories
  video: (id: number, signal?: AbortSignal) => get<Video>(`/api/videos/${id}/`, signal),
  trajectories: (video: number, limit = 500) => get<Page<TrajectorySummary>>(`/api/trajectories/${q({ video, limit })}`),
  trajectory: (id: number, signal?: AbortSignal) => get<TrajectoryDetail>(`/api/trajectories/${id}/`, signal),
  crops: (id: number, n: number, signal?: AbortSignal) => get<Crop[]>(`/api/trajectories/${id}/crops/?n=${n}`, signal),
  frameUrl: (video: number, frame: number, maxSize?: number) =>
    `/api/videos/${video}/frames/${frame}.jpg${q({ max_size: maxSize })}`,

  // manager
  agreement: (stage: string, split?: string) => get<Agreement>(`/api/review/agreement/${q({ stage, split })}`),
  jobs: (limit = 50) => get<Page<Job>>(`/api/jobs/${q({ limit })}`),
  job: (id: number) => get<Job>(`/api/jobs/${id}/`),
  cancelJob: (id: number) => request<JobRun>(`/api/jobs/${id}/cancel/`, { method: "POST" }),
  retryJob: (id: number) => request<JobRun>(`/api/jobs/${id}/retry/`, { method: "POST" }),
  runs: (limit = 100, offset = 0) => get<Page<ProposalRun>>(`/api/proposal-runs/${q({ limit, offset })}`),
  /** Each proposal run's review readiness, in the runs list's order (the same pages). */
  runReadiness: (limit = 100, offset = 0) => get<Page<RunReadiness>>(`/api/review/run-readiness/${q({ limit, offset })}`),
  openReview: (run: number) =>
    request<{ usability: number; identity: number }>("/api/review/items/", { method: "POST", body: { run } }),
  pools: (limit = 100) => get<Page<Pool>>(`/api/pools/${q({ limit })}`),
  freezePool: (run: number, reason: string) => request<Pool>("/api/pools/", { method: "POST", body: { run, reason } }),
  videos: (limit = 500) => get<Page<Video>>(`/api/videos/${q({ limit })}`),
  pool: (id: number, signal?: AbortSignal) => get<PoolDetail>(`/api/pools/${id}/`, signal),
  query: (id: number, signal?: AbortSignal) => get<Query>(`/api/queries/${id}/`, signal),

  // describer, query-writer and mining runs
  descriptionRuns: (limit = 50) => get<Page<ModelRun>>(`/api/description-runs/${q({ limit })}`),
  startDescriptionRun: (body: { pools: number[]; backend?: Record<string, unknown> }) =>
    request<ModelRun>("/api/description-runs/", { method: "POST", body }),
  generationRuns: (limit = 50) => get<Page<ModelRun>>(`/api/generation-runs/${q({ limit })}`),
  startGenerationRun: (body: { pools: number[]; backend?: Record<string, unknown> }) =>
    request<ModelRun>("/api/generation-runs/", { method: "POST", body }),
  miningRuns: (limit = 50) => get<Page<MiningRun>>(`/api/mining-runs/${q({ limit })}`),
  startMiningRun: (body: { split: string }) => request<MiningRun>("/api/mining-runs/", { method: "POST", body }),

  // completeness and snapshots
  completeness: (split: string, limit = 50, signal?: AbortSignal) =>
    get<Completeness>(`/api/completeness/${q({ split, limit })}`, signal),
  queueCompletion: (split: string) =>
    request<{ split: string; queued: number }>("/api/completeness/queue/", { method: "POST", body: { split } }),
  snapshots: (limit = 100) => get<Page<Snapshot>>(`/api/snapshots/${q({ limit })}`),
  takeSnapshot: (body: { split: string; name?: string; allow_incomplete?: boolean }) =>
    request<Snapshot>("/api/snapshots/", { method: "POST", body }),

  // training and evaluation
  trainingRuns: (limit = 100) => get<Page<TrainingRun>>(`/api/training-runs/${q({ limit })}`),
  trainingRun: (id: number, after = 0, signal?: AbortSignal) =>
    get<TrainingRunDetail>(`/api/training-runs/${id}/${q({ after: after || undefined })}`, signal),
  startTraining: (body: { snapshot: number; eval_snapshot?: number; model_kind: string; config: Record<string, unknown>;
    allow_train_split?: boolean; allow_incomplete?: boolean }) =>
    request<TrainingRun>("/api/training-runs/", { method: "POST", body }),
  cancelTraining: (id: number) => request<TrainingRun>(`/api/training-runs/${id}/cancel/`, { method: "POST" }),
  evaluationRuns: (params: { training_run?: number; snapshot?: number; limit?: number } = {}) =>
    get<Page<EvaluationRun>>(`/api/evaluation-runs/${q({ limit: 100, ...params })}`),

  // experiments: a grid of training runs (variants × seeds) and its table
  experiments: (limit = 100) => get<Page<Experiment>>(`/api/experiments/${q({ limit })}`),
  experiment: (id: number, signal?: AbortSignal) => get<ExperimentDetail>(`/api/experiments/${id}/`, signal),
  experimentPresets: () => get<{ presets: ExperimentPreset[] }>("/api/experiments/presets/"),
  createExperiment: (body: { snapshot: number; eval_snapshot: number; grid: Record<string, unknown>; name?: string;
    allow_train_split?: boolean; allow_incomplete?: boolean }) =>
    request<ExperimentDetail>("/api/experiments/", { method: "POST", body }),
  resumeExperiment: (id: number) => request<ExperimentDetail>(`/api/experiments/${id}/resume/`, { method: "POST" }),
  cancelExperiment: (id: number) => request<ExperimentDetail>(`/api/experiments/${id}/cancel/`, { method: "POST" }),
  experimentCsvUrl: (id: number) => `/api/experiments/${id}/table.csv`,

  // audits
  audits: (limit = 100) => get<Page<Audit>>(`/api/audits/${q({ limit })}`),
  audit: (id: number, signal?: AbortSignal) => get<Audit>(`/api/audits/${id}/`, signal),
  startAudit: (body: { split: string; n_random: number; n_difficult: number; seed: number }) =>
    request<Audit>("/api/audits/", { method: "POST", body }),
  auditNext: (id: number) => request<AuditTarget>(`/api/audits/${id}/next/`, { method: "POST" }),
  auditJudge: (id: number, body: { sample: number; verdict: string; error_type?: string; note?: string; time_spent_ms?: number }) =>
    request<AuditJudgment>(`/api/audits/${id}/judgments/`, { method: "POST", body }),
  auditStats: (id: number, signal?: AbortSignal) => get<AuditStats>(`/api/audits/${id}/stats/`, signal),

  // search (managers)
  findItems: (params: Record<string, string | number | undefined>, signal?: AbortSignal) =>
    get<Page<FoundItem>>(`/api/review/items/search/${q({ limit: 100, ...params })}`, signal),
  itemOverview: (id: number, signal?: AbortSignal) => get<FoundItemOverview>(`/api/review/items/${id}/overview/`, signal),
  findQueries: (params: Record<string, string | number | undefined>, signal?: AbortSignal) =>
    get<Page<Query>>(`/api/queries/${q({ limit: 100, ...params })}`, signal),
  findRelations: (params: Record<string, string | number | undefined>, signal?: AbortSignal) =>
    get<Page<RelationRecord>>(`/api/relations/${q({ limit: 100, ...params })}`, signal),

  // releases
  releases: (limit = 100) => get<Page<Release>>(`/api/releases/${q({ limit })}`),
  release: (id: number, signal?: AbortSignal) => get<ReleaseDetail>(`/api/releases/${id}/`, signal),
  createRelease: (body: { name: string; version: string; splits: string[]; description?: string; publish_anyway?: boolean }) =>
    request<Release>("/api/releases/", { method: "POST", body }),
  releasePreflight: (splits: string[], name: string, signal?: AbortSignal) =>
    get<ReleasePreflight>(`/api/releases/preflight/?${[...splits.map((s) => `splits=${encodeURIComponent(s)}`), `name=${encodeURIComponent(name)}`].join("&")}`, signal),
  verifyRelease: (id: number) => get<ReleaseVerify>(`/api/releases/${id}/verify/`),
  releaseDownloadUrl: (id: number) => `/api/releases/${id}/download/`,
  releaseChecksumsUrl: (id: number) => `/api/releases/${id}/SHA256SUMS`,
  releaseDiff: (id: number, other: number, limit = 200, signal?: AbortSignal) =>
    get<ReleaseDiff>(`/api/releases/${id}/diff/${other}/${q({ limit })}`, signal),
};

/** A random UUID v4 for safe retries of a submission (`client_request_id`). Built from
 *  getRandomValues, which, unlike randomUUID, also exists on plain-HTTP deployments. */
export function requestId(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
