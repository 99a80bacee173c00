// What the Experiments screens show, as plain functions: the grid a create form sends, the cells
// in grid order and which actions they allow, and the result table (models/experiments/table.py)
// picked by task and stratum and written as "mean ± std" and "Δ −3.2 [−5.1, −1.4]" in percent.

import type {
  ExperimentCell,
  ExperimentMetric,
  ExperimentPreset,
  ExperimentResult,
  ExperimentTableRow,
  ExperimentTask,
} from "../../api/types";
import { count } from "../../components/plural";

export { defaultsLabel } from "../defaults";

export const TASKS: readonly { id: ExperimentTask; label: string }[] = [
  { id: "t2traj", label: "T2Traj" },
  { id: "traj2t", label: "Traj2T" },
  { id: "ocvr", label: "OCVR" },
];
export const METRICS: readonly ExperimentMetric[] = ["R@1", "R@3", "mAP"];
const MINUS = "\u2212";
const ENDED = new Set(["succeeded", "failed", "cancelled"]);

// -- the create form ------------------------------------------------------------------------------
/** Seeds from a comma (or space) separated list: whole numbers only; the server checks the rest
 *  (repeats, how many). */
export function parseSeeds(text: string): { seeds: number[] } | { error: string } {
  const parts = text.split(/[\s,]+/).filter(Boolean);
  if (parts.length === 0) return { error: "Give at least one seed (e.g. 0, 1, 2)." };
  const bad = parts.filter((p) => !/^\d+$/.test(p));
  if (bad.length) return { error: `Seeds are whole numbers ≥ 0, separated by commas: not ${bad.map((b) => `“${b}”`).join(", ")}.` };
  return { seeds: parts.map(Number) };
}

/** The variants sent for a preset: the reference first (always run), then the chosen ones in the
 *  preset's order. */
export function chosenVariants(preset: Pick<ExperimentPreset, "reference" | "variants">, chosen: ReadonlySet<string>): string[] {
  return [preset.reference, ...Object.keys(preset.variants).filter((v) => v !== preset.reference && chosen.has(v))];
}

/** The `grid` of POST /api/experiments/: a preset, its chosen variants, the seeds and the base
 *  steps (left to the preset's default when blank). A steps text that is not a whole number is
 *  sent as it is, so the server names the problem. */
export function experimentGrid(preset: Pick<ExperimentPreset, "name" | "reference" | "variants">, chosen: ReadonlySet<string>,
  seeds: number[], steps: string): Record<string, unknown> {
  const text = steps.trim();
  const base = text === "" ? {} : { steps: /^\d+$/.test(text) ? Number(text) : text };
  return { preset: preset.name, variants: chosenVariants(preset, chosen), seeds, base };
}

// -- cells ----------------------------------------------------------------------------------------
/** Cells in grid order: variants as declared (unknown ones last, by name), then seeds. */
export function sortCells<C extends Pick<ExperimentCell, "variant" | "seed" | "id">>(cells: readonly C[], variants: readonly string[]): C[] {
  const rank = (v: string) => {
    const i = variants.indexOf(v);
    return i < 0 ? variants.length : i;
  };
  return [...cells].sort((a, b) => rank(a.variant) - rank(b.variant) || a.variant.localeCompare(b.variant)
    || (a.seed ?? -1) - (b.seed ?? -1) || a.id - b.id);
}

/** What the experiment's cells allow: cancel while any has not ended, resume once any failed or
 *  was cancelled (the server answers 409 otherwise). */
export function cellActions(cells: readonly Pick<ExperimentCell, "status">[]): { cancel: boolean; resume: boolean; open: number } {
  const open = cells.filter((c) => !ENDED.has(c.status)).length;
  return { open, cancel: open > 0, resume: cells.some((c) => c.status === "failed" || c.status === "cancelled") };
}

/** A cell's share of its steps (0..1). */
export function cellProgress(cell: Pick<ExperimentCell, "steps_done" | "steps_total" | "status">): number {
  if (cell.status === "succeeded") return 1;
  return cell.steps_total > 0 ? Math.min(1, cell.steps_done / cell.steps_total) : 0;
}

// -- provenance -----------------------------------------------------------------------------------
export function shortSha(sha: string | undefined | null, n = 12): string {
  return sha ? sha.slice(0, n) : "–";
}

/** The commit the experiment was queued from, short, "+ local changes" when the tree was dirty. */
export function codeCommit(version: Record<string, unknown> | undefined): string {
  const commit = typeof version?.trajlab_commit === "string" ? version.trajlab_commit : "";
  if (!commit) return "unknown";
  return `${commit.slice(0, 10)}${version?.trajlab_dirty ? " + local changes" : ""}`;
}

// -- the result table -----------------------------------------------------------------------------
const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);

/** A percent figure with one decimal and a real minus sign; "–" for none. */
export function fmt(v: number | null | undefined): string {
  if (!finite(v)) return "–";
  const text = Math.abs(v).toFixed(1);
  return v < 0 && Number(text) !== 0 ? `${MINUS}${text}` : text;
}

/** A difference: "+1.2", "−3.2", "0.0". */
export function signed(v: number | null | undefined): string {
  if (!finite(v)) return "–";
  const text = fmt(v);
  return text.startsWith(MINUS) || Number(Math.abs(v).toFixed(1)) === 0 ? text : `+${text}`;
}

/** "62.5 ± 3.1" over seeds; one seed (or no spread computed) says so instead of "± 0.0". */
export function meanStd(row: Pick<ExperimentTableRow, "mean" | "std" | "n_seeds"> | undefined): string {
  if (!row || !finite(row.mean)) return "–";
  if (row.n_seeds === 1) return `${fmt(row.mean)} (1 seed, no spread)`;
  if (!finite(row.std)) return `${fmt(row.mean)} (no spread)`;
  return `${fmt(row.mean)} ± ${fmt(row.std)}`;
}

/** "Δ −3.2 [−5.1, −1.4]" against the reference, or null for the reference and for a variant
 *  without a difference. */
export function deltaText(row: Pick<ExperimentTableRow, "reference" | "delta" | "low" | "high"> | undefined): string | null {
  if (!row || row.reference || !finite(row.delta)) return null;
  const interval = finite(row.low) && finite(row.high) ? ` [${signed(row.low)}, ${signed(row.high)}]` : "";
  return `Δ ${signed(row.delta)}${interval}`;
}

/** The hierarchical interval (seeds, then queries) of a compared variant: "seeds+queries [−8.1, +1.4]",
 *  or why there is none ("seeds+queries n/a: needs at least 2 paired seeds, has 1: ..."); null for
 *  the reference, a variant without a difference and a table made before the interval existed. */
export function hierText(row: Pick<ExperimentTableRow, "reference" | "delta" | "hier_low" | "hier_high" | "hier_note"> | undefined): string | null {
  if (!row || row.reference || !finite(row.delta) || row.hier_low === undefined) return null;
  if (finite(row.hier_low) && finite(row.hier_high)) return `seeds+queries [${signed(row.hier_low)}, ${signed(row.hier_high)}]`;
  return `seeds+queries n/a${row.hier_note ? `: ${row.hier_note}` : ""}`;
}

/** Whether the bootstrap interval of the difference lies wholly on one side of 0. */
export function excludesZero(row: Pick<ExperimentTableRow, "reference" | "low" | "high"> | undefined): boolean {
  return !!row && !row.reference && finite(row.low) && finite(row.high) && (row.low > 0 || row.high < 0);
}

export function formatP(p: number | null | undefined): string {
  if (!finite(p)) return "p –";
  return p < 0.001 ? "p < 0.001" : `p = ${p.toFixed(3)}`;
}

/** The tooltip of a figure: each seed's value, and for a compared variant the p-value, the
 *  paired queries and the interval's confidence. */
export function cellTitle(row: ExperimentTableRow | undefined, reference: string, confidence = 0.95): string {
  if (!row) return "";
  const seeds = row.n_seeds === 0 ? "no finished seed"
    : `seed ${row.seeds.map((s, i) => `${s}: ${fmt(row.values[i])}`).join(", ")}`;
  const defaults = row.older_defaults && row.defaults ? ` · older defaults: ${row.defaults.join(", ")}` : "";
  if (row.reference) return `${seeds} · the reference${defaults}`;
  const pct = Math.round(confidence * 100);
  return `${seeds} · ${formatP(row.p_value)} · ${count(row.n_queries, "query")} paired with ${reference} · ${pct}% paired-bootstrap interval over queries${defaults}`;
}

export function taskLabel(task: string): string {
  return TASKS.find((t) => t.id === task)?.label ?? task;
}

export function stratumLabel(stratum: string): string {
  return stratum === "all" ? "all queries" : `pool size ${stratum}`;
}

/** Whether any variant has a finished seed (before that the table holds only empty rows). */
export function hasFigures(result: Partial<ExperimentResult>): boolean {
  return (result.tables ?? []).some((b) => b.rows.some((r) => r.n_seeds > 0));
}

/** The strata the table holds for a task, in its order ("all" first). */
export function strataOf(result: Partial<ExperimentResult>, task: string): string[] {
  const out: string[] = [];
  for (const b of result.tables ?? []) if (b.task === task && !out.includes(b.stratum)) out.push(b.stratum);
  return out;
}

export interface ResultRow {
  variant: string;
  reference: boolean;
  n_seeds: number;
  cells: Partial<Record<ExperimentMetric, ExperimentTableRow>>;
}

/** The rows of one task and stratum: one per variant (the table's order), a cell per metric. */
export function resultRows(result: Partial<ExperimentResult>, task: string, stratum: string): ResultRow[] {
  const rows = new Map<string, ResultRow>();
  for (const v of result.variants ?? []) rows.set(v, { variant: v, reference: v === result.reference, n_seeds: 0, cells: {} });
  for (const block of result.tables ?? []) {
    if (block.task !== task || block.stratum !== stratum) continue;
    for (const r of block.rows) {
      const row = rows.get(r.variant) ?? { variant: r.variant, reference: r.reference, n_seeds: 0, cells: {} };
      row.cells[block.metric] = r;
      row.n_seeds = Math.max(row.n_seeds, r.n_seeds);
      row.reference = r.reference;
      rows.set(r.variant, row);
    }
  }
  return [...rows.values()];
}

/** The task and stratum to show: the asked ones when the table has them, else the first. */
export function pickView(result: Partial<ExperimentResult>, task: string, stratum: string): { task: ExperimentTask; stratum: string } {
  const tasks = TASKS.map((t) => t.id).filter((t) => strataOf(result, t).length > 0);
  const t = (tasks.includes(task as ExperimentTask) ? task : tasks[0] ?? "t2traj") as ExperimentTask;
  const strata = strataOf(result, t);
  return { task: t, stratum: strata.includes(stratum) ? stratum : strata[0] ?? "all" };
}
