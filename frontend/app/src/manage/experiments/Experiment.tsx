// One experiment: its status and provenance (stamps, snapshot hashes, code commit), resume and
// cancel (after a confirmation), its cells (a variant × seed each; variants that differ only in their
// retrieval pipeline share one training run), and its result
// table; polled while any cell is queued or running.

import { useEffect, useState } from "react";
import { api } from "../../api/endpoints";
import type { ExperimentDetail } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { Link } from "../../components/Link";
import { ErrorState, Loading } from "../../components/states";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useDialog } from "../../components/useDialog";
import { useShortcutList } from "../../keyboard/useShortcut";
import { LIVE_POLL_MS, STAMP_REASONS, Stamps } from "../training/Training";
import { ResultTable } from "./ResultTable";
import { cellActions, cellProgress, codeCommit, defaultsLabel, hasFigures, shortSha, sortCells } from "./table";
import { count } from "../../components/plural";

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "–");

function StampBanner({ stamps }: { stamps: string[] }) {
  if (stamps.length === 0) return null;
  return (
    <div className="warning stamped" role="alert">
      <strong>Figures stamped {stamps.join(", ")}</strong>: {stamps.map((s) => STAMP_REASONS[s] ?? s).join("; ")}.
    </div>
  );
}

function ConfirmCancel({ experiment, open, busy, onConfirm, onKeep }: {
  experiment: ExperimentDetail;
  open: number;
  busy: boolean;
  onConfirm: () => void;
  onKeep: () => void;
}) {
  const box = useDialog(onKeep, { enabled: !busy }); // Esc keeps it running, wherever the focus is
  return (
    <div className="confirm" role="dialog" aria-modal="true" aria-labelledby="confirm-cancel-title" tabIndex={-1} ref={box}>
      <h3 id="confirm-cancel-title">Cancel experiment {experiment.id}?</h3>
      <p>
        Its {count(open, "unfinished cell")} stop (a running one after its next checkpoint). Finished cells and
        their figures are kept; Resume queues the cancelled cells again.
      </p>
      <div className="confirm-actions">
        <button type="button" className="danger" disabled={busy} onClick={onConfirm}>{busy ? "Cancelling…" : "Cancel the cells"}</button>
        <button type="button" disabled={busy} onClick={onKeep} aria-keyshortcuts="Escape">Keep running <kbd>Esc</kbd></button>
      </div>
    </div>
  );
}

function Controls({ experiment, onDone }: { experiment: ExperimentDetail; onDone: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const actions = cellActions(experiment.cells);
  const act = async (which: "resume" | "cancel") => {
    setBusy(true);
    setError(null);
    setDone(null);
    try {
      const after = which === "resume" ? await api.resumeExperiment(experiment.id) : await api.cancelExperiment(experiment.id);
      const open = after ? cellActions(after.cells).open : 0;
      setDone(which === "resume" ? `Queued again: ${count(open, "cell")} to run.` : "Cancel requested for the unfinished cells.");
      setConfirming(false);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="experiment-controls">
      <p className="download-links">
        <button type="button" disabled={busy || !actions.resume} onClick={() => void act("resume")}
          title="Queue the failed and cancelled cells again (succeeded ones are kept)">Resume</button>
        <button type="button" disabled={busy || !actions.cancel || confirming} onClick={() => setConfirming(true)}
          title="Cancel the cells that have not ended">Cancel…</button>
        {hasFigures(experiment.result) ? <a href={api.experimentCsvUrl(experiment.id)} download>Download CSV</a>
          : <span className="muted small">CSV once a cell has finished</span>}
        {done && <span role="status" className="ok small">{done}</span>}
      </p>
      {confirming && <ConfirmCancel experiment={experiment} open={actions.open} busy={busy}
        onConfirm={() => void act("cancel")} onKeep={() => setConfirming(false)} />}
      {error !== null && <ErrorState error={error} title="The experiment was not changed" />}
    </div>
  );
}

function Cells({ experiment }: { experiment: ExperimentDetail }) {
  const variants = experiment.result.variants ?? Object.keys((experiment.spec.variants ?? {}) as Record<string, unknown>);
  const cells = sortCells(experiment.cells, variants);
  return (
    <table className="data compact">
      <caption>Cells: a variant and seed each (variants that differ only in their pipeline share a training run)</caption>
      <thead><tr><th scope="col">variant</th><th scope="col">seed</th><th scope="col">status</th><th scope="col">progress</th><th scope="col">run</th></tr></thead>
      <tbody>
        {cells.map((c) => (
          <tr key={c.id}>
            <td>{c.variant}</td>
            <td>{c.seed ?? "–"}</td>
            <td><StatusBadge status={c.status} />{c.error && <span className="error-inline small"> {c.error}</span>}</td>
            <td><ProgressBar value={cellProgress(c)} label={`${c.variant} seed ${c.seed ?? "–"} steps`} />
              <span className="small muted">{c.steps_done} of {c.steps_total}</span></td>
            <td><Link to={`/manage/training/${c.training_run}`}>Run {c.training_run}</Link></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function ExperimentScreen({ experimentId }: { experimentId: number }) {
  const [live, setLive] = useState(true);
  const data = useAsync((signal) => api.experiment(experimentId, signal), [experimentId], live ? LIVE_POLL_MS : undefined);
  const experiment = data.data;
  useEffect(() => {
    if (experiment) setLive(experiment.status === "running");
  }, [experiment]);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !experiment) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!experiment) return <Loading what={`experiment ${experimentId}`} />;
  const stamps = experiment.result.stamps ?? experiment.stamps;
  const versions = Object.entries(experiment.code_version).filter(([k]) => !k.startsWith("trajlab")).map(([k, v]) => `${k} ${String(v)}`);
  return (
    <div className="experiment">
      <StampBanner stamps={stamps} />
      <dl className="tiles">
        <div><dt>status</dt><dd><StatusBadge status={experiment.status} /><Stamps stamps={stamps} /></dd>
          <dd className="muted small">{live ? `live, refreshed every ${LIVE_POLL_MS / 1000} s` : `finished ${when(experiment.finished_at)}`}</dd></div>
        <div><dt>cells done</dt><dd>{experiment.cells_done} / {experiment.cells_total}</dd>
          <dd><ProgressBar value={experiment.cells_total ? experiment.cells_done / experiment.cells_total : 0} label="cells done" /></dd></div>
        <div><dt>grid</dt><dd className="name">{experiment.preset || experiment.model_kind}</dd>
          <dd className="muted small">{experiment.name} · {experiment.model_kind} · created {when(experiment.created_at)}</dd></div>
      </dl>
      <dl className="provenance">
        <div><dt>trained on</dt><dd>snapshot #{experiment.snapshot} <code title={experiment.snapshot_sha256}>{shortSha(experiment.snapshot_sha256)}</code></dd></div>
        <div><dt>evaluated on</dt><dd>snapshot #{experiment.eval_snapshot} <code title={experiment.eval_snapshot_sha256}>{shortSha(experiment.eval_snapshot_sha256)}</code></dd></div>
        <div><dt>code</dt><dd><code title={versions.join(", ")}>{codeCommit(experiment.code_version)}</code></dd></div>
        <div><dt>defaults</dt><dd>{defaultsLabel(experiment.defaults_version)}</dd></div>
      </dl>
      <Controls experiment={experiment} onDone={data.reload} />
      {data.error !== undefined && <p className="error-inline" role="alert">Refreshing failed; showing the last figures.</p>}
      <section aria-labelledby="experiment-result">
        <h2 id="experiment-result">Result</h2>
        <ResultTable result={experiment.result} experimentId={experiment.id} />
      </section>
      <section aria-labelledby="experiment-cells">
        <h2 id="experiment-cells">Cells</h2>
        <Cells experiment={experiment} />
      </section>
    </div>
  );
}
