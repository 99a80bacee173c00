// Describer (VLM), query-writer (LLM) and mining runs (DESIGN 2.6, 2.7, 2.9): start one and
// follow its job. Describer and writer runs work on frozen candidate pools (the current version
// of each video's pool); mining works on a split. Every run is recorded with its backend, budget
// and prompt hash; the job's progress shows here and on the jobs screen.

import { useState } from "react";
import { api } from "../../api/endpoints";
import type { JobSummary, MiningRun, ModelRun, Pool, Video } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { Link } from "../../components/Link";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { count } from "../../components/plural";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { RunControls } from "../jobs/RunControls";
import { SPLITS } from "../splits";

const when = (iso: string) => new Date(iso).toLocaleString();

function JobCell({ job, status, label, onChanged }: { job: JobSummary | null; status: string; label: string; onChanged: () => void }) {
  if (!job) return <span className="muted">no job</span>;
  return (
    <>
      <StatusBadge status={job.status} runStatus={status} />{" "}
      <Link to="/manage/jobs">job {job.id}</Link>
      <ProgressBar value={job.progress} label={`Job ${job.id} progress`} />
      <span className="small muted">{job.message}</span>{" "}
      <RunControls jobId={job.id} status={status} label={label} onDone={onChanged} />
    </>
  );
}

function stats(s: Record<string, unknown>): string {
  const parts = Object.entries(s ?? {}).map(([k, v]) => `${k.replaceAll("_", " ")} ${typeof v === "object" ? JSON.stringify(v) : String(v)}`);
  return parts.length ? parts.join(" · ") : "–";
}

interface PoolChoice {
  pool: Pool;
  video?: Video;
}

/** The current version of each video's frozen pool (a pool another one supersedes is left out). */
function currentPools(pools: Pool[], videos: Video[]): PoolChoice[] {
  const superseded = new Set(pools.map((p) => p.supersedes).filter((x): x is number => x !== null));
  const byId = new Map(videos.map((v) => [v.id, v]));
  return pools.filter((p) => !superseded.has(p.id)).map((pool) => ({ pool, video: byId.get(pool.video) }));
}

function PoolRunForm({ kind, pools, defaultBackend, start, onStarted }: {
  kind: string;
  pools: PoolChoice[];
  defaultBackend: string;
  start: (body: { pools: number[]; backend?: Record<string, unknown> }) => Promise<ModelRun | null>;
  onStarted: () => void;
}) {
  const [chosen, setChosen] = useState<Set<number>>(new Set());
  const [backend, setBackend] = useState(defaultBackend);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  if (pools.length === 0) return <p className="muted">No frozen pools yet: freeze them on the <Link to="/manage/runs">proposal runs</Link> screen.</p>;
  const toggle = (id: number) => setChosen((c) => {
    const n = new Set(c);
    if (n.has(id)) n.delete(id);
    else n.add(id);
    return n;
  });
  const submit = async () => {
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const run = await start({ pools: [...chosen].sort((a, b) => a - b), backend: { name: backend.trim() || defaultBackend } });
      setDone(`${kind} run ${run?.id} queued as job ${run?.job?.id ?? "–"} over ${count(chosen.size, "pool")}.`);
      setChosen(new Set());
      onStarted();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="run-form" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <fieldset>
        <legend>Frozen pools ({chosen.size} of {pools.length} chosen)</legend>
        <button type="button" onClick={() => setChosen(new Set(pools.map((p) => p.pool.id)))}>Choose all</button>{" "}
        <button type="button" onClick={() => setChosen(new Set())}>Choose none</button>
        <ul className="pool-choices">
          {pools.map(({ pool, video }) => (
            <li key={pool.id}>
              <label>
                <input type="checkbox" checked={chosen.has(pool.id)} onChange={() => toggle(pool.id)} />
                pool {pool.id} · {video ? `${video.name} (${video.split || "no split"})` : `video ${pool.video}`} · v{pool.version} · {count(pool.n_members, "member")}
              </label>
            </li>
          ))}
        </ul>
      </fieldset>
      <div className="inline-form">
        <label>
          Backend
          <input type="text" value={backend} onChange={(e) => setBackend(e.target.value)} size={14} />
        </label>
        <button type="submit" className="primary" disabled={busy || chosen.size === 0}>Start a {kind} run</button>
      </div>
      {done && <p role="status" className="ok">{done}</p>}
      {error !== null && <ErrorState error={error} title={`The ${kind} run was not started`} />}
    </form>
  );
}

function ModelRunTable({ runs, caption, kind, onChanged }: { runs: ModelRun[]; caption: string; kind: string; onChanged: () => void }) {
  if (runs.length === 0) return <p className="muted">No runs yet.</p>;
  return (
    <table className="data">
      <caption>{caption}</caption>
      <thead><tr><th scope="col">run</th><th scope="col">pools</th><th scope="col">backend</th><th scope="col">prompt</th><th scope="col">results</th><th scope="col">job</th><th scope="col">created</th></tr></thead>
      <tbody>
        {runs.map((r) => (
          <tr key={r.id}>
            <td>{r.id}</td>
            <td>{r.pools.join(", ")}</td>
            <td>{String(r.backend.name ?? "–")}</td>
            <td>{r.prompt_version || "–"}{r.prompt_sha256 && <code title={r.prompt_sha256}> {r.prompt_sha256.slice(0, 8)}</code>}</td>
            <td>{stats(r.stats)}</td>
            <td><JobCell job={r.job} status={r.status} label={`${kind} run ${r.id}`} onChanged={onChanged} /></td>
            <td>{when(r.created_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function MiningForm({ onStarted }: { onStarted: () => void }) {
  const [split, setSplit] = useState<string>("train");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const submit = async () => {
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const run = await api.startMiningRun({ split });
      setDone(`Mining run ${run?.id} of ${split} queued as job ${run?.job?.id ?? "–"}.`);
      onStarted();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="inline-form" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <label>
        Split
        <select value={split} onChange={(e) => setSplit(e.target.value)}>
          {SPLITS.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
      </label>
      <button type="submit" className="primary" disabled={busy}>Mine cross-video pairs</button>
      {done && <p role="status" className="ok">{done}</p>}
      {error !== null && <ErrorState error={error} title="The mining run was not started" />}
    </form>
  );
}

function MiningTable({ runs, onChanged }: { runs: MiningRun[]; onChanged: () => void }) {
  if (runs.length === 0) return <p className="muted">No mining runs yet.</p>;
  return (
    <table className="data">
      <caption>Mining runs, newest first</caption>
      <thead><tr><th scope="col">run</th><th scope="col">split</th><th scope="col">result</th><th scope="col">job</th><th scope="col">created</th></tr></thead>
      <tbody>
        {runs.map((r) => (
          <tr key={r.id}>
            <td>{r.id}</td>
            <td>{r.split}</td>
            <td className="small">{r.log?.note ? String(r.log.note) : stats((r.log?.counts ?? {}) as Record<string, unknown>)}</td>
            <td><JobCell job={r.job} status={r.status} label={`mining run ${r.id}`} onChanged={onChanged} /></td>
            <td>{when(r.created_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ModelRunsScreen() {
  const data = useAsync(async () => {
    const [pools, videos, describe, generate, mining] = await Promise.all([
      api.pools(500), api.videos(500), api.descriptionRuns(50), api.generationRuns(50), api.miningRuns(50),
    ]);
    return {
      pools: currentPools(pools.results, videos.results),
      describe: describe.results, generate: generate.results, mining: mining.results,
    };
  }, [], 3000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="model runs" />;
  const d = data.data;
  return (
    <>
      {data.error !== undefined && <p className="error-inline" role="alert">Refreshing failed; showing the last lists.</p>}
      <section aria-labelledby="describe-title" className="panel">
        <h2 id="describe-title">Descriptions (describer)</h2>
        <p className="muted small">Describes every member of the chosen pools; each description opens a review item.</p>
        <PoolRunForm kind="describer" pools={d.pools} defaultBackend="heuristic" start={api.startDescriptionRun} onStarted={data.reload} />
        <ModelRunTable runs={d.describe} caption="Describer runs, newest first" kind="describer" onChanged={data.reload} />
      </section>
      <section aria-labelledby="generate-title" className="panel">
        <h2 id="generate-title">Queries (query writer)</h2>
        <p className="muted small">Writes queries from the approved descriptions; each query opens its relation row for review.</p>
        <PoolRunForm kind="query-writer" pools={d.pools} defaultBackend="template" start={api.startGenerationRun} onStarted={data.reload} />
        <ModelRunTable runs={d.generate} caption="Query-writer runs, newest first" kind="query-writer" onChanged={data.reload} />
      </section>
      <section aria-labelledby="mining-title" className="panel">
        <h2 id="mining-title">Cross-video pairs (mining)</h2>
        <p className="muted small">Mines pairs of a split into strata; potential matches and hard negatives go to pair review.</p>
        <MiningForm onStarted={data.reload} />
        <MiningTable runs={d.mining} onChanged={data.reload} />
      </section>
      {d.pools.length === 0 && d.describe.length === 0 && (
        <EmptyState title="Nothing to run yet"><p>Describer and query-writer runs need frozen pools.</p></EmptyState>
      )}
    </>
  );
}
