// Jobs with live progress bars and their log tails (polled every two seconds while open).

import { useState } from "react";
import { api } from "../../api/endpoints";
import type { Job } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { count } from "../../components/plural";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { RunControls } from "./RunControls";

export const POLL_MS = 2000;

function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "–";
}

/** 1 → "1st", 2 → "2nd", 11 → "11th", 23 → "23rd". */
export function ordinal(n: number): string {
  const teen = n % 100 >= 11 && n % 100 <= 13;
  const suffix = teen ? "th" : ({ 1: "st", 2: "nd", 3: "rd" } as Record<number, string>)[n % 10] ?? "th";
  return `${n}${suffix}`;
}

/** Where a job stands in words: its place in its queue while it waits. */
export function queueText(job: Pick<Job, "status" | "queue" | "queue_position">): string {
  const queue = job.queue || "–";
  if (job.status !== "queued" || job.queue_position === null) return `queue ${queue}`;
  return job.queue_position === 1 ? `next on queue ${queue}` : `${ordinal(job.queue_position)} on queue ${queue}`;
}

function JobRow({ job, onChanged }: { job: Job; onChanged: () => void }) {
  // what a cancel or a retry from this row did: kept here, as a retry moves the run to a new job
  // and its controls leave this row at the next refresh
  const [said, setSaid] = useState<string | null>(null);
  return (
    <li className={`job job-${job.status}`}>
      <div className="job-head">
        <strong>#{job.id} {job.kind}</strong>
        <StatusBadge status={job.status} runStatus={job.cancelled ? "cancelled" : job.run?.status} />
        <span className="muted small">{queueText(job)} · started {when(job.started_at)} · updated {when(job.updated_at)}</span>
        {job.run && (
          <RunControls jobId={job.id} status={job.run.status} cancelRequested={job.run.cancel_requested}
            label={`${job.run.kind.replace(/run$/, " run")} ${job.run.id}`} onDone={onChanged} onSaid={setSaid} />
        )}
        {!said && job.retried_as != null && (
          <span className="small">queued again as job {job.retried_as}</span>
        )}
        {said && <span role="status" className="ok small">{said}</span>}
      </div>
      <ProgressBar value={job.progress} label={`Job ${job.id} progress`} />
      <p className="job-message">{job.message || "–"}</p>
      {job.error && <p className="error-inline" role="alert">{job.error}</p>}
      {job.log_tail && (
        <details>
          <summary>Log</summary>
          <pre className="log">{job.log_tail}</pre>
        </details>
      )}
    </li>
  );
}

export function JobsScreen() {
  const jobs = useAsync(() => api.jobs(50), [], POLL_MS);
  useShortcutList([{ id: "manager.refresh", handler: jobs.reload }]);
  if (jobs.error && !jobs.data) return <ErrorState error={jobs.error} onRetry={jobs.reload} />;
  if (!jobs.data) return <Loading what="jobs" />;
  if (jobs.data.results.length === 0) {
    return <EmptyState title="No jobs yet"><p>Proposal runs, imports and training runs show here while they work.</p></EmptyState>;
  }
  return (
    <>
      {jobs.error !== undefined && <p className="error-inline" role="alert">Refreshing failed; showing the last list.</p>}
      <p className="muted">{count(jobs.data.count, "job")} · newest first · refreshes every {POLL_MS / 1000} s</p>
      <ul className="jobs">{jobs.data.results.map((j) => <JobRow key={j.id} job={j} onChanged={jobs.reload} />)}</ul>
    </>
  );
}
