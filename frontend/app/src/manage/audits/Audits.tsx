// Audits for managers (DESIGN 2.11): sample an audit of a split (seeded: random accepted records,
// and difficult cases apart), follow how far the auditors are, and read the statistics per kind
// of record: the random stratum's error rate with its exact 95% interval and the residual errors
// it implies for the whole accepted population, the difficult stratum reported apart.

import { useState } from "react";
import { api } from "../../api/endpoints";
import type { Audit, AuditStratumStats } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { count } from "../../components/plural";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { SPLITS } from "../splits";

const pct = (v: number | null | undefined) => (typeof v === "number" ? `${(v * 100).toFixed(1)}%` : "–");

function StartAudit({ onStarted }: { onStarted: () => void }) {
  const [split, setSplit] = useState<string>("dev");
  const [nRandom, setNRandom] = useState("50");
  const [nDifficult, setNDifficult] = useState("20");
  const [seed, setSeed] = useState("0");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      await api.startAudit({ split, n_random: Number(nRandom), n_difficult: Number(nDifficult), seed: Number(seed) });
      onStarted();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="inline-form" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <label>Split<select value={split} onChange={(e) => setSplit(e.target.value)}>{SPLITS.map((s) => <option key={s}>{s}</option>)}</select></label>
      <label>Random records per kind<input type="text" inputMode="numeric" value={nRandom} onChange={(e) => setNRandom(e.target.value)} size={5} /></label>
      <label>Difficult records per kind<input type="text" inputMode="numeric" value={nDifficult} onChange={(e) => setNDifficult(e.target.value)} size={5} /></label>
      <label>Seed<input type="text" inputMode="numeric" value={seed} onChange={(e) => setSeed(e.target.value)} size={5} /></label>
      <button type="submit" className="primary" disabled={busy}>Start an audit</button>
      {error !== null && <ErrorState error={error} title="The audit was not started" />}
    </form>
  );
}

function StratumRow({ kind, stratum, s }: { kind: string; stratum: string; s: AuditStratumStats }) {
  return (
    <tr>
      <th scope="row">{kind}</th>
      <td>{stratum}</td>
      <td>{s.judged} of {s.sampled}</td>
      <td>{s.errors}</td>
      <td>{pct(s.error_rate)}</td>
      <td>{s.judged ? `${pct(s.ci95[0])}–${pct(s.ci95[1])}` : "–"}</td>
      <td>{stratum === "random" && s.estimated_residual_errors != null ? `${s.estimated_residual_errors.toFixed(1)} of ${s.population}` : "–"}</td>
      <td className="small">{Object.entries(s.errors_by_type).map(([t, n]) => `${t.replaceAll("_", " ")} ${n}`).join(", ") || "–"}</td>
    </tr>
  );
}

function AuditStatsTable({ audit }: { audit: Audit }) {
  const stats = useAsync((signal) => api.auditStats(audit.id, signal), [audit.id, audit.n_judged]);
  if (stats.error) return <ErrorState error={stats.error} title="The statistics could not be loaded" />;
  if (!stats.data) return <Loading what="statistics" />;
  return (
    <table className="data compact">
      <caption>Audit {audit.id} of {audit.split}: error rates per kind (exact 95% intervals)</caption>
      <thead><tr><th scope="col">kind</th><th scope="col">stratum</th><th scope="col">checked</th><th scope="col">errors</th><th scope="col">rate</th><th scope="col">95% interval</th><th scope="col">residual errors</th><th scope="col">by type</th></tr></thead>
      <tbody>
        {Object.entries(stats.data.by_kind).flatMap(([kind, strata]) =>
          Object.entries(strata).map(([stratum, s]) => <StratumRow key={`${kind}:${stratum}`} kind={kind} stratum={stratum} s={s} />))}
      </tbody>
    </table>
  );
}

export function AuditsScreen() {
  const audits = useAsync(() => api.audits(100), [], 10000);
  useShortcutList([{ id: "manager.refresh", handler: audits.reload }]);
  if (audits.error && !audits.data) return <ErrorState error={audits.error} onRetry={audits.reload} />;
  if (!audits.data) return <Loading what="audits" />;
  return (
    <>
      <section aria-labelledby="start-audit" className="panel">
        <h2 id="start-audit">Sample an audit</h2>
        <StartAudit onStarted={audits.reload} />
      </section>
      {audits.data.results.length === 0 ? (
        <EmptyState title="No audits yet"><p>An audit samples accepted relations, queries and descriptions of a split for auditors to re-check blind.</p></EmptyState>
      ) : audits.data.results.map((a) => (
        <section key={a.id} className="panel" aria-label={`Audit ${a.id}`}>
          <h2>Audit {a.id} · {a.split} · seed {a.seed}</h2>
          <ProgressBar value={a.n_samples ? a.n_judged / a.n_samples : 0} label={`Audit ${a.id} checked`} />
          <p className="small muted">{a.n_judged} of {count(a.n_samples, "record")} checked · {a.n_random} random and {a.n_difficult} difficult per kind
            · population: {Object.entries(a.population).map(([k, p]) => `${k} ${p.accepted} accepted (${p.difficult} difficult)`).join(", ")}</p>
          <AuditStatsTable audit={a} />
        </section>
      ))}
    </>
  );
}
