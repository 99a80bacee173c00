// A training run's per-step series as the live curves hold it: the API answers columns
// (`{step: [...], loss: [...], ...}`) from a step on (`?after=`), so a screen polls for the new
// steps only and appends them. A run that resumed from an earlier checkpoint rewrites the steps
// after it, so the kept series is cut back to what the run reports done before appending.

import type { StepSeries } from "../../api/types";

export function emptySeries(): StepSeries {
  return { step: [] } as unknown as StepSeries;
}

/** The last step held (0 when none). */
export function lastStep(s: StepSeries): number {
  return s.step.length ? s.step[s.step.length - 1] : 0;
}

/** The columns other than `step` and `attempt`. */
export function seriesKeys(s: StepSeries): string[] {
  return Object.keys(s).filter((k) => k !== "step" && k !== "attempt");
}

/** Only the steps up to `upTo` (inclusive). */
export function truncateSeries(s: StepSeries, upTo: number): StepSeries {
  let n = 0;
  while (n < s.step.length && s.step[n] <= upTo) n++;
  if (n === s.step.length) return s;
  const out: Record<string, (number | null)[]> = {};
  for (const [k, v] of Object.entries(s)) out[k] = v.slice(0, n);
  return out as StepSeries;
}

/** `held` up to step `after`, then every step of `incoming` after it. Columns that only one side
 *  has are filled with null on the other, so every column keeps the length of `step`. */
export function mergeSeries(held: StepSeries, incoming: StepSeries, after: number): StepSeries {
  const base = truncateSeries(held, after);
  const keep = incoming.step.map((st, i) => (st > after ? i : -1)).filter((i) => i >= 0);
  if (keep.length === 0) return base;
  const keys = [...new Set([...Object.keys(base), ...Object.keys(incoming)])];
  const n = base.step.length;
  const out: Record<string, (number | null)[]> = {};
  for (const k of keys) {
    const a = (base as Record<string, (number | null)[]>)[k] ?? new Array<number | null>(n).fill(null);
    const b = (incoming as Record<string, (number | null)[]>)[k];
    out[k] = [...a, ...keep.map((i) => (b ? (b[i] ?? null) : null))];
  }
  return out as StepSeries;
}

/** One column (null-filled when the trainer never reported it). */
export function column(s: StepSeries, key: string): (number | null)[] {
  const v = (s as Record<string, (number | null)[]>)[key];
  return v ?? new Array<number | null>(s.step.length).fill(null);
}

/** The most recent finite value of a column, or null. */
export function latest(s: StepSeries, key: string): number | null {
  const v = column(s, key);
  for (let i = v.length - 1; i >= 0; i--) {
    const x = v[i];
    if (typeof x === "number" && Number.isFinite(x)) return x;
  }
  return null;
}
