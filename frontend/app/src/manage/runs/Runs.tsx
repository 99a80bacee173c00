// Proposal runs: starting one (a tracker on a video) or importing tracks, their jobs' progress,
// opening review, and freezing the candidate pool once review is done (a refused freeze shows
// why: open items, a conflict sent to adjudication, or an existing pool that a new version may
// replace only with a reason).

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { Pool, ProposalRun, RunReadiness, Video } from "../../api/types";
import { ProgressBar, StackedBar } from "../../components/charts";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { count } from "../../components/plural";
import { RunControls } from "../jobs/RunControls";
import { OpenItemLinks } from "../seats/Seats";
import { ImportTracksForm } from "./ImportTracks";
import { ProposalRunForm } from "./ProposalRunForm";
import { readiness } from "./readiness";

interface RunsData {
  runs: ProposalRun[];
  videos: Map<number, Video>;
  pools: Map<number, Pool>; // by run
  review: Map<number, RunReadiness>; // by run
}

async function loadRuns(): Promise<RunsData> {
  const [runs, videos, pools, review] = await Promise.all([api.runs(200), api.videos(500), api.pools(500), api.runReadiness(200)]);
  return {
    runs: runs.results,
    videos: new Map(videos.results.map((v) => [v.id, v])),
    pools: new Map(pools.results.map((p) => [p.run, p])),
    review: new Map(review.results.map((r) => [r.run, r])),
  };
}

/** The review readiness cell: decided / open / in adjudication, or ready to freeze. */
function Readiness({ run, review, frozen }: { run: ProposalRun; review?: RunReadiness; frozen: boolean }) {
  if (run.status !== "succeeded") return <span className="muted">–</span>;
  const { state, text } = readiness(review, frozen);
  return (
    <span className={`readiness readiness-${state}`}>
      {review && review.items > 0 && (
        <StackedBar label={`Run ${run.id} review`} parts={[
          { name: "decided", value: review.decided + review.unresolved, className: "part-done" },
          { name: "in adjudication", value: review.adjudicate, className: "part-active" },
          { name: "open", value: review.open, className: "part-open" },
        ]} />
      )}
      <span className={state === "ready" ? "badge status-succeeded" : "small"}>{text}</span>
    </span>
  );
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
  if (run.status !== "succeeded") {
    return (
      <span>
        <span className="muted">{run.status === "failed" ? run.error || "failed" : run.status === "cancelled" ? "cancelled" : "waiting for the run"}</span>{" "}
        {run.job && <RunControls jobId={run.job.id} status={run.status} label={`proposal run ${run.id}`} onDone={onDone} />}
      </span>
    );
  }
  return (
    <div className="run-actions">
      <button type="button" disabled={busy} title={`Create the usability and duplicate review items of run ${run.id}`} onClick={() => void act(async () => {
        const c = await api.openReview(run.id);
        return `Review open: ${c?.usability ?? 0} usability and ${c?.identity ?? 0} duplicate items.`;
      })}>Open review</button>
      {pool ? (
        <span className="badge status-succeeded">pool v{pool.version} frozen · {count(pool.n_members, "member")}</span>
      ) : (
        <button type="button" className="primary" disabled={busy} title="Freeze the retained, consolidated trajectories as the video's candidate pool (immutable)" onClick={() => void act(async () => {
          const p = await api.freezePool(run.id, reason);
          return `Frozen: pool v${p?.version} of video ${p?.video} with ${count(p?.n_members ?? 0, "member")}.`;
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
      {error !== null && <ErrorState error={error} title={`Run ${run.id} was not frozen`} details={!openItemsOf(error)} />}
      {openItemsOf(error) && <OpenItemLinks run={run.id} items={openItemsOf(error)!} />}
    </div>
  );
}

/** The open items a refused freeze names (`review_unfinished`), for links to the seat board. */
function openItemsOf(error: unknown): { id: number; stage: string; state: string }[] | null {
  if (!(error instanceof ApiError) || error.code !== "review_unfinished" || !Array.isArray(error.extra.open_items)) return null;
  return error.extra.open_items as { id: number; stage: string; state: string }[];
}

export function RunsScreen() {
  const data = useAsync(loadRuns, [], 5000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="proposal runs" />;
  const { runs, videos, pools, review } = data.data;
  const importForm = (
    <>
      <ProposalRunForm videos={[...videos.values()]} onDone={data.reload} />
      <ImportTracksForm videos={[...videos.values()]} onDone={data.reload} />
    </>
  );
  if (runs.length === 0) {
    return (
      <>
        {importForm}
        <EmptyState title="No proposal runs yet"><p>Queue one above (or with <code>manage.py propose --queue</code> or <code>POST /api/proposal-runs/</code>), or import existing tracks.</p></EmptyState>
      </>
    );
  }
  return (
    <>
    {importForm}
    <table className="data runs">
      <caption>Proposal runs ({runs.length}), refreshed every 5 s</caption>
      <thead>
        <tr><th scope="col">run</th><th scope="col">video</th><th scope="col">status</th><th scope="col">progress</th><th scope="col">trajectories</th><th scope="col">duplicate pairs</th><th scope="col">review readiness</th><th scope="col">review and pool</th></tr>
      </thead>
      <tbody>
        {runs.map((r) => {
          const v = videos.get(r.video);
          return (
            <tr key={r.id}>
              <td>{r.id}</td>
              <td>{v ? `${v.name} (${v.split || "no split"})` : r.video}</td>
              <td><StatusBadge status={r.status} />{r.kind === "imported" && <span className="badge">imported</span>}</td>
              <td>{r.job ? <><ProgressBar value={r.job.progress} label={`Run ${r.id} progress`} /><span className="small muted">{r.job.message}</span></> : "–"}</td>
              <td>{r.trajectory_count}</td>
              <td>{r.duplicate_count}</td>
              <td><Readiness run={r} review={review.get(r.id)} frozen={pools.has(r.id)} /></td>
              <td><RunActions run={r} pool={pools.get(r.id)} onDone={data.reload} /></td>
            </tr>
          );
        })}
      </tbody>
    </table>
    </>
  );
}
