// Small inline-SVG charts (no chart library): horizontal bars with their values written out, so
// the numbers are readable without the picture and by screen readers (role="img" + a label,
// and a table of the same data next to it).

export interface Bar {
  label: string;
  value: number;
  note?: string; // written after the value ("12 items")
  text?: string; // written instead of the formatted value ("–" for an undefined statistic)
}

export function BarChart({ title, bars, max, format = (v) => String(v), color = "#4f8cff" }: {
  title: string;
  bars: Bar[];
  max?: number;
  format?: (v: number) => string;
  color?: string;
}) {
  const top = max ?? Math.max(1, ...bars.map((b) => b.value));
  const rowH = 26;
  const labelW = 150;
  const width = 520;
  const barW = width - labelW - 110;
  const summary = bars.map((b) => `${b.label}: ${b.text ?? format(b.value)}`).join(", ");
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <svg role="img" aria-label={`${title}. ${summary}`} viewBox={`0 0 ${width} ${bars.length * rowH + 4}`} width="100%">
        {bars.map((b, i) => {
          const w = top > 0 ? (Math.max(0, b.value) / top) * barW : 0;
          const y = i * rowH + 2;
          return (
            <g key={b.label} data-bar={b.label} data-value={b.value}>
              <text x={labelW - 8} y={y + 16} textAnchor="end" className="chart-label">
                {b.label}
              </text>
              <rect x={labelW} y={y + 3} width={barW} height={rowH - 8} className="chart-track" />
              <rect x={labelW} y={y + 3} width={w} height={rowH - 8} fill={color} />
              <text x={labelW + barW + 8} y={y + 16} className="chart-value">
                {b.text ?? format(b.value)}
                {b.note ? ` ${b.note}` : ""}
              </text>
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

/** A progress bar split into coloured parts (e.g. decided / in adjudication / open). */
export function StackedBar({ parts, label }: { parts: { name: string; value: number; className: string }[]; label: string }) {
  const total = parts.reduce((s, p) => s + p.value, 0);
  const text = parts.map((p) => `${p.name} ${p.value}`).join(", ");
  return (
    <div className="stacked" role="img" aria-label={`${label}: ${total ? text : "nothing yet"}`}>
      {total === 0 ? (
        <span className="stacked-empty">–</span>
      ) : (
        parts
          .filter((p) => p.value > 0)
          .map((p) => (
            <span key={p.name} className={`stacked-part ${p.className}`} style={{ flexGrow: p.value }} title={`${p.name}: ${p.value}`} />
          ))
      )}
    </div>
  );
}

export function ProgressBar({ value, label }: { value: number; label: string }) {
  const pct = Math.round(Math.min(1, Math.max(0, value)) * 100);
  return (
    <div className="progress-wrap">
      <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct} aria-label={label}>
        <div className="progress-fill" style={{ width: `${pct}%` }} />
      </div>
      <span className="progress-text" aria-hidden="true">{pct}%</span>
    </div>
  );
}
