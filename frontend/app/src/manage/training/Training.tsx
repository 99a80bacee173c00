// Training runs (DESIGN 2.10): start one on a sealed snapshot, follow it live (loss and its parts,
// realized positives and negatives, zero-negative rates, learning rate, as inline-SVG curves that
// grow while the run works), read its evaluation (T2Traj, Traj2T, OCVR with the random
// baseline), cancel it.

import { useEffect, useRef, useState } from "react";
import { api } from "../../api/endpoints";
import type { EvaluationRun, Snapshot, StepSeries, TrainingRun, TrainingRunDetail } from "../../api/types";
import { ProgressBar } from "../../components/charts";
import { Link } from "../../components/Link";
import { LineChart, type LineSeries } from "../../components/LineChart";
import { formatValue } from "../../components/scale";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { navigate } from "../../router";
import { defaultsLabel, olderDefaults } from "../defaults";
import { RunControls } from "../jobs/RunControls";
import { heldOutSplit } from "./guards";
import { column, emptySeries, lastStep, mergeSeries, seriesKeys, truncateSeries } from "./series";

export const LIVE_POLL_MS = 2000;
export const MODEL_KINDS = ["vtrajembed", "scout", "actpair"] as const;
const LIVE = new Set(["queued", "running"]);

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "–");
const pct = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? `${v.toFixed(1)}` : "–");

/** The snapshot to evaluate on by default: the newest of another split than the training one
 *  (dev before test), else any other snapshot; undefined when there is none. */
export function defaultEvalSnapshot(snapshots: Pick<Snapshot, "id" | "split">[], train: number | ""): number | undefined {
  const trainSplit = snapshots.find((s) => s.id === train)?.split;
  const others = snapshots.filter((s) => s.id !== train);
  for (const split of ["dev", "test"]) {
    const hit = others.find((s) => s.split === split && s.split !== trainSplit);
    if (hit) return hit.id;
  }
  return others.find((s) => s.split !== trainSplit)?.id ?? others[0]?.id;
}

function StartForm({ snapshots, onStarted }: { snapshots: Snapshot[]; onStarted: (run: TrainingRun) => void }) {
  const [snapshot, setSnapshot] = useState<number | "">(snapshots.find((s) => s.split === "train")?.id ?? snapshots[0]?.id ?? "");
  const [evalSnapshot, setEvalSnapshot] = useState<number | "">(() => defaultEvalSnapshot(snapshots, snapshot) ?? snapshot);
  const [evalOnTrainingOk, setEvalOnTrainingOk] = useState(false);
  const [incompleteOk, setIncompleteOk] = useState(false);
  const [heldOutOk, setHeldOutOk] = useState(false);
  const [kind, setKind] = useState<string>(MODEL_KINDS[0]);
  const [steps, setSteps] = useState("200");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  if (snapshots.length === 0) {
    return <p className="muted">Take a relation snapshot first (<Link to="/manage/snapshots">Snapshots</Link>): a run trains on a sealed one.</p>;
  }
  const split = (id: number | "") => snapshots.find((s) => s.id === id)?.split;
  const sameSnapshot = evalSnapshot !== "" && evalSnapshot === snapshot;
  const sameSplit = !sameSnapshot && evalSnapshot !== "" && split(evalSnapshot) === split(snapshot);
  // the server refuses these unless asked, and stamps the figures (train-split, incomplete)
  const onTrainingData = sameSnapshot || (evalSnapshot !== "" && split(evalSnapshot) === "train");
  const evalRecord = snapshots.find((s) => s.id === evalSnapshot);
  const incomplete = evalRecord !== undefined && evalRecord.split !== "train" && !evalRecord.complete;
  const heldOut = heldOutSplit(snapshots, snapshot); // training on dev or test data needs a confirmation
  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      const n = Number.parseInt(steps, 10);
      const run = await api.startTraining({
        snapshot: Number(snapshot), eval_snapshot: evalSnapshot === "" ? undefined : Number(evalSnapshot), model_kind: kind,
        config: Number.isFinite(n) ? { steps: n } : {},
        allow_train_split: onTrainingData && evalOnTrainingOk, allow_incomplete: incomplete && incompleteOk,
      });
      if (run) onStarted(run);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const label = (s: Snapshot) => `#${s.id} ${s.split}${s.name ? ` · ${s.name}` : ""}`;
  return (
    <form className="inline-form start-form" aria-label="Start a training run" onSubmit={(e) => { e.preventDefault(); void start(); }}>
      <label>
        Train on
        <select value={snapshot} onChange={(e) => {
          const id = Number(e.target.value);
          setSnapshot(id);
          setEvalSnapshot(defaultEvalSnapshot(snapshots, id) ?? id);
          setEvalOnTrainingOk(false);
          setHeldOutOk(false);
        }}>
          {snapshots.map((s) => <option key={s.id} value={s.id}>{label(s)}</option>)}
        </select>
      </label>
      <label>
        Evaluate on
        <select value={evalSnapshot} onChange={(e) => { setEvalSnapshot(Number(e.target.value)); setEvalOnTrainingOk(false); setIncompleteOk(false); }}>
          {snapshots.map((s) => <option key={s.id} value={s.id}>{label(s)}{s.id === snapshot ? " (the training snapshot)" : ""}</option>)}
        </select>
      </label>
      <label>
        Model
        <select value={kind} onChange={(e) => setKind(e.target.value)}>
          {MODEL_KINDS.map((k) => <option key={k} value={k}>{k}</option>)}
        </select>
      </label>
      <label>
        Steps
        <input type="text" inputMode="numeric" value={steps} onChange={(e) => setSteps(e.target.value)} size={6} />
      </label>
      <button type="submit" className="primary" disabled={busy || snapshot === "" || (onTrainingData && !evalOnTrainingOk) || (incomplete && !incompleteOk)
        || (heldOut !== null && !heldOutOk)}>Start training</button>
      {heldOut && (
        <div className="warning" role="alert">
          <strong>Snapshot #{snapshot} is of the {heldOut} split:</strong> a retriever trained on it has seen the queries
          the {heldOut} figures are scored with, so no {heldOut} evaluation of it measures retrieval of unseen queries.
          Train on a train snapshot, or{" "}
          <label className="check">
            <input type="checkbox" checked={heldOutOk} onChange={(e) => setHeldOutOk(e.target.checked)} />
            {" "}train on the {heldOut} snapshot anyway
          </label>
        </div>
      )}
      {sameSnapshot && (
        <div className="warning" role="alert">
          <strong>The evaluation snapshot is the training snapshot.</strong> Its scores would measure how well the
          model fits what it was trained on, not how it retrieves unseen queries.{" "}
          {snapshots.length > 1 ? "Choose another snapshot, or " : "Take a dev or test snapshot, or "}
          <label className="check">
            <input type="checkbox" checked={evalOnTrainingOk} onChange={(e) => setEvalOnTrainingOk(e.target.checked)} />
            {" "}evaluate on the training snapshot anyway (figures stamped train-split)
          </label>
        </div>
      )}
      {sameSplit && (
        <div className="warning" role="alert">
          Both snapshots are of the {split(snapshot)} split: the evaluation shares its queries with training.{" "}
          {onTrainingData && (
            <label className="check">
              <input type="checkbox" checked={evalOnTrainingOk} onChange={(e) => setEvalOnTrainingOk(e.target.checked)} />
              {" "}evaluate on training data anyway (figures stamped train-split)
            </label>
          )}
        </div>
      )}
      {incomplete && (
        <div className="warning" role="alert">
          <strong>Snapshot #{evalRecord.id} ({evalRecord.split}) is incomplete:</strong> some relations its galleries need are
          not verified yet, so its figures undercount.{" "}
          <label className="check">
            <input type="checkbox" checked={incompleteOk} onChange={(e) => setIncompleteOk(e.target.checked)} />
            {" "}evaluate on it anyway (figures stamped incomplete)
          </label>
        </div>
      )}
      {error !== null && <ErrorState error={error} title="The run was not started" />}
    </form>
  );
}

/** Why figures carry each stamp (workers.training.evaluation_stamps). */
export const STAMP_REASONS: Record<string, string> = {
  "train-split": "evaluated on training data: these figures measure fit, not retrieval",
  incomplete: "evaluated on an incomplete dev/test snapshot: some gallery relations are not verified",
  // workers.answer_guard: rendered videos described or reranked by the embedded heuristics
  "smoke-test": "world-aware heuristics on rendered scenes: a smoke test, not evidence",
};

/** The stamps figures must be read with ("train-split", "incomplete"), as badges with their reason. */
export function Stamps({ stamps }: { stamps: string[] | undefined }) {
  if (!stamps || stamps.length === 0) return null;
  return (
    <>
      {stamps.map((s) => <span key={s} className="badge stamp warning-text" title={STAMP_REASONS[s] ?? s}>{s}</span>)}
    </>
  );
}

export function TrainingRunsScreen() {
  const data = useAsync(async () => {
    const [runs, snapshots] = await Promise.all([api.trainingRuns(100), api.snapshots(200)]);
    return { runs: runs.results, snapshots: snapshots.results };
  }, [], 5000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error && !data.data) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what="training runs" />;
  const { runs, snapshots } = data.data;
  const splitOf = new Map(snapshots.map((s) => [s.id, s.split]));
  const older = olderDefaults(runs);
  return (
    <>
      <section aria-labelledby="start-training">
        <h2 id="start-training">Start a training run</h2>
        <StartForm snapshots={snapshots} onStarted={(run) => navigate(`/manage/training/${run.id}`)} />
      </section>
      {runs.length === 0 ? (
        <EmptyState title="No training runs yet"><p>Start one above, or with <code>manage.py train --snapshot ID --model vtrajembed</code>.</p></EmptyState>
      ) : (
        <table className="data">
          <caption>Training runs, newest first (refreshed every 5 s){older.size > 0 && " · † ran on older defaults than the newest run of its model"}</caption>
          <thead>
            <tr><th scope="col">run</th><th scope="col">model</th><th scope="col">snapshot</th><th scope="col">status</th><th scope="col">steps</th><th scope="col">T2Traj R@1</th><th scope="col">defaults</th><th scope="col">created</th></tr>
          </thead>
          <tbody>
            {runs.map((r) => {
              const t2 = (r.metrics.t2traj ?? {}) as Record<string, unknown>;
              return (
                <tr key={r.id}>
                  <td><Link to={`/manage/training/${r.id}`}>Run {r.id}</Link></td>
                  <td>{r.model_kind}</td>
                  <td>
                    #{r.snapshot} {splitOf.get(r.snapshot) ?? ""}
                    <span className="small muted"> · evaluated on {r.eval_snapshot && r.eval_snapshot !== r.snapshot ? `#${r.eval_snapshot} ${splitOf.get(r.eval_snapshot) ?? ""}` : <strong className="warning-text">its training snapshot</strong>}</span>
                  </td>
                  <td><StatusBadge status={r.status} /></td>
                  <td><ProgressBar value={r.progress} label={`Run ${r.id} steps`} /><span className="small muted">{r.steps_done} of {r.steps_total}</span></td>
                  <td>{pct(t2["R@1"])}<Stamps stamps={r.eval_stamps} /></td>
                  <td className="small" data-older-defaults={older.has(r.id) ? "true" : undefined}>
                    {defaultsLabel(r.defaults_version)}{older.has(r.id) && <span className="warning-text" title="older defaults than the newest run of its model"> †</span>}
                  </td>
                  <td>{when(r.created_at)}</td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </>
  );
}

/** A run and its series, polled for the new steps only while it is queued or running. */
function useLiveRun(runId: number) {
  const [run, setRun] = useState<TrainingRunDetail | null>(null);
  const [series, setSeries] = useState<StepSeries>(emptySeries);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  const held = useRef<StepSeries>(emptySeries());
  useEffect(() => {
    let live = true;
    let timer = 0;
    const ctrl = new AbortController();
    const poll = async () => {
      const after = lastStep(held.current);
      try {
        const r = await api.trainingRun(runId, after, ctrl.signal);
        if (!live) return;
        // A run that resumed from an earlier checkpoint computes the steps after it again.
        const base = r.steps_done < after ? truncateSeries(held.current, r.steps_done) : held.current;
        const from = Math.min(after, r.steps_done);
        const merged = from < after ? base : mergeSeries(base, r.series, after);
        held.current = merged;
        setSeries(merged);
        setRun(r);
        setError(null);
        if (LIVE.has(r.status) || from < after) timer = window.setTimeout(poll, from < after ? 0 : LIVE_POLL_MS);
      } catch (e) {
        if (!live || (e instanceof DOMException && e.name === "AbortError")) return;
        setError(e);
        timer = window.setTimeout(poll, LIVE_POLL_MS * 2);
      }
    };
    void poll();
    return () => {
      live = false;
      ctrl.abort();
      window.clearTimeout(timer);
    };
  }, [runId, tick]);
  return { run, series, error, version: tick, reload: () => setTick((t) => t + 1) };
}

const LOSS_KEYS = ["loss", "group", "t2v", "v2t", "siglip", "action", "ce", "consistency"];
const COUNT_KEYS = ["positives", "negatives", "cross_video_positives", "cross_video_negatives"];
const RATE_KEYS = ["zero_neg_row_rate", "zero_neg_col_rate"];
// rows L_group scores, L_bi-only rows (no within-video negative) and extra cross-video columns
const LAYOUT_KEYS = ["group_rows", "bi_only_rows", "cross_video_columns"];
const PALETTE = ["#1f5fd1", "#d1495b", "#2a9d8f", "#e9a23b", "#7b5ea7", "#3c8d2f", "#c2185b", "#546e7a"];

function seriesOf(s: StepSeries, keys: string[]): LineSeries[] {
  return keys.filter((k) => k in s).map((k, i) => ({ name: k, values: column(s, k), color: PALETTE[i % PALETTE.length] }));
}

function Curves({ series }: { series: StepSeries }) {
  const keys = seriesKeys(series);
  const numeric = keys.filter((k) => column(series, k).some((v) => typeof v === "number"));
  const shown = new Set([...LOSS_KEYS, ...COUNT_KEYS, ...RATE_KEYS, ...LAYOUT_KEYS, "lr"]);
  const other = numeric.filter((k) => !shown.has(k));
  const charts: { title: string; lines: LineSeries[]; yDomain?: [number, number] }[] = [
    { title: "Loss and its parts", lines: seriesOf(series, LOSS_KEYS) },
    { title: "Zero-negative row and column rates", lines: seriesOf(series, RATE_KEYS), yDomain: [0, 1] },
    { title: "Realized labels per batch", lines: seriesOf(series, COUNT_KEYS) },
    { title: "Group rows, L_bi-only rows and cross-video columns per batch", lines: seriesOf(series, LAYOUT_KEYS) },
    { title: "Learning rate", lines: seriesOf(series, ["lr"]) },
    ...other.map((k) => ({ title: k.replaceAll("_", " "), lines: seriesOf(series, [k]) })),
  ];
  return (
    <div className="charts">
      {charts.filter((c) => c.lines.length > 0).map((c) => (
        <LineChart key={c.title} title={c.title} x={series.step} series={c.lines} yDomain={c.yDomain} />
      ))}
    </div>
  );
}

const PROTOCOLS: [string, string][] = [["t2traj", "T2Traj (query → its video's pool)"], ["traj2t", "Traj2T (trajectory → queries)"],
  ["ocvr", "OCVR (query → videos)"], ["random", "Random ranking (expected T2Traj)"]];
const FIGURES = ["R@1", "R@3", "R@5", "R@10", "mAP", "mAP@10", "n_queries"];

export function MetricsTable({ metrics, caption }: { metrics: Record<string, unknown>; caption: string }) {
  const rows = PROTOCOLS.filter(([k]) => metrics[k] && typeof metrics[k] === "object");
  if (rows.length === 0) return <p className="muted">No evaluation figures yet.</p>;
  const strata = ((metrics.t2traj ?? {}) as Record<string, unknown>).strata as Record<string, Record<string, unknown>> | undefined;
  return (
    <>
      <table className="data metrics">
        <caption>{caption}</caption>
        <thead><tr><th scope="col">protocol</th>{FIGURES.map((f) => <th key={f} scope="col">{f === "n_queries" ? "queries" : f}</th>)}</tr></thead>
        <tbody>
          {rows.map(([k, name]) => {
            const m = metrics[k] as Record<string, unknown>;
            return (
              <tr key={k}>
                <th scope="row">{name}</th>
                {FIGURES.map((f) => <td key={f}>{f === "n_queries" ? String(m[f] ?? "–") : pct(m[f])}</td>)}
              </tr>
            );
          })}
        </tbody>
      </table>
      {strata && Object.keys(strata).length > 0 && (
        <table className="data metrics">
          <caption>T2Traj by pool size</caption>
          <thead><tr><th scope="col">pool size</th><th scope="col">R@1</th><th scope="col">R@3</th><th scope="col">mAP</th><th scope="col">queries</th></tr></thead>
          <tbody>
            {Object.entries(strata).map(([size, m]) => (
              <tr key={size}><th scope="row">{size}</th><td>{pct(m["R@1"])}</td><td>{pct(m["R@3"])}</td><td>{pct(m.mAP)}</td><td>{String(m.n_queries ?? "–")}</td></tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

/** The run's other evaluation runs (on other snapshots; the final one is shown above), read again
 *  whenever the run's status changes or the screen is refreshed. */
function Evaluations({ runId, status, final, version }: { runId: number; status: string; final: number | null; version: number }) {
  const evals = useAsync(() => api.evaluationRuns({ training_run: runId }), [runId, status, version], 10000);
  if (evals.error || !evals.data) return null;
  const rows: EvaluationRun[] = evals.data.results.filter((e) => e.id !== final);
  if (rows.length === 0) return null;
  return (
    <section aria-label="Other evaluation runs">
      <h2>Other evaluations</h2>
      {rows.map((e) => (
        <MetricsTable key={e.id} metrics={e.metrics}
          caption={`Evaluation ${e.id} on snapshot #${e.snapshot} · ${e.status}${e.stamps.length ? ` · stamped ${e.stamps.join(", ")}` : ""}${e.error ? ` · ${e.error}` : ""}`} />
      ))}
    </section>
  );
}

export function TrainingRunScreen({ runId }: { runId: number }) {
  const { run, series, error, version, reload } = useLiveRun(runId);
  const [cancelError, setCancelError] = useState<unknown>(null);
  useShortcutList([{ id: "manager.refresh", handler: reload }]);
  if (error && !run) return <ErrorState error={error} onRetry={reload} />;
  if (!run) return <Loading what={`training run ${runId}`} />;
  const live = LIVE.has(run.status);
  const cancel = async () => {
    setCancelError(null);
    try {
      await api.cancelTraining(run.id);
      reload();
    } catch (e) {
      setCancelError(e);
    }
  };
  const cfg = run.config as Record<string, unknown>;
  const result = run.result as Record<string, unknown>;
  return (
    <div className="training-run">
      <dl className="tiles">
        <div><dt>status</dt><dd><StatusBadge status={run.status} /></dd>
          <dd className="muted small">{live ? `live, refreshed every ${LIVE_POLL_MS / 1000} s` : `finished ${when(run.finished_at)}`}</dd></div>
        <div><dt>steps</dt><dd>{run.steps_done} / {run.steps_total}</dd><dd><ProgressBar value={run.progress} label={`Run ${run.id} steps`} /></dd></div>
        <div><dt>model</dt><dd>{run.model_kind}</dd><dd className="muted small">snapshot #{run.snapshot}{run.eval_snapshot && run.eval_snapshot !== run.snapshot
          ? `, evaluated on #${run.eval_snapshot}` : <>, <strong className="warning-text">evaluated on its training snapshot</strong></>}</dd></div>
        <div><dt>batch · lr · seed</dt><dd>{String(cfg.batch_size ?? "–")} · {String(cfg.lr ?? "–")} · {String(cfg.seed ?? "–")}</dd>
          <dd className="muted small">{run.resumes.length ? `resumed ${run.resumes.map((r) => `from step ${r.from_step}`).join(", ")}` : "no resumes"}</dd></div>
        {typeof result.n_groups === "number" && (
          <div><dt>queries: groups · L_bi-only · excluded</dt>
            <dd>{String(result.n_groups)} · {String(result.n_bi_only_queries ?? "–")} · {String(result.excluded_queries ?? "–")}</dd>
            <dd className="muted small">{String(result.n_cross_video_queries ?? "–")} with cross-video columns</dd></div>
        )}
        {"zero_neg_row_rate" in result && (
          <div><dt>zero-negative rows · columns</dt><dd>{formatValue(result.zero_neg_row_rate as number)} · {formatValue(result.zero_neg_col_rate as number)}</dd>
            <dd className="muted small">over the whole run</dd></div>
        )}
      </dl>
      {run.error && <p className="error-inline" role="alert">{run.error}</p>}
      {live && (
        <p>
          <button type="button" onClick={() => void cancel()} disabled={run.cancel_requested}
            title="Stop the run at its next step, after a checkpoint (it can be queued again)">
            {run.cancel_requested ? "Cancel requested: stops after its next checkpoint" : "Cancel the run"}
          </button>
        </p>
      )}
      {!live && run.job && (run.status === "failed" || run.status === "cancelled") && (
        <p><RunControls jobId={run.job.id} status={run.status} label={`training run ${run.id}`} onDone={reload} /></p>
      )}
      {cancelError !== null && <ErrorState error={cancelError} title="The run was not cancelled" />}
      {error !== null && <p className="error-inline" role="alert">Refreshing failed; showing the last figures.</p>}
      {series.step.length === 0 ? (
        <EmptyState title={live ? "No steps yet" : "This run recorded no steps"}>
          <p>{live ? "The curves appear with the first steps the worker reports." : "Nothing was trained."}</p>
        </EmptyState>
      ) : (
        <Curves series={series} />
      )}
      <section aria-label="Evaluation">
        <h2>Evaluation</h2>
        <Stamps stamps={run.eval_stamps} />
        <MetricsTable metrics={run.metrics} caption={`Final evaluation of run ${run.id} (percent)${run.eval_stamps.length ? ` · stamped ${run.eval_stamps.join(", ")}` : ""}`} />
      </section>
      <Evaluations runId={run.id} status={run.status} final={run.evaluation} version={version} />
      <details>
        <summary>Configuration</summary>
        <pre className="log">{JSON.stringify({ config: run.config, launch: run.launch, result: run.result }, null, 2)}</pre>
      </details>
    </div>
  );
}
