import { describe, expect, it } from "vitest";
import { barLayout } from "./charts";

describe("bar chart layout", () => {
  // issue 27, finding 15: the agreement chart's values ran past the figure and were cut off
  it("gives the labels and the values the room they take and the bars what is left", () => {
    const l = barLayout({ labelPx: 31, valuePx: 101, available: 384 });
    expect(l).toEqual({ labelW: 43, valueW: 113, barW: 228, width: 384 });
  });

  it("keeps bars at most their full length when there is room to spare", () => {
    expect(barLayout({ labelPx: 31, valuePx: 20, available: 1200 }).barW).toBe(260);
    expect(barLayout({ labelPx: 31, valuePx: 20 }).barW).toBe(260); // not measured yet
  });

  it("never lets the chart be wider than its place while the bars can shrink", () => {
    for (const available of [260, 300, 384, 500]) {
      const l = barLayout({ labelPx: 60, valuePx: 110, available });
      expect(l.width).toBeLessThanOrEqual(available);
      expect(l.labelW + l.barW + l.valueW).toBe(l.width);
    }
    // too narrow for even the shortest bar: the bar keeps its minimum and the figure scrolls
    expect(barLayout({ labelPx: 200, valuePx: 200, available: 300 }).barW).toBe(60);
  });
});
