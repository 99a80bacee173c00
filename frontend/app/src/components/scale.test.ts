import { describe, expect, it } from "vitest";
import {
  downsampleMinMax,
  finiteExtent,
  formatTick,
  formatValue,
  linearScale,
  linePath,
  niceStep,
  niceTicks,
  segments,
} from "./scale";

describe("extents and ticks", () => {
  it("ignores missing and non-finite values", () => {
    expect(finiteExtent([3, null, 1, NaN, Infinity, 2, undefined])).toEqual([1, 3]);
    expect(finiteExtent([null, NaN])).toBeNull();
  });

  it("steps by 1, 2 or 5 times a power of ten", () => {
    expect(niceStep(10, 5)).toBe(2);
    expect(niceStep(1, 4)).toBeCloseTo(0.2);
    expect(niceStep(1, 2)).toBe(0.5);
    expect(niceStep(0.07, 5)).toBeCloseTo(0.01);
    expect(niceStep(730, 5)).toBe(200);
    expect(() => niceStep(0, 5)).toThrow();
  });

  it("covers the extent with whole steps and exact labels", () => {
    const t = niceTicks(0.13, 2.71, 5);
    expect(t.step).toBe(0.5);
    expect(t.domain).toEqual([0, 3]);
    expect(t.ticks).toEqual([0, 0.5, 1, 1.5, 2, 2.5, 3]);
    const small = niceTicks(0.1, 0.3, 2);
    expect(small.ticks).toEqual([0.1, 0.2, 0.3]); // not 0.30000000000000004
  });

  it("gives a single value a band around it", () => {
    const t = niceTicks(2, 2, 4);
    expect(t.domain[0]).toBeLessThan(2);
    expect(t.domain[1]).toBeGreaterThan(2);
    expect(niceTicks(0, 0).domain).toEqual([-1, 1]);
    expect(() => niceTicks(3, 1)).toThrow(/bad extent/);
  });

  it("has a tick on every step between its ends", () => {
    for (const [lo, hi] of [[0, 1], [-3.2, 7.9], [1000, 1234], [0.001, 0.0042]] as const) {
      const t = niceTicks(lo, hi, 5);
      expect(t.domain[0]).toBeLessThanOrEqual(lo);
      expect(t.domain[1]).toBeGreaterThanOrEqual(hi);
      for (let i = 1; i < t.ticks.length; i++) expect(t.ticks[i] - t.ticks[i - 1]).toBeCloseTo(t.step, 9);
      expect(t.ticks.length).toBeLessThanOrEqual(12);
    }
  });
});

describe("scales and paths", () => {
  it("maps a domain onto a (possibly inverted) pixel range", () => {
    const y = linearScale([0, 10], [200, 0]); // SVG y grows downwards
    expect(y(0)).toBe(200);
    expect(y(10)).toBe(0);
    expect(y(2.5)).toBe(150);
    expect(linearScale([3, 3], [0, 100])(3)).toBe(50);
  });

  it("breaks lines where a value is missing", () => {
    const runs = segments([1, 2, 3, 4, 5], [1, null, 3, 4, NaN]);
    expect(runs).toEqual([[{ x: 1, y: 1 }], [{ x: 3, y: 3 }, { x: 4, y: 4 }]]);
    expect(() => segments([1], [])).toThrow();
  });

  it("writes an SVG path in chart pixels", () => {
    const sx = linearScale([0, 2], [0, 100]);
    const sy = linearScale([0, 1], [50, 0]);
    expect(linePath([{ x: 0, y: 0 }, { x: 1, y: 0.5 }, { x: 2, y: 1 }], sx, sy)).toBe("M0.0 50.0 L50.0 25.0 L100.0 0.0");
  });
});

describe("downsampling", () => {
  it("keeps short series whole", () => {
    const pts = [{ x: 0, y: 1 }, { x: 1, y: 2 }];
    expect(downsampleMinMax(pts, 10)).toEqual(pts);
  });

  it("keeps the ends and every spike of a long series, in x order", () => {
    const pts = Array.from({ length: 5000 }, (_, i) => ({ x: i, y: Math.sin(i / 50) }));
    pts[1234] = { x: 1234, y: 9 };
    pts[4321] = { x: 4321, y: -9 };
    const out = downsampleMinMax(pts, 200);
    expect(out.length).toBeLessThanOrEqual(200);
    expect(out[0]).toEqual(pts[0]);
    expect(out[out.length - 1]).toEqual(pts[4999]);
    expect(out).toContainEqual({ x: 1234, y: 9 });
    expect(out).toContainEqual({ x: 4321, y: -9 });
    for (let i = 1; i < out.length; i++) expect(out[i].x).toBeGreaterThan(out[i - 1].x);
    // the extremes of the whole series are the extremes of the drawn one
    expect(Math.max(...out.map((p) => p.y))).toBe(9);
    expect(Math.min(...out.map((p) => p.y))).toBe(-9);
  });
});

describe("labels", () => {
  it("writes ticks with the decimals their step needs", () => {
    expect(formatTick(0.5, 0.5)).toBe("0.5");
    expect(formatTick(0.25, 0.05)).toBe("0.25");
    expect(formatTick(2, 1)).toBe("2");
    expect(formatTick(15000, 5000)).toBe("15k");
  });

  it("writes values with four significant digits", () => {
    expect(formatValue(0.123456)).toBe("0.1235");
    expect(formatValue(1234.5)).toBe("1235");
    expect(formatValue(null)).toBe("–");
    expect(formatValue(0.00001234)).toBe("1.23e-5");
  });
});
