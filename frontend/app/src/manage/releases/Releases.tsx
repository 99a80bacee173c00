// Releases (DESIGN 2.11): immutable, versioned exports of splits. Managers publish one (a dev or
// test split that misses relations is refused, and the refusal lists what is missing), read its
// files, counts and audit statistics, and diff it against another release record by record.

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { Completeness, Release } from "../../api/types";
import { Link } from "../../components/Link";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { navigate } from "../../router";
import { CompletenessReport } from "../snapshots/Snapshots";
import { SPLITS } from "../splits";

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "–");

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

function refusedSplits(error: unknown): Completeness[] {
  if (!(error instanceof ApiError) || error.code !== "incomplete_split") return [];
  const by = error.extra.completeness;
  return by && typeof by === "object" ? Object.values(by as Record<string, Completeness>) : [];
}

function CreateForm({ latest, onCreated }: { latest?: Release; onCreated: (r: Release) => void }) {
  const [name, setName] = useState(latest?.name ?? "trajlab");
  const [version, setVersion] = useState(latest ? nextPatch(latest.version) : "1.0.0");
  const [splits, setSplits] = useState<string[]>(["dev", "test"]);
  const [description, setDescription] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const toggle = (s: string) => setSplits((xs) => (xs.includes(s) ? xs.filter((x) => x !== s) : [...xs, s]));
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await api.createRelease({ name: name.trim(), version: version.trim(), splits: SPLITS.filter((s) => splits.includes(s)), description });
      if (r) onCreated(r);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const missing = refusedSplits(error);
  return (
    <form className="run-form" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <div className="inline-form">
        <label>Name<input type="text" value={name} onChange={(e) => setName(e.target.value)} maxLength={100} /></label>
        <label>Version<input type="text" value={version} onChange={(e) => setVersion(e.target.value)} size={8} /></label>
        <fieldset className="inline-checks">
          <legend>Splits</legend>
          {SPLITS.map((s) => (
            <label key={s} className="check"><input type="checkbox" checked={splits.includes(s)} onChange={() => toggle(s)} /> {s}</label>
          ))}
        </fieldset>
      </div>
      <label className="reason">Description<textarea value={description} onChange={(e) => setDescription(e.target.value)} rows={2} maxLength={5000} /></label>
      <button type="submit" className="primary" disabled={busy || splits.length === 0 || !name.trim()}>
        {busy ? "Writing the release…" : "Publish the release"}
      </button>
      {error !== null && <ErrorState error={error} title="The release was not published" details={missing.length === 0} />}
      {missing.map((r) => (
        <div key={r.split} className="refusal" role="region" aria-label={`What the ${r.split} split misses`}>
          <h3>What the {r.split} split misses</h3>
          <CompletenessReport report={r} />
        </div>
      ))}
    </form>
  );
}

/** The next patch version after `v` ("1.2.3" → "1.2.4"); `v` itself when it is not MAJOR.MINOR.PATCH. */
export function nextPatch(v: string): string {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(v);
  return m ? `${m[1]}.${m[2]}.${Number(m[3]) + 1}` : v;
}

export function ReleasesScreen() {
  const data = useAsync(() => api.releases(200), [], 15000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="releases" />;
  const releases = data.data.results;
  return (
    <>
      <section aria-labelledby="publish-title" className="panel">
        <h2 id="publish-title">Publish a release</h2>
        <CreateForm latest={releases[0]} onCreated={(r) => navigate(`/manage/releases/${r.id}`)} />
      </section>
      {releases.length === 0 ? (
        <EmptyState title="No releases yet"><p>A release needs complete dev and test splits (see <Link to="/manage/snapshots">Snapshots</Link>).</p></EmptyState>
      ) : (
        <table className="data">
          <caption>{releases.length} release{releases.length === 1 ? "" : "s"} (immutable), newest first</caption>
          <thead><tr><th scope="col">release</th><th scope="col">splits</th><th scope="col">origin</th><th scope="col">records</th><th scope="col">manifest</th><th scope="col">published</th></tr></thead>
          <tbody>
            {releases.map((r) => (
              <tr key={r.id}>
                <td><Link to={`/manage/releases/${r.id}`}>{r.name} {r.version}</Link></td>
                <td>{r.splits.join(", ")}</td>
                <td>{r.origin}</td>
                <td className="small">{Object.entries(r.counts).map(([k, v]) => `${k} ${v}`).join(" · ") || "–"}</td>
                <td><code title={r.manifest_sha256}>{r.manifest_sha256.slice(0, 12)}</code></td>
                <td>{when(r.sealed_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function Diff({ releaseId, others }: { releaseId: number; others: Release[] }) {
  const [other, setOther] = useState<number | "">(others[0]?.id ?? "");
  const diff = useAsync((signal) => (other === "" ? Promise.resolve(null) : api.releaseDiff(Number(other), releaseId, 200, signal)), [other, releaseId]);
  if (others.length === 0) return <p className="muted">No other release to compare with.</p>;
  const d = diff.data;
  return (
    <section aria-labelledby="diff-title">
      <h2 id="diff-title">Changes</h2>
      <label>
        From release{" "}
        <select value={other} onChange={(e) => setOther(Number(e.target.value))}>
          {others.map((r) => <option key={r.id} value={r.id}>{r.name} {r.version}</option>)}
        </select>
      </label>
      {diff.error ? <ErrorState error={diff.error} title="The releases could not be compared" />
        : !d ? <Loading what="the differences" />
        : (
          <>
            <table className="data">
              <caption>
                {String(d.old.name)} {String(d.old.version)} → {String(d.new.name)} {String(d.new.version)}: {d.total} changed record{d.total === 1 ? "" : "s"}
              </caption>
              <thead><tr><th scope="col">table</th><th scope="col">added</th><th scope="col">removed</th><th scope="col">changed</th></tr></thead>
              <tbody>
                {Object.entries(d.tables).map(([t, c]) => (
                  <tr key={t}><th scope="row">{t}</th><td>{c.added}</td><td>{c.removed}</td><td>{c.changed}</td></tr>
                ))}
              </tbody>
            </table>
            {d.records.length > 0 && (
              <details>
                <summary>Records{d.truncated ? ` (first ${d.records.length} of ${d.total})` : ""}</summary>
                <table className="data compact">
                  <thead><tr><th scope="col">table</th><th scope="col">record</th><th scope="col">change</th></tr></thead>
                  <tbody>
                    {d.records.map((r, i) => <tr key={i}><td>{r.table}</td><td><code>{JSON.stringify(r.key)}</code></td><td>{r.change}</td></tr>)}
                  </tbody>
                </table>
              </details>
            )}
          </>
        )}
    </section>
  );
}

export function ReleaseScreen({ releaseId }: { releaseId: number }) {
  const data = useAsync(async (signal) => {
    const [release, all] = await Promise.all([api.release(releaseId, signal), api.releases(200)]);
    return { release, others: all.results.filter((r) => r.id !== releaseId) };
  }, [releaseId]);
  if (data.error) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what={`release ${releaseId}`} />;
  const { release: r, others } = data.data;
  return (
    <div className="release">
      <dl className="tiles">
        <div><dt>release</dt><dd>{r.name} {r.version}</dd><dd className="muted small">{r.origin}, published {when(r.sealed_at)}</dd></div>
        <div><dt>splits</dt><dd>{r.splits.join(", ")}</dd><dd className="muted small">{r.media_included ? "videos included" : "videos not included"}</dd></div>
        <div><dt>manifest sha256</dt><dd><code className="small">{r.manifest_sha256.slice(0, 16)}…</code></dd><dd className="muted small">{r.license}</dd></div>
        <div><dt>parent</dt><dd>{r.parent ? <Link to={`/manage/releases/${r.parent}`}>release {r.parent}</Link> : "–"}</dd></div>
      </dl>
      {r.description && <p>{r.description}</p>}
      <table className="data">
        <caption>Files ({r.files.length}) with their checksums</caption>
        <thead><tr><th scope="col">file</th><th scope="col">rows</th><th scope="col">size</th><th scope="col">sha256</th></tr></thead>
        <tbody>
          {r.files.map((f) => (
            <tr key={f.path}><td><code>{f.path}</code></td><td>{f.rows ?? "–"}</td><td>{bytes(f.size_bytes)}</td><td><code title={f.sha256}>{f.sha256.slice(0, 12)}</code></td></tr>
          ))}
        </tbody>
      </table>
      <Diff releaseId={r.id} others={others} />
      <details>
        <summary>Audit statistics and construction configuration as published</summary>
        <pre className="log">{JSON.stringify({ stats: r.stats, config: r.config }, null, 2)}</pre>
      </details>
    </div>
  );
}
