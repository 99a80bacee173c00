// An experiment's result table for one task and stratum: a row per variant, a column per metric,
// each figure "mean ± std" over seeds and, for the compared variants, the difference from the
// reference with its paired-bootstrap interval over queries (marked when it excludes 0) and the
// hierarchical interval over seeds, then queries. A table whose seeds ran on different defaults
// versions says so, and marks the rows with a seed on older ones.

import { useState } from "react";
import type { ExperimentResult } from "../../api/types";
import {
  cellTitle,
  deltaText,
  excludesZero,
  hasFigures,
  hierText,
  meanStd,
  METRICS,
  pickView,
  resultRows,
  strataOf,
  stratumLabel,
  TASKS,
  taskLabel,
} from "./table";
import { count } from "../../components/plural";

export function ResultTable({ result, experimentId }: { result: Partial<ExperimentResult>; experimentId: number }) {
  const [asked, setAsked] = useState<{ task: string; stratum: string }>({ task: "t2traj", stratum: "all" });
  if (!hasFigures(result)) {
    return <p className="muted">No figures yet: the table appears when a cell has finished and been evaluated.</p>;
  }
  const view = pickView(result, asked.task, asked.stratum);
  const strata = strataOf(result, view.task);
  const rows = resultRows(result, view.task, view.stratum);
  const reference = result.reference ?? "";
  const pct = Math.round((result.confidence ?? 0.95) * 100);
  const defaults = result.defaults;
  return (
    <div className="experiment-result">
      {defaults?.note && (
        <p className={defaults.mixed ? "warning defaults-mixed" : "muted small defaults-note"} role={defaults.mixed ? "status" : undefined}>
          {defaults.note}{defaults.mixed && " († marks them)."}
        </p>
      )}
      <div className="filters">
        <div role="group" aria-label="Task" className="segmented">
          {TASKS.map((t) => (
            <button key={t.id} type="button" aria-pressed={view.task === t.id} disabled={strataOf(result, t.id).length === 0}
              onClick={() => setAsked({ task: t.id, stratum: view.stratum })}>
              {t.label}
            </button>
          ))}
        </div>
        <label>
          Stratum
          <select value={view.stratum} onChange={(e) => setAsked({ task: view.task, stratum: e.target.value })}>
            {strata.map((s) => <option key={s} value={s}>{stratumLabel(s)}</option>)}
          </select>
        </label>
      </div>
      <table className="data experiment-table">
        <caption>
          {taskLabel(view.task)} · {stratumLabel(view.stratum)} · experiment {experimentId} (percent: mean ± std over seeds;
          Δ from {reference} with {pct}% intervals: paired bootstrap over queries, then seeds+queries hierarchical)
        </caption>
        <thead>
          <tr><th scope="col">variant</th><th scope="col">seeds</th>{METRICS.map((m) => <th key={m} scope="col">{m}</th>)}</tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.variant} className={r.reference ? "reference" : undefined}
              data-older-defaults={METRICS.some((m) => r.cells[m]?.older_defaults) ? "true" : undefined}>
              <th scope="row">{r.variant}{METRICS.some((m) => r.cells[m]?.older_defaults) &&
                <span className="older-defaults" title="a seed ran on older defaults"> †</span>}
                {r.reference && <span className="badge">reference</span>}</th>
              <td>{r.n_seeds}</td>
              {METRICS.map((m) => {
                const cell = r.cells[m];
                const delta = deltaText(cell);
                const hier = hierText(cell);
                const sig = excludesZero(cell);
                return (
                  <td key={m} title={cellTitle(cell, reference, result.confidence)} data-metric={m}
                    data-excludes-zero={cell && !cell.reference ? String(sig) : undefined}>
                    <div className="mean-std">{meanStd(cell)}</div>
                    {delta && (
                      <div className={sig ? "delta excludes-zero" : "delta"}>
                        {delta}{sig && <span className="sig-mark" aria-label="interval excludes 0"> *</span>}
                      </div>
                    )}
                    {hier && <div className="hier-interval small muted">{hier}</div>}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
      <p className="muted small">
        <span className="delta excludes-zero">* bold</span>: the interval over queries excludes 0 (it averages the seeds
        first, so it does not see training noise; the seeds+queries interval resamples seeds too and needs at least two).
        Hover a figure for each seed's value, the p-value and the queries paired.{" "}
        {result.n_resamples ? `${count(result.n_resamples, "resample")}.` : ""}
      </p>
    </div>
  );
}
