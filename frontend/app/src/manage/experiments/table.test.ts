import { describe, expect, it } from "vitest";
import type { ExperimentCell, ExperimentResult, ExperimentTableRow } from "../../api/types";
import {
  cellActions,
  cellProgress,
  cellTitle,
  chosenVariants,
  codeCommit,
  defaultsLabel,
  deltaText,
  excludesZero,
  experimentGrid,
  fmt,
  hasFigures,
  formatP,
  hierText,
  meanStd,
  parseSeeds,
  pickView,
  resultRows,
  shortSha,
  signed,
  sortCells,
  strataOf,
} from "./table";

const row = (over: Partial<ExperimentTableRow>): ExperimentTableRow => ({
  variant: "full", reference: false, n_seeds: 3, seeds: [0, 1, 2], values: [60, 62, 64], mean: 62, std: 2,
  delta: null, low: null, high: null, p_value: null, n_queries: 40, ...over,
});

const PRESET = { name: "vtrajembed-table3", reference: "full",
  variants: { full: {}, without_slow: { model: { use_slow: false } }, without_fast: {}, obs16: {} } };

describe("numbers", () => {
  it("writes percent with one decimal and a real minus sign", () => {
    expect(fmt(62.46)).toBe("62.5");
    expect(fmt(-3.21)).toBe("\u22123.2");
    expect(fmt(-0.04)).toBe("0.0");
    expect(fmt(null)).toBe("–");
    expect(fmt(Number.NaN)).toBe("–");
    expect(signed(1.25)).toBe("+1.3");
    expect(signed(-5.1)).toBe("\u22125.1");
    expect(signed(0.01)).toBe("0.0");
  });

  it("writes mean ± std, and a dash for a variant without a finished seed", () => {
    expect(meanStd(row({ mean: 62.5, std: 3.14 }))).toBe("62.5 ± 3.1");
    expect(meanStd(row({ mean: 62.5, std: 0 }))).toBe("62.5 ± 0.0"); // three seeds that agree: a spread of 0
    expect(meanStd(row({ mean: null, std: null }))).toBe("–");
  });

  it("says a single seed has no spread instead of writing ± 0.0 (issue 27, finding 14)", () => {
    expect(meanStd(row({ mean: 50, std: 0, n_seeds: 1, seeds: [0], values: [50] }))).toBe("50.0 (1 seed, no spread)");
    expect(meanStd(row({ mean: 50, std: null, n_seeds: 1, seeds: [0], values: [50] }))).toBe("50.0 (1 seed, no spread)");
    expect(meanStd(row({ mean: 50, std: null }))).toBe("50.0 (no spread)");
    expect(meanStd(undefined)).toBe("–");
  });

  it("writes the difference with its bootstrap interval, not for the reference", () => {
    expect(deltaText(row({ delta: -3.2, low: -5.1, high: -1.4 }))).toBe("Δ \u22123.2 [\u22125.1, \u22121.4]");
    expect(deltaText(row({ delta: 0.8, low: -1.0, high: 2.6 }))).toBe("Δ +0.8 [\u22121.0, +2.6]");
    expect(deltaText(row({ delta: 1, low: null, high: null }))).toBe("Δ +1.0");
    expect(deltaText(row({ reference: true, delta: null }))).toBeNull();
    expect(deltaText(row({ delta: null }))).toBeNull();
  });

  it("marks an interval that excludes 0 on either side", () => {
    expect(excludesZero(row({ low: -5.1, high: -1.4 }))).toBe(true);
    expect(excludesZero(row({ low: 0.2, high: 3 }))).toBe(true);
    expect(excludesZero(row({ low: -1, high: 2.6 }))).toBe(false);
    expect(excludesZero(row({ low: 0, high: 2 }))).toBe(false); // touching 0 does not exclude it
    expect(excludesZero(row({ reference: true, low: 1, high: 2 }))).toBe(false);
    expect(excludesZero(row({ low: null, high: null }))).toBe(false);
  });

  it("says the p-value, the paired queries and each seed in the tooltip", () => {
    const t = cellTitle(row({ variant: "obs16", delta: -2, low: -3, high: -1, p_value: 0.0123, n_queries: 48 }), "full", 0.95);
    expect(t).toBe("seed 0: 60.0, 1: 62.0, 2: 64.0 · p = 0.012 · 48 queries paired with full · 95% paired-bootstrap interval over queries");
    const older = row({ reference: true, older_defaults: true, defaults: ["vtrajembed v1, train v1", "vtrajembed v2, train v1"] });
    expect(cellTitle(older, "full")).toMatch(/the reference · older defaults: vtrajembed v1, train v1, vtrajembed v2, train v1$/);
    expect(cellTitle(row({ reference: true }), "full")).toContain("the reference");
    expect(cellTitle(row({ n_seeds: 0, seeds: [], values: [] }), "full")).toMatch(/^no finished seed/);
    expect(formatP(0.0004)).toBe("p < 0.001");
    expect(formatP(null)).toBe("p –");
  });
});

describe("the hierarchical interval and the defaults versions", () => {
  it("writes the seeds-then-queries interval, or why there is none", () => {
    expect(hierText(row({ delta: -2, hier_low: -8.14, hier_high: 1.42, hier_note: null }))).toBe("seeds+queries [\u22128.1, +1.4]");
    expect(hierText(row({ delta: -2, hier_low: null, hier_high: null,
      hier_note: "needs at least 2 paired seeds, has 1: no seed-level interval" })))
      .toBe("seeds+queries n/a: needs at least 2 paired seeds, has 1: no seed-level interval");
    expect(hierText(row({ reference: true, delta: null, hier_low: null }))).toBeNull();
    expect(hierText(row({ delta: -2 }))).toBeNull();            // a table from before the interval
  });
  it("names a defaults record as the tables do", () => {
    expect(defaultsLabel({ model_kind: "scout", model: 2, train: 1, commit: "abc" })).toBe("scout v2, train v1");
    expect(defaultsLabel({})).toBe("unrecorded");
    expect(defaultsLabel({ model_kind: "scout", model: 2, train: 1, resumed_over: { model_kind: "scout", model: 1, train: 1 } }))
      .toBe("scout v2, train v1 resumed over scout v1, train v1");
  });
});

describe("the create form", () => {
  it("reads seeds from a comma list", () => {
    expect(parseSeeds("0,1,2")).toEqual({ seeds: [0, 1, 2] });
    expect(parseSeeds(" 3, 5 7 ")).toEqual({ seeds: [3, 5, 7] });
    expect(parseSeeds("")).toHaveProperty("error");
    expect(parseSeeds("0, -1, x")).toEqual({ error: "Seeds are whole numbers ≥ 0, separated by commas: not “-1”, “x”." });
  });

  it("always runs the reference, first, and keeps the preset's order", () => {
    expect(chosenVariants(PRESET, new Set(["obs16", "without_slow"]))).toEqual(["full", "without_slow", "obs16"]);
    expect(chosenVariants(PRESET, new Set())).toEqual(["full"]);
    expect(chosenVariants(PRESET, new Set(["full", "nonsense"]))).toEqual(["full"]);
  });

  it("builds the grid the API takes", () => {
    expect(experimentGrid(PRESET, new Set(["without_fast"]), [0, 1], "200")).toEqual({
      preset: "vtrajembed-table3", variants: ["full", "without_fast"], seeds: [0, 1], base: { steps: 200 } });
    expect(experimentGrid(PRESET, new Set(), [0], " ").base).toEqual({});
    expect(experimentGrid(PRESET, new Set(), [0], "2e3").base).toEqual({ steps: "2e3" }); // the server says why
  });
});

describe("cells", () => {
  const cell = (id: number, variant: string, seed: number, status: ExperimentCell["status"] = "queued"): ExperimentCell =>
    ({ id, variant, seed, training_run: 100 + id, evaluation: null, pipeline: {}, status, steps_done: 0, steps_total: 10,
       error: "" });

  it("sorts by the grid's variants, then seeds", () => {
    const cells = [cell(6, "obs16", 1), cell(1, "full", 1), cell(4, "obs16", 0), cell(2, "full", 0), cell(9, "other", 0)];
    expect(sortCells(cells, ["full", "obs16"]).map((c) => c.id)).toEqual([2, 1, 4, 6, 9]);
  });

  it("allows cancel while a cell has not ended and resume once one failed or was cancelled", () => {
    expect(cellActions([cell(1, "full", 0, "running"), cell(2, "full", 1, "succeeded")])).toEqual({ open: 1, cancel: true, resume: false });
    expect(cellActions([cell(1, "full", 0, "cancelled"), cell(2, "full", 1, "succeeded")])).toEqual({ open: 0, cancel: false, resume: true });
    expect(cellActions([cell(1, "full", 0, "failed"), cell(2, "full", 1, "queued")])).toEqual({ open: 1, cancel: true, resume: true });
    expect(cellActions([cell(1, "full", 0, "succeeded")])).toEqual({ open: 0, cancel: false, resume: false });
  });

  it("reads progress from the steps, whole once succeeded", () => {
    expect(cellProgress({ steps_done: 5, steps_total: 20, status: "running" })).toBe(0.25);
    expect(cellProgress({ steps_done: 0, steps_total: 20, status: "succeeded" })).toBe(1);
    expect(cellProgress({ steps_done: 3, steps_total: 0, status: "queued" })).toBe(0);
  });

  it("shortens hashes and the commit", () => {
    expect(shortSha("abcdef0123456789")).toBe("abcdef012345");
    expect(shortSha("")).toBe("–");
    expect(codeCommit({ trajlab_commit: "0123456789abcdef", trajlab_dirty: true })).toBe("0123456789 + local changes");
    expect(codeCommit({ trajlab_commit: "0123456789abcdef", trajlab_dirty: false })).toBe("0123456789");
    expect(codeCommit({})).toBe("unknown");
  });
});

describe("the result table", () => {
  const block = (task: string, metric: string, stratum: string, rows: ExperimentTableRow[]) =>
    ({ task, metric, stratum, rows }) as ExperimentResult["tables"][number];
  const result: Partial<ExperimentResult> = {
    reference: "full", variants: ["full", "obs16", "empty"], confidence: 0.95,
    tables: [
      block("t2traj", "R@1", "all", [row({ variant: "full", reference: true }), row({ variant: "obs16", mean: 50, delta: -12 }),
        row({ variant: "empty", n_seeds: 0, mean: null })]),
      block("t2traj", "mAP", "all", [row({ variant: "full", reference: true, mean: 70 }), row({ variant: "obs16", mean: 65 })]),
      block("t2traj", "R@1", "2", [row({ variant: "full", reference: true, mean: 90 })]),
      block("t2traj", "R@1", "3-5", [row({ variant: "full", reference: true, mean: 40 })]),
      block("ocvr", "R@1", "all", [row({ variant: "full", reference: true, mean: 20 })]),
    ],
  };

  it("lists a task's strata in the table's order", () => {
    expect(strataOf(result, "t2traj")).toEqual(["all", "2", "3-5"]);
    expect(strataOf(result, "traj2t")).toEqual([]);
    expect(strataOf({}, "t2traj")).toEqual([]);
  });

  it("makes one row per variant with a cell per metric", () => {
    const rows = resultRows(result, "t2traj", "all");
    expect(rows.map((r) => r.variant)).toEqual(["full", "obs16", "empty"]);
    expect(rows[0].reference).toBe(true);
    expect(rows[1].cells["R@1"]?.mean).toBe(50);
    expect(rows[1].cells.mAP?.mean).toBe(65);
    expect(rows[1].cells["R@3"]).toBeUndefined();
    expect(rows[2].n_seeds).toBe(0);
    expect(resultRows(result, "t2traj", "2").find((r) => r.variant === "full")?.cells["R@1"]?.mean).toBe(90);
  });

  it("has figures once a variant has a finished seed", () => {
    expect(hasFigures(result)).toBe(true);
    expect(hasFigures({})).toBe(false);
    expect(hasFigures({ tables: [block("t2traj", "R@1", "all", [row({ n_seeds: 0, mean: null })])] })).toBe(false);
  });

  it("falls back to a task and stratum the table holds", () => {
    expect(pickView(result, "t2traj", "3-5")).toEqual({ task: "t2traj", stratum: "3-5" });
    expect(pickView(result, "traj2t", "3-5")).toEqual({ task: "t2traj", stratum: "3-5" });
    expect(pickView(result, "ocvr", "2")).toEqual({ task: "ocvr", stratum: "all" });
    expect(pickView({}, "ocvr", "2")).toEqual({ task: "t2traj", stratum: "all" });
  });
});
