// Relation snapshots and completeness per split (DESIGN 2.9, 2.10). Each split shows what its
// Traj2T and OCVR galleries need (every admitted query against every benchmark trajectory) and
// how much of it is binary; a manager takes a snapshot of a split from here. A dev or test split
// that misses relations is refused by the server, and the refusal shows the completeness report
// it sent: how many relations are missing, of which kind, and which (query, trajectory) pairs.
// Missing cross-video pairs can be sent to pair review from the same place.

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { Completeness, Snapshot } from "../../api/types";
import { StackedBar } from "../../components/charts";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { SPLITS } from "../splits";
import { count } from "../../components/plural";

function MissingPairs({ report }: { report: Completeness }) {
  if (report.missing_pairs.length === 0) return null;
  return (
    <details open={report.missing_pairs.length <= 12}>
      <summary>{count(report.missing, "missing relation")}{report.missing_pairs.length < report.missing ? ` (first ${report.missing_pairs.length} listed)` : ""}</summary>
      <table className="data compact">
        <caption className="sr-only">Missing (query, trajectory) pairs of the {report.split} split</caption>
        <thead><tr><th scope="col">query</th><th scope="col">trajectory</th></tr></thead>
        <tbody>
          {report.missing_pairs.map(([q, t]) => <tr key={`${q}:${t}`}><td>{q}</td><td>{t}</td></tr>)}
        </tbody>
      </table>
    </details>
  );
}

/** The completeness report of a split as numbers, a bar and (when something is missing) the list. */
export function CompletenessReport({ report }: { report: Completeness }) {
  const kinds = report.missing_by_kind ?? {};
  return (
    <div className="completeness">
      <StackedBar label={`Relations the ${report.split} galleries need`} parts={[
        { name: "binary", value: report.binary, className: "part-done" },
        { name: "missing", value: report.missing, className: "part-bad" },
      ]} />
      <p className="small">
        {count(report.queries, "admitted query", "admitted queries")} × {count(report.trajectories, "trajectory")} ={" "}
        {report.needed} needed · <strong>{report.binary} binary</strong> · <strong>{report.missing} missing</strong>
        {report.missing > 0 && <> ({kinds.within_video ?? 0} within videos, {kinds.cross_video ?? 0} across videos)</>}
      </p>
      <MissingPairs report={report} />
    </div>
  );
}

function completenessOf(error: unknown): Completeness | null {
  if (!(error instanceof ApiError) || error.code !== "incomplete_split") return null;
  const report = error.extra.completeness;
  return report && typeof report === "object" ? (report as Completeness) : null;
}

function SplitCard({ split, report, onChanged }: { split: string; report: Completeness; onChanged: () => void }) {
  const [name, setName] = useState("");
  const [allowIncomplete, setAllowIncomplete] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const strict = split !== "train";
  const act = async (what: () => Promise<string>) => {
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      setDone(await what());
      onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const take = () => act(async () => {
    const snap = await api.takeSnapshot({ split, name: name.trim(), allow_incomplete: strict && allowIncomplete });
    return `Snapshot #${snap?.id} of ${split} taken: ${typeof snap?.counts.n_relations === "number" ? count(snap.counts.n_relations, "relation") : "? relations"}, sha256 ${snap?.content_sha256.slice(0, 12)}${snap?.complete ? "" : " (marked incomplete)"}.`;
  });
  const queue = () => act(async () => {
    const r = await api.queueCompletion(split);
    return `${r?.queued ?? 0} cross-video pairs of ${split} sent to pair review.`;
  });
  const refused = completenessOf(error);
  return (
    <section className={`split-card${report.complete ? " complete" : ""}`} aria-labelledby={`split-${split}`}>
      <h2 id={`split-${split}`}>
        {split} <span className={`badge ${report.complete ? "status-succeeded" : report.queries ? "status-running" : "status-queued"}`}>
          {report.complete ? "complete" : report.queries ? "incomplete" : "no admitted queries"}
        </span>
      </h2>
      <CompletenessReport report={report} />
      <form className="inline-form" onSubmit={(e) => { e.preventDefault(); void take(); }}>
        <label>
          Name (optional)
          <input type="text" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} />
        </label>
        {strict && (
          <label className="check">
            <input type="checkbox" checked={allowIncomplete} onChange={(e) => setAllowIncomplete(e.target.checked)} />
            take it incomplete (marked so)
          </label>
        )}
        <button type="submit" className="primary" disabled={busy}>Take a snapshot of {split}</button>
        {strict && (report.missing_by_kind?.cross_video ?? 0) > 0 && (
          <button type="button" disabled={busy} onClick={() => void queue()}>Send missing cross-video pairs to review</button>
        )}
      </form>
      {done && <p role="status" className="ok">{done}</p>}
      {error !== null && (
        <ErrorState error={error} title={refused ? `The ${split} snapshot was refused` : `Nothing was done for ${split}`} details={!refused} />
      )}
      {refused && (
        <div className="refusal" role="region" aria-label={`What the ${split} split misses`}>
          <h3>What the {split} split misses</h3>
          <CompletenessReport report={refused} />
        </div>
      )}
    </section>
  );
}

function SnapshotTable({ snapshots }: { snapshots: Snapshot[] }) {
  if (snapshots.length === 0) {
    return <EmptyState title="No snapshots yet"><p>Take one per split above once its relations are verified.</p></EmptyState>;
  }
  return (
    <table className="data">
      <caption>{count(snapshots.length, "sealed snapshot")} (immutable), newest first</caption>
      <thead>
        <tr><th scope="col">snapshot</th><th scope="col">split</th><th scope="col">name</th><th scope="col">videos</th><th scope="col">queries</th><th scope="col">trajectories</th><th scope="col">relations (1 · 0 · ⊥)</th><th scope="col">complete</th><th scope="col">content</th><th scope="col">sealed</th></tr>
      </thead>
      <tbody>
        {snapshots.map((s) => (
          <tr key={s.id}>
            <td>#{s.id}</td>
            <td>{s.split}</td>
            <td>{s.name || "–"}</td>
            <td>{s.counts.n_videos ?? "–"}</td>
            <td>{s.counts.n_queries ?? "–"}</td>
            <td>{s.counts.n_tracks ?? "–"}</td>
            <td>{s.counts.n_relations ?? "–"} ({s.counts.label?.["1"] ?? 0} · {s.counts.label?.["0"] ?? 0} · {s.counts.label?.["-1"] ?? 0})</td>
            <td>{s.complete ? "yes" : "no"}</td>
            <td><code title={s.content_sha256}>{s.content_sha256.slice(0, 12)}</code></td>
            <td>{s.sealed_at ? new Date(s.sealed_at).toLocaleString() : "–"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function SnapshotsScreen() {
  const data = useAsync(async (signal) => {
    const [reports, snapshots] = await Promise.all([
      Promise.all(SPLITS.map((s) => api.completeness(s, 50, signal))),
      api.snapshots(200),
    ]);
    return { reports, snapshots: snapshots.results };
  }, [], 15000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="completeness and snapshots" />;
  return (
    <>
      <div className="split-cards">
        {data.data.reports.map((r) => <SplitCard key={r.split} split={r.split} report={r} onChanged={data.reload} />)}
      </div>
      <SnapshotTable snapshots={data.data.snapshots} />
    </>
  );
}
