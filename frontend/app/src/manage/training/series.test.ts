import { describe, expect, it } from "vitest";
import type { StepSeries } from "../../api/types";
import { column, emptySeries, lastStep, latest, mergeSeries, seriesKeys, truncateSeries } from "./series";

const s = (cols: Record<string, (number | null)[]>) => cols as StepSeries;

describe("live training series", () => {
  it("appends the steps after the last one held", () => {
    const first = s({ step: [1, 2], attempt: [1, 1], loss: [2.0, 1.8] });
    const next = s({ step: [3, 4], attempt: [1, 1], loss: [1.5, 1.2] });
    const merged = mergeSeries(first, next, lastStep(first));
    expect(merged.step).toEqual([1, 2, 3, 4]);
    expect(column(merged, "loss")).toEqual([2.0, 1.8, 1.5, 1.2]);
    expect(lastStep(merged)).toBe(4);
    expect(first.step).toEqual([1, 2]); // the held series is not changed
  });

  it("starts from nothing", () => {
    const merged = mergeSeries(emptySeries(), s({ step: [1], loss: [3] }), 0);
    expect(merged).toEqual({ step: [1], loss: [3] });
    expect(lastStep(emptySeries())).toBe(0);
  });

  it("replaces the steps a resumed run computed again", () => {
    const held = s({ step: [1, 2, 3, 4], loss: [4, 3, 2, 1] });
    // the run resumed from its checkpoint at step 2: steps 3, 4 come again
    const again = s({ step: [3, 4, 5], loss: [2.5, 1.5, 0.5] });
    const merged = mergeSeries(held, again, 2);
    expect(merged.step).toEqual([1, 2, 3, 4, 5]);
    expect(column(merged, "loss")).toEqual([4, 3, 2.5, 1.5, 0.5]);
    expect(truncateSeries(held, 2).step).toEqual([1, 2]);
  });

  it("fills columns that only one side reported with null", () => {
    const held = s({ step: [1], loss: [1] });
    const more = s({ step: [2], loss: [0.9], zero_neg_row_rate: [0.25] });
    const merged = mergeSeries(held, more, 1);
    expect(column(merged, "zero_neg_row_rate")).toEqual([null, 0.25]);
    expect(column(merged, "absent")).toEqual([null, null]);
    expect(seriesKeys(merged).sort()).toEqual(["loss", "zero_neg_row_rate"]);
  });

  it("ignores steps it already holds", () => {
    const held = s({ step: [1, 2], loss: [1, 2] });
    expect(mergeSeries(held, s({ step: [1, 2], loss: [9, 9] }), 2)).toEqual(held);
  });

  it("reads the most recent finite value", () => {
    expect(latest(s({ step: [1, 2, 3], loss: [1, 0.5, null] }), "loss")).toBe(0.5);
    expect(latest(s({ step: [1], loss: [null] }), "loss")).toBeNull();
  });
});
