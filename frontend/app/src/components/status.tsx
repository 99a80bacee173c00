// A job's or a run's status as a badge. A cancelled run's job ends "failed" in the jobs table
// (common.models.Job has no cancelled state; its `cancelled` flag says why): the badge says what
// happened to the run.

/** The badge's words and class for `status`, read through the run's status when there is one. */
export function statusBadge(status: string, runStatus?: string | null): { text: string; className: string } {
  const text = runStatus === "cancelled" ? "cancelled" : status;
  return { text, className: `badge status-${text}` };
}

export function StatusBadge({ status, runStatus }: { status: string; runStatus?: string | null }) {
  const { text, className } = statusBadge(status, runStatus);
  return <span className={className}>{text}</span>;
}
