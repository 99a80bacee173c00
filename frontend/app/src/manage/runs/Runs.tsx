// Proposal runs: their jobs' progress, opening review, and freezing the candidate pool once
// review is done (a refused freeze shows why: open items, a conflict sent to adjudication, or
// an existing pool that a new version may replace only with a reason).

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { Pool, ProposalRun, Video } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";

interface RunsData {
  runs: ProposalRun[];
  videos: Map<number, Video>;
  pools: Map<number, Pool>; // by run
}

async function loadRuns(): Promise<RunsData> {
  const [runs, videos, pools] = await Promise.all([api.runs(200), api.videos(500), api.pools(500)]);
  return {
    runs: runs.results,
    videos: new Map(videos.results.map((v) => [v.id, v])),
    pools: new Map(pools.results.map((p) => [p.run, p])),
  };
}

function RunActions({ run, pool, onDone }: { run: ProposalRun; pool?: Pool; onDone: () => void }) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [reason, setReason] = useState("");
  const needsReason = error instanceof ApiError && error.code === "pool_exists";
  const act = async (what: () => Promise<string>) => {
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(await what());
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  if (run.status !== "succeeded") return <span className="muted">{run.status === "failed" ? run.error || "failed" : "waiting for the run"}</span>;
  return (
    <div className="run-actions">
      <button type="button" disabled={busy} onClick={() => void act(async () => {
        const c = await api.openReview(run.id);
        return `Review open: ${c?.usability ?? 0} usability and ${c?.identity ?? 0} duplicate items.`;
      })}>Open review</button>
      {pool ? (
        <span className="badge status-succeeded">pool v{pool.version} frozen · {pool.n_members} members</span>
      ) : (
        <button type="button" className="primary" disabled={busy} onClick={() => void act(async () => {
          const p = await api.freezePool(run.id, reason);
          return `Frozen: pool v${p?.version} of video ${p?.video} with ${p?.n_members} members.`;
        })}>Freeze pool of run {run.id}</button>
      )}
      {needsReason && (
        <form className="inline-form" onSubmit={(e) => { e.preventDefault(); void act(async () => {
          const p = await api.freezePool(run.id, reason);
          return `Frozen: pool v${p?.version} replaces the previous version.`;
        }); }}>
          <label>
            Tracking defect this version fixes
            <input type="text" value={reason} onChange={(e) => setReason(e.target.value)} required />
          </label>
          <button type="submit" disabled={busy || !reason.trim()}>Freeze new version</button>
        </form>
      )}
      {result && <p role="status" className="ok">{result}</p>}
      {error !== null && <ErrorState error={error} title={`Run ${run.id} was not frozen`} />}
    </div>
  );
}

export function RunsScreen() {
  const data = useAsync(loadRuns, [], 5000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="proposal runs" />;
  const { runs, videos, pools } = data.data;
  if (runs.length === 0) {
    return <EmptyState title="No proposal runs yet"><p>Start one with <code>manage.py propose --queue</code> or <code>POST /api/proposal-runs/</code>.</p></EmptyState>;
  }
  return (
    <table className="data runs">
      <caption>Proposal runs ({runs.length}), refreshed every 5 s</caption>
      <thead>
        <tr><th scope="col">run</th><th scope="col">video</th><th scope="col">status</th><th scope="col">progress</th><th scope="col">trajectories</th><th scope="col">duplicate pairs</th><th scope="col">review and pool</th></tr>
      </thead>
      <tbody>
        {runs.map((r) => {
          const v = videos.get(r.video);
          return (
            <tr key={r.id}>
              <td>{r.id}</td>
              <td>{v ? `${v.name} (${v.split || "no split"})` : r.video}</td>
              <td><span className={`badge status-${r.status}`}>{r.status}</span></td>
              <td>{r.job ? <><ProgressBar value={r.job.progress} label={`Run ${r.id} progress`} /><span className="small muted">{r.job.message}</span></> : "–"}</td>
              <td>{r.trajectory_count}</td>
              <td>{r.duplicate_count}</td>
              <td><RunActions run={r} pool={pools.get(r.id)} onDone={data.reload} /></td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
