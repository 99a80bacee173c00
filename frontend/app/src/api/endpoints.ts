// Typed calls of the REST endpoints the screens use.

import { get, request } from "./client";
import type {
  AdjudicationItem,
  AdjudicationVote,
  Agreement,
  Assignment,
  Crop,
  Job,
  Me,
  OwnVote,
  Page,
  Pool,
  Progress,
  ProposalRun,
  Queues,
  TrajectoryDetail,
  TrajectorySummary,
  Video,
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
  claimNext: (stage: string) => request<Assignment>("/api/review/next/", { method: "POST", body: { stage } }),
  item: (id: number, signal?: AbortSignal) => get<Assignment>(`/api/review/items/${id}/`, signal),
  vote: (id: number, body: { label: string; reasons: string[]; time_spent_ms: number; client_request_id: string }) =>
    request<OwnVote>(`/api/review/items/${id}/votes/`, { method: "POST", body }),

  // adjudication
  adjudicationQueue: () => get<AdjudicationItem[]>("/api/adjudication/"),
  adjudicationItem: (id: number, signal?: AbortSignal) => get<AdjudicationItem>(`/api/adjudication/${id}/`, signal),
  adjudicate: (id: number, body: { label: string; reason: string; client_request_id: string }) =>
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
  runs: (limit = 100, offset = 0) => get<Page<ProposalRun>>(`/api/proposal-runs/${q({ limit, offset })}`),
  openReview: (run: number) =>
    request<{ usability: number; identity: number }>("/api/review/items/", { method: "POST", body: { run } }),
  pools: (limit = 100) => get<Page<Pool>>(`/api/pools/${q({ limit })}`),
  freezePool: (run: number, reason: string) => request<Pool>("/api/pools/", { method: "POST", body: { run, reason } }),
  videos: (limit = 500) => get<Page<Video>>(`/api/videos/${q({ limit })}`),
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
