// Cancel and retry for the run behind a job, whatever its kind (proposal, describer, writer,
// mining, training, evaluation): the same two endpoints, POST /api/jobs/{id}/cancel/ and /retry/.
// A queued or running run can be cancelled (a running one stops at its next progress report); a
// failed or cancelled one can be queued again on a fresh job. What the action did is said in a status
// line here, or handed to `onSaid` where the caller outlives these controls (a job's row keeps its
// confirmation after a retry moves the run to a new job and the controls leave the row).

import { useState } from "react";
import { api } from "../../api/endpoints";
import { ErrorState } from "../../components/states";

export type RunState = "queued" | "running" | "succeeded" | "failed" | "cancelled";

/** Which action a run in `status` offers: cancel while it waits or works, retry once it ended badly. */
export function runAction(status: string, cancelRequested = false): "cancel" | "retry" | null {
  if ((status === "queued" || status === "running") && !cancelRequested) return "cancel";
  if (status === "failed" || status === "cancelled") return "retry";
  return null;
}

export function RunControls({ jobId, status, cancelRequested = false, label, onDone, onSaid }: {
  jobId: number;
  status: string; // the run's status
  cancelRequested?: boolean;
  label: string; // what the run is called, e.g. "training run 4"
  onDone: () => void;
  onSaid?: (said: string) => void; // says what the action did instead of this component's status line
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const action = runAction(status, cancelRequested);
  const act = async (which: "cancel" | "retry") => {
    setBusy(true);
    setError(null);
    try {
      const run = which === "cancel" ? await api.cancelJob(jobId) : await api.retryJob(jobId);
      const said = which === "cancel"
        ? (run?.status === "cancelled" ? `${label} cancelled.` : `${label} will stop at its next progress report.`)
        : `${label} queued again as job ${run?.job?.id ?? "–"}.`;
      if (onSaid) onSaid(said);
      else setDone(said);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <span className="run-controls">
      {cancelRequested && status === "running" && <span className="muted small">stopping…</span>}
      {action === "cancel" && (
        <button type="button" disabled={busy} onClick={() => void act("cancel")}
          title={status === "queued" ? `Cancel ${label} before it starts` : `Stop ${label} at its next progress report`}>
          Cancel
        </button>
      )}
      {action === "retry" && (
        <button type="button" disabled={busy} onClick={() => void act("retry")} title={`Queue ${label} again on a new job`}>
          Retry
        </button>
      )}
      {done && <span role="status" className="ok small">{done}</span>}
      {error !== null && <ErrorState error={error} title={`${label} was not ${action === "retry" ? "queued again" : "cancelled"}`} />}
    </span>
  );
}
