// Arithmetic of the inline-SVG line charts (training curves): extents that ignore missing
// values, "nice" axis ticks (steps of 1, 2 or 5 times a power of ten), linear scales, lines
// broken where a value is missing (never drawn across a gap), and min-max downsampling so that
// a run of many thousand steps draws a few hundred points without losing its spikes.

export interface Point {
  readonly x: number;
  readonly y: number;
}

const finite = (v: number | null | undefined): v is number => typeof v === "number" && Number.isFinite(v);

/** `[min, max]` of the finite values, or null when there are none. */
export function finiteExtent(values: Iterable<number | null | undefined>): [number, number] | null {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!finite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : null;
}

/** The step of 1, 2 or 5 × 10^k that gives the number of ticks closest to `count` (the
 *  thresholds are the geometric means between the candidates, as in d3's ticks). */
export function niceStep(span: number, count: number): number {
  if (!(span > 0)) throw new RangeError(`span must be positive, got ${span}`);
  if (!(count >= 1)) throw new RangeError(`count must be >= 1, got ${count}`);
  const raw = span / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const f = raw / power;
  const m = f >= Math.sqrt(50) ? 10 : f >= Math.sqrt(10) ? 5 : f >= Math.sqrt(2) ? 2 : 1;
  return m * power;
}

export interface Ticks {
  readonly domain: [number, number]; // widened to whole steps
  readonly ticks: number[];
  readonly step: number;
}

/** About `count` nice ticks covering `[min, max]`; a single value gets a small band around it. */
export function niceTicks(min: number, max: number, count = 5): Ticks {
  if (!finite(min) || !finite(max) || max < min) throw new RangeError(`bad extent [${min}, ${max}]`);
  if (min === max) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const step = niceStep(max - min, count);
  // Round to the step's decimals so 0.1 + 0.2 style error never reaches a label.
  const decimals = Math.max(0, -Math.floor(Math.log10(step)) + 1);
  const round = (v: number) => Number(v.toFixed(decimals));
  const lo = round(Math.floor(min / step + 1e-9) * step);
  const hi = round(Math.ceil(max / step - 1e-9) * step);
  const ticks: number[] = [];
  for (let i = 0; lo + i * step <= hi + step * 1e-6; i++) ticks.push(round(lo + i * step));
  return { domain: [lo, hi], ticks, step };
}

/** A linear map of `domain` onto `range` (a degenerate domain maps to the middle of the range). */
export function linearScale(domain: readonly [number, number], range: readonly [number, number]): (v: number) => number {
  const [d0, d1] = domain;
  const [r0, r1] = range;
  if (d1 === d0) return () => (r0 + r1) / 2;
  const k = (r1 - r0) / (d1 - d0);
  return (v: number) => r0 + (v - d0) * k;
}

/** The points of a series, split into runs wherever a value is missing or not finite (a chart
 *  leaves a gap there instead of joining across it). */
export function segments(xs: readonly number[], ys: readonly (number | null | undefined)[]): Point[][] {
  if (xs.length !== ys.length) throw new RangeError(`${xs.length} x values but ${ys.length} y values`);
  const out: Point[][] = [];
  let run: Point[] = [];
  for (let i = 0; i < xs.length; i++) {
    const y = ys[i];
    if (finite(y) && finite(xs[i])) run.push({ x: xs[i], y });
    else if (run.length) {
      out.push(run);
      run = [];
    }
  }
  if (run.length) out.push(run);
  return out;
}

/** At most about `maxPoints` points of a run: the first and last, and per bucket of equal index
 *  width its lowest and highest point in x order, so spikes survive. Short runs come back as
 *  they are. */
export function downsampleMinMax(points: readonly Point[], maxPoints: number): Point[] {
  if (!(maxPoints >= 4)) throw new RangeError(`maxPoints must be >= 4, got ${maxPoints}`);
  if (points.length <= maxPoints) return [...points];
  const buckets = Math.floor((maxPoints - 2) / 2);
  const inner = points.length - 2;
  const out: Point[] = [points[0]];
  for (let b = 0; b < buckets; b++) {
    const start = 1 + Math.floor((b * inner) / buckets);
    const end = 1 + Math.floor(((b + 1) * inner) / buckets); // exclusive
    if (end <= start) continue;
    let lo = start;
    let hi = start;
    for (let i = start; i < end; i++) {
      if (points[i].y < points[lo].y) lo = i;
      if (points[i].y > points[hi].y) hi = i;
    }
    if (lo === hi) out.push(points[lo]);
    else if (lo < hi) out.push(points[lo], points[hi]);
    else out.push(points[hi], points[lo]);
  }
  out.push(points[points.length - 1]);
  return out;
}

/** An SVG path (`M x y L x y …`) through the points, in chart pixels to 0.1 px. */
export function linePath(points: readonly Point[], sx: (v: number) => number, sy: (v: number) => number): string {
  return points.map((p, i) => `${i === 0 ? "M" : "L"}${sx(p.x).toFixed(1)} ${sy(p.y).toFixed(1)}`).join(" ");
}

/** A tick label with as many decimals as the step needs ("0.25", "1.5k" for large values). */
export function formatTick(v: number, step: number): string {
  if (Math.abs(v) >= 10000) return `${(v / 1000).toFixed(step >= 1000 ? 0 : 1)}k`;
  const decimals = step >= 1 ? 0 : Math.min(6, Math.ceil(-Math.log10(step) - 1e-9));
  return v.toFixed(decimals);
}

/** A value written for people: 4 significant digits, "–" when missing. */
export function formatValue(v: number | null | undefined): string {
  if (!finite(v)) return "–";
  if (v !== 0 && (Math.abs(v) >= 1e5 || Math.abs(v) < 1e-3)) return v.toExponential(2);
  return Number(v.toPrecision(4)).toString();
}
