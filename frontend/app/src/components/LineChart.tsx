// A line chart in inline SVG (no chart library), for training curves: one or more series over a
// shared x axis (steps), nice ticks, lines broken where a value is missing, long series
// downsampled without losing their spikes (scale.ts). The figure's label and caption say the
// first and last value of each series, so the numbers are there without the picture.

import {
  downsampleMinMax,
  finiteExtent,
  formatTick,
  formatValue,
  linearScale,
  linePath,
  niceTicks,
  segments,
} from "./scale";

export interface LineSeries {
  name: string;
  values: (number | null)[];
  color: string;
}

const WIDTH = 560;
const HEIGHT = 220;
const PAD = { left: 66, right: 16, top: 12, bottom: 34 };
const MAX_POINTS = 600; // per drawn run, after downsampling

function endpoints(x: number[], v: (number | null)[]): { first: [number, number] | null; last: [number, number] | null } {
  let first: [number, number] | null = null;
  let last: [number, number] | null = null;
  for (let i = 0; i < v.length; i++) {
    const y = v[i];
    if (typeof y !== "number" || !Number.isFinite(y)) continue;
    if (!first) first = [x[i], y];
    last = [x[i], y];
  }
  return { first, last };
}

export function LineChart({ title, x, series, xLabel = "step", yDomain }: {
  title: string;
  x: number[];
  series: LineSeries[];
  xLabel?: string;
  /** Fixed y extent (rates in [0, 1]); default: the data's, widened to nice ticks. */
  yDomain?: [number, number];
}) {
  const yExtent = yDomain ?? finiteExtent(series.flatMap((s) => s.values));
  const xExtent = finiteExtent(x);
  const summary = series.map((s) => {
    const { first, last } = endpoints(x, s.values);
    if (!first || !last) return `${s.name}: no values yet`;
    return `${s.name} from ${formatValue(first[1])} at ${xLabel} ${first[0]} to ${formatValue(last[1])} at ${xLabel} ${last[0]}`;
  }).join("; ");
  if (!yExtent || !xExtent) {
    return (
      <figure className="chart line-chart" data-chart={title}>
        <figcaption>{title}</figcaption>
        <p className="muted">No values yet.</p>
      </figure>
    );
  }
  const yt = niceTicks(yExtent[0], yExtent[1], 5);
  const xt = niceTicks(xExtent[0], xExtent[1], 6);
  const sx = linearScale(xt.domain, [PAD.left, WIDTH - PAD.right]);
  const sy = linearScale(yt.domain, [HEIGHT - PAD.bottom, PAD.top]);
  return (
    <figure className="chart line-chart" data-chart={title}>
      <figcaption>{title}</figcaption>
      <svg role="img" aria-label={`${title}. ${summary}`} viewBox={`0 0 ${WIDTH} ${HEIGHT}`} width="100%"
        style={{ minWidth: WIDTH }} /* never drawn smaller than its own size: its 13 px labels stay 13 px */>
        {yt.ticks.map((t) => (
          <g key={`y${t}`} className="tick">
            <line x1={PAD.left} x2={WIDTH - PAD.right} y1={sy(t)} y2={sy(t)} className="grid" />
            <text x={PAD.left - 6} y={sy(t) + 4} textAnchor="end" className="chart-label">{formatTick(t, yt.step)}</text>
          </g>
        ))}
        {xt.ticks.map((t) => (
          <text key={`x${t}`} x={sx(t)} y={HEIGHT - PAD.bottom + 16} textAnchor="middle" className="chart-label">{formatTick(t, xt.step)}</text>
        ))}
        <text x={(PAD.left + WIDTH - PAD.right) / 2} y={HEIGHT - 4} textAnchor="middle" className="chart-label axis-title">{xLabel}</text>
        <line x1={PAD.left} x2={PAD.left} y1={PAD.top} y2={HEIGHT - PAD.bottom} className="axis" />
        <line x1={PAD.left} x2={WIDTH - PAD.right} y1={HEIGHT - PAD.bottom} y2={HEIGHT - PAD.bottom} className="axis" />
        {series.map((s) => {
          const runs = segments(x, s.values);
          const n = runs.reduce((a, r) => a + r.length, 0);
          const last = endpoints(x, s.values).last;
          return (
            <g key={s.name} data-series={s.name} data-points={n} data-last={last ? last[1] : ""}>
              {runs.map((run, i) => run.length === 1 ? (
                <circle key={i} cx={sx(run[0].x)} cy={sy(run[0].y)} r={2} fill={s.color} />
              ) : (
                <path key={i} d={linePath(downsampleMinMax(run, MAX_POINTS), sx, sy)} fill="none" stroke={s.color} strokeWidth={1.8}
                  strokeLinejoin="round" />
              ))}
              {last && <circle cx={sx(last[0])} cy={sy(last[1])} r={3} fill={s.color} className="last-point" />}
            </g>
          );
        })}
      </svg>
      <ul className="legend">
        {series.map((s) => {
          const last = endpoints(x, s.values).last;
          return (
            <li key={s.name}>
              <span className="swatch" style={{ background: s.color }} /> {s.name}
              <span className="muted"> {last ? `${formatValue(last[1])} at ${xLabel} ${last[0]}` : "–"}</span>
            </li>
          );
        })}
      </ul>
    </figure>
  );
}
