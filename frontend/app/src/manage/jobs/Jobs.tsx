// Jobs with live progress bars and their log tails (polled every two seconds while open).

import { api } from "../../api/endpoints";
import type { Job } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";

export const POLL_MS = 2000;

function when(iso: string | null): string {
  return iso ? new Date(iso).toLocaleString() : "–";
}

function JobRow({ job }: { job: Job }) {
  return (
    <li className={`job job-${job.status}`}>
      <div className="job-head">
        <strong>#{job.id} {job.kind}</strong>
        <span className={`badge status-${job.status}`}>{job.status}</span>
        <span className="muted small">queue {job.queue || "–"} · started {when(job.started_at)} · updated {when(job.updated_at)}</span>
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
      <p className="muted">{jobs.data.count} job{jobs.data.count === 1 ? "" : "s"} · newest first · refreshes every {POLL_MS / 1000} s</p>
      <ul className="jobs">{jobs.data.results.map((j) => <JobRow key={j.id} job={j} />)}</ul>
    </>
  );
}
