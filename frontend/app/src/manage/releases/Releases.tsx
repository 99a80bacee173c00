// Releases (DESIGN 2.11): immutable, versioned exports of splits. Managers publish one after a
// confirmation that says what the release will hold and what stands in its way (a dev or test
// split that misses relations is refused; an unfinished audit needs an explicit "publish anyway",
// which the release records), download it as one .tar with its SHA256SUMS, verify its folder
// against the published checksums, and diff it against another release record by record.

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { Completeness, Release, ReleaseDetail, ReleasePreflight, ReleaseVerify } from "../../api/types";
import { Link } from "../../components/Link";
import { count } from "../../components/plural";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useDialog } from "../../components/useDialog";
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

/** The audits a publish needs "publish anyway" for, in words. */
export function unfinishedText(audits: { id: number; split: string; n_samples: number; n_judged: number }[]): string {
  return audits.map((a) => `audit ${a.id} of ${a.split} (${a.n_judged} of ${count(a.n_samples, "sample")} judged)`).join(", ");
}

interface Draft {
  name: string;
  version: string;
  splits: string[];
  description: string;
}

/** The confirmation before an immutable release is written: what it will hold, its parent, and
 *  what stands in its way, with "publish anyway" to tick when an audit is unfinished. */
function ConfirmPublish({ draft, busy, onConfirm, onCancel }: {
  draft: Draft;
  busy: boolean;
  onConfirm: (publishAnyway: boolean) => void;
  onCancel: () => void;
}) {
  const pre = useAsync((signal) => api.releasePreflight(draft.splits, draft.name, signal), [draft]);
  const [anyway, setAnyway] = useState(false);
  const p: ReleasePreflight | undefined = pre.data ?? undefined;
  const unfinished = p?.unfinished_audits ?? [];
  const incomplete = p ? Object.values(p.incomplete) : [];
  const blocked = !p || incomplete.length > 0 || p.videos === 0 || (unfinished.length > 0 && !anyway);
  const box = useDialog(onCancel, { enabled: !busy }); // Esc cancels, wherever the focus is
  return (
    <div className="confirm" role="dialog" aria-modal="true" aria-labelledby="confirm-publish-title" tabIndex={-1} ref={box}>
      <h3 id="confirm-publish-title">Publish {draft.name} {draft.version}?</h3>
      <p>A release is immutable: once written it can never be changed or deleted, only followed by a new version.</p>
      {pre.error ? <ErrorState error={pre.error} title="What the release would hold could not be read" />
        : !p ? <Loading what="what the release would hold" />
        : (
          <>
            <ul>
              <li>Splits {p.splits.join(", ")}: {count(p.videos, "benchmark video")}</li>
              <li>{p.parent ? <>Follows {p.parent.name} {p.parent.version}; its changes are recorded.</> : "The first release of this name."}</li>
            </ul>
            {incomplete.map((r) => (
              <div key={r.split} className="refusal" role="region" aria-label={`What the ${r.split} split misses`}>
                <h3>The {r.split} split misses relations: publishing is refused</h3>
                <CompletenessReport report={r} />
              </div>
            ))}
            {unfinished.length > 0 && (
              <div className="warning" role="alert">
                <strong>An audit of a released split is unfinished:</strong> {unfinishedText(unfinished)}. Its residual-error
                estimate is not final.
                <label className="check">
                  <input type="checkbox" checked={anyway} onChange={(e) => setAnyway(e.target.checked)} />
                  {" "}Publish anyway (the release records the unfinished audits)
                </label>
              </div>
            )}
          </>
        )}
      <div className="confirm-actions">
        <button type="button" className="primary" disabled={busy || blocked} onClick={() => onConfirm(anyway)}>
          {busy ? "Writing the release…" : unfinished.length > 0 ? "Publish anyway" : "Publish"}
        </button>
        <button type="button" disabled={busy} onClick={onCancel} aria-keyshortcuts="Escape">Cancel <kbd>Esc</kbd></button>
      </div>
    </div>
  );
}

function CreateForm({ latest, onCreated }: { latest?: Release; onCreated: (r: Release) => void }) {
  const [name, setName] = useState(latest?.name ?? "trajlab");
  const [version, setVersion] = useState(latest ? nextPatch(latest.version) : "1.0.0");
  const [splits, setSplits] = useState<string[]>(["dev", "test"]);
  const [description, setDescription] = useState("");
  const [draft, setDraft] = useState<Draft | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const toggle = (s: string) => setSplits((xs) => (xs.includes(s) ? xs.filter((x) => x !== s) : [...xs, s]));
  const publish = async (d: Draft, publishAnyway: boolean) => {
    setBusy(true);
    setError(null);
    try {
      const r = await api.createRelease({ ...d, publish_anyway: publishAnyway });
      setDraft(null);
      if (r) onCreated(r);
    } catch (e) {
      setDraft(null);
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const missing = refusedSplits(error);
  return (
    <form className="run-form" aria-label="Publish a release" onSubmit={(e) => {
      e.preventDefault();
      setError(null);
      setDraft({ name: name.trim(), version: version.trim(), splits: SPLITS.filter((s) => splits.includes(s)), description });
    }}>
      <div className="inline-form">
        <label>Name<input type="text" value={name} onChange={(e) => setName(e.target.value)} maxLength={100} disabled={draft !== null} /></label>
        <label>Version<input type="text" value={version} onChange={(e) => setVersion(e.target.value)} size={8} disabled={draft !== null} /></label>
        <fieldset className="inline-checks" disabled={draft !== null}>
          <legend>Splits</legend>
          {SPLITS.map((s) => (
            <label key={s} className="check"><input type="checkbox" checked={splits.includes(s)} onChange={() => toggle(s)} /> {s}</label>
          ))}
        </fieldset>
      </div>
      <label className="reason">Description<textarea value={description} onChange={(e) => setDescription(e.target.value)} rows={2} maxLength={5000} disabled={draft !== null} /></label>
      {draft === null && (
        <button type="submit" className="primary" disabled={splits.length === 0 || !name.trim()}>Publish the release…</button>
      )}
      {draft !== null && (
        <ConfirmPublish draft={draft} busy={busy} onConfirm={(anyway) => void publish(draft, anyway)} onCancel={() => setDraft(null)} />
      )}
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
          <caption>{count(releases.length, "release")} (immutable), newest first</caption>
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
        : d.total === 0 ? (
          <p role="status" className="ok">
            No changes: {String(d.old.name)} {String(d.old.version)} and {String(d.new.name)} {String(d.new.version)} hold the same records.
          </p>
        ) : (
          <>
            <table className="data">
              <caption>
                {String(d.old.name)} {String(d.old.version)} → {String(d.new.name)} {String(d.new.version)}: {count(d.total, "changed record")}
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
      {r.unfinished_audits && r.unfinished_audits.length > 0 && (
        <p className="warning" role="note">Published anyway before {unfinishedText(r.unfinished_audits)} was finished.</p>
      )}
      <Download release={r} />
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

/** Download links (the whole release as one .tar, and its SHA256SUMS) and the verify button. */
function Download({ release: r }: { release: ReleaseDetail }) {
  const [verify, setVerify] = useState<ReleaseVerify | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const total = r.files.reduce((sum, f) => sum + f.size_bytes, 0);
  const check = async () => {
    setBusy(true);
    setError(null);
    setVerify(null);
    try {
      setVerify(await api.verifyRelease(r.id));
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="download-title" className="panel">
      <h2 id="download-title">Download and verify</h2>
      <p className="download-links">
        <a href={api.releaseDownloadUrl(r.id)} download={`${r.name}-${r.version}.tar`} className="button">
          Download {r.name}-{r.version}.tar
        </a>{" "}
        <span className="muted small">{count(r.files.length, "file")}, {bytes(total)}</span>{" · "}
        <a href={api.releaseChecksumsUrl(r.id)} download={`${r.name}-${r.version}.SHA256SUMS`}>SHA256SUMS</a>
      </p>
      <p className="muted small">
        After unpacking: <code>cd {r.name}-{r.version} &amp;&amp; sha256sum -c SHA256SUMS</code>; the SHA-256 of SHA256SUMS itself
        is <code>{r.manifest_sha256}</code>.
      </p>
      <button type="button" onClick={() => void check()} disabled={busy}
        title="Check every file of the release's folder on the server against the published SHA-256">
        {busy ? "Verifying…" : "Verify the release folder"}
      </button>
      {verify && (verify.ok
        ? <p role="status" className="ok">Verified: every file matches its published SHA-256.</p>
        : (
          <div role="alert" className="refusal">
            <strong>The folder is not what was published ({count(verify.problems.length, "problem")}):</strong>
            <ul>{verify.problems.map((p) => <li key={p}>{p}</li>)}</ul>
          </div>
        ))}
      {error !== null && <ErrorState error={error} title="The release could not be verified" />}
    </section>
  );
}
