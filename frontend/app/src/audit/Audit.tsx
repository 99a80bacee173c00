// Auditing (DESIGN 2.11): an auditor re-checks accepted records one at a time, blinded. The
// screen shows the record as accepted (a relation's query, predicates, trajectory and label; a
// query's text, predicates and target; a description's approved content) and nothing else: no
// model suggestion, no vote, no source, not why the record was sampled (the API sends nothing
// more). The verdict is `correct`, or `error` with an error type of the record's kind. Once the
// verdict is in, a description's recorded dissent (corrections that lost to the approvals of
// another version) comes back with it and is shown under the next record.
//
// Keyboard: 1 correct, 2 error, Shift+1… the error type, Ctrl+Enter records the verdict and takes
// the next record.

import { useEffect, useRef, useState } from "react";
import { api } from "../api/endpoints";
import type { AuditTarget, DescriptionContent, Dissent, Predicate, RelationLabel } from "../api/types";
import { Link } from "../components/Link";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { useAsync } from "../components/useAsync";
import { ariaKeys, useShortcutList } from "../keyboard/useShortcut";
import { DissentList } from "../review/description/Dissent";
import { DescriptionReadOnly } from "../review/description/DescriptionReview";
import { Predicates } from "../review/relation/RelationReview";
import { labelMeaning, labelText } from "../review/relation/relationGrid";
import { TrajectoryTarget, trajectoryOnly } from "../review/targets";

const QUESTIONS: Record<AuditTarget["kind"], string> = {
  relation: "Is the recorded label of this query and trajectory right?",
  query: "Is every predicate of the query supported by its target, and does the wording single the target out?",
  description: "Is the approved description of this trajectory right?",
};

export function AuditList() {
  const audits = useAsync(() => api.audits(100), [], 15000);
  if (audits.error) return <ErrorState error={audits.error} onRetry={audits.reload} />;
  if (!audits.data) return <Loading what="audits" />;
  const open = audits.data.results.filter((a) => a.n_judged < a.n_samples);
  if (open.length === 0) {
    return (
      <EmptyState title="Nothing to audit">
        <p>A manager starts an audit of a split; its sampled records appear here.</p>
      </EmptyState>
    );
  }
  return (
    <table className="data">
      <caption>Audits with records left to check</caption>
      <thead><tr><th scope="col">audit</th><th scope="col">split</th><th scope="col">records</th><th scope="col">checked</th><th scope="col" /></tr></thead>
      <tbody>
        {open.map((a) => (
          <tr key={a.id}>
            <td>{a.id}</td>
            <td>{a.split}</td>
            <td>{a.kinds.join(", ")}</td>
            <td>{a.n_judged} of {a.n_samples}</td>
            <td><Link to={`/audit/${a.id}`}>Audit {a.id}</Link></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function RecordView({ sample }: { sample: AuditTarget }) {
  const r = sample.record;
  const text = typeof r.text === "string" ? r.text : "";
  const predicates = Array.isArray(r.predicates) ? (r.predicates as Predicate[]) : [];
  if (sample.kind === "description") {
    return <DescriptionReadOnly video={Number(r.video)} trajectory={Number(r.trajectory)} content={r.content as DescriptionContent}
      caption={`The approved description of trajectory #${String(r.trajectory)}`} />;
  }
  const trajectory = Number(sample.kind === "relation" ? r.trajectory : r.target);
  const video = Number(sample.kind === "relation" ? r.trajectory_video : r.video);
  const label = r.label as RelationLabel | undefined;
  return (
    <div className="target">
      <section className="query-panel" aria-label="Query">
        <p className="query-text">“{text}”</p>
        <Predicates predicates={predicates} />
        {sample.kind === "relation" && label !== undefined && (
          <p>Recorded label for trajectory #{trajectory}: <strong className={`rel rel-${label}`}>{labelText(label)}</strong> ({labelMeaning(label)})
            {Number(r.query_video) !== video && <span className="muted"> · the trajectory is from another video than the query's</span>}</p>
        )}
        {sample.kind === "query" && <p>The query's target: trajectory #{trajectory}.</p>}
      </section>
      <TrajectoryTarget target={trajectoryOnly(video, trajectory)} />
    </div>
  );
}

export function AuditScreen({ auditId }: { auditId: number }) {
  const [sample, setSample] = useState<AuditTarget | null | undefined>(undefined); // null: nothing left
  const [error, setError] = useState<unknown>(null);
  const [verdict, setVerdict] = useState<"correct" | "error" | null>(null);
  const [errorType, setErrorType] = useState("");
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState(""); // about the record on screen: reset with each record
  const [recorded, setRecorded] = useState(""); // the last verdict recorded, naming its sample
  const [revealed, setRevealed] = useState<{ sample: number; dissent: Dissent[] } | null>(null); // after the verdict
  const [progress, setProgress] = useState<{ judged: number; samples: number } | null>(null);
  const shownAt = useRef(performance.now());
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    let live = true;
    setSample(undefined);
    setStatus("");
    Promise.all([api.auditNext(auditId), api.audit(auditId).catch(() => null)]).then(
      ([s, audit]) => {
        if (!live) return;
        setSample(s);
        setVerdict(null);
        setErrorType("");
        setNote("");
        setStatus("");
        setProgress(audit ? { judged: audit.n_judged, samples: audit.n_samples } : null);
        shownAt.current = performance.now();
      },
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [auditId, attempt]);

  const types = sample?.error_types ?? [];
  const submit = async () => {
    if (!sample || busy) return;
    if (!verdict) {
      setStatus("Choose a verdict first: 1 correct, 2 error.");
      return;
    }
    if (verdict === "error" && !errorType) {
      setStatus("Choose the error type (Shift+1 …).");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const judgment = await api.auditJudge(auditId, {
        sample: sample.sample, verdict, error_type: verdict === "error" ? errorType : "", note: note.trim(),
        time_spent_ms: Math.round(performance.now() - shownAt.current),
      });
      setRecorded(`Recorded ${verdict}${verdict === "error" ? ` (${errorType.replaceAll("_", " ")})` : ""} for sample ${sample.sample}.`);
      setRevealed({ sample: sample.sample, dissent: judgment?.dissent ?? [] });
      setAttempt((a) => a + 1);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const open = !!sample && !busy;
  useShortcutList([
    { id: "audit.correct", handler: () => { setVerdict("correct"); setErrorType(""); }, enabled: open },
    { id: "audit.error", handler: () => setVerdict("error"), enabled: open },
    ...types.slice(0, 6).map((t, i) => ({
      id: `audit.type${i + 1}`, handler: () => { setVerdict("error"); setErrorType(t); }, detail: t.replaceAll("_", " "), enabled: open,
    })),
    { id: "audit.submit", handler: () => void submit(), enabled: open },
  ]);

  if (error && sample === undefined) return <ErrorState error={error} onRetry={() => { setError(null); setAttempt((a) => a + 1); }} />;
  if (sample === undefined) return <Loading what="the next record" />;
  if (sample === null) {
    return (
      <EmptyState title={`Nothing left to audit in audit ${auditId}`}>
        <p>Every record is checked or held by another auditor (records about items you voted on are never yours).</p>
        <p><Link to="/audit">Back to the audits</Link></p>
      </EmptyState>
    );
  }
  return (
    <div className="review">
      <div className="review-main">
        <RecordView key={sample.sample} sample={sample} />
      </div>
      <aside className="vote-panel" aria-label="Your verdict">
        {progress && (
          <p className="counter" title="records of this audit judged by any auditor, plus this one">
            Record {Math.min(progress.judged + 1, progress.samples)} of {progress.samples}
          </p>
        )}
        <p className="question">{QUESTIONS[sample.kind]}</p>
        <p className="muted small">A {sample.kind} record, as accepted. You see no votes and no model suggestions.</p>
        <form className="decision" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
          <div className="labels" role="radiogroup" aria-label="Verdict">
            <button type="button" role="radio" aria-checked={verdict === "correct"} className={`vote label-usable${verdict === "correct" ? " chosen" : ""}`}
              onClick={() => { setVerdict("correct"); setErrorType(""); }} aria-keyshortcuts={ariaKeys("audit.correct")}><kbd>1</kbd> Correct</button>
            <button type="button" role="radio" aria-checked={verdict === "error"} className={`vote label-unusable${verdict === "error" ? " chosen" : ""}`}
              onClick={() => setVerdict("error")} aria-keyshortcuts={ariaKeys("audit.error")}><kbd>2</kbd> Error</button>
          </div>
          {verdict === "error" && (
            <fieldset className="reasons">
              <legend>Error type</legend>
              {types.map((t, i) => (
                <label key={t}>
                  <input type="radio" name="error-type" checked={errorType === t} onChange={() => setErrorType(t)} />
                  {i < 6 && <kbd>⇧{i + 1}</kbd>} {t.replaceAll("_", " ")}
                </label>
              ))}
            </fieldset>
          )}
          <label className="reason">
            Note (optional)
            <textarea value={note} onChange={(e) => setNote(e.target.value)} rows={2} maxLength={2000} />
          </label>
          <button type="submit" className="primary" disabled={!verdict || busy} aria-keyshortcuts={ariaKeys("audit.submit")}>
            Record the verdict <kbd>Ctrl + Enter</kbd>
          </button>
        </form>
        {error !== null && <ErrorState error={error} title="The verdict was not recorded" />}
        <p className="muted small">Sample {sample.sample} · claimed until {new Date(sample.claim_expires_at).toLocaleTimeString()}</p>
        <p className="status" role="status" aria-live="polite">{status}</p>
        {recorded && <p className="status muted small" role="status">{recorded}</p>}
        {revealed && (
          <DissentList dissent={revealed.dissent}
            caption={`Recorded dissent on the description of sample ${revealed.sample}, now that your verdict is in`} />
        )}
      </aside>
    </div>
  );
}
