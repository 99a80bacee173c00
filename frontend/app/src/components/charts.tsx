// Small inline-SVG charts (no chart library): horizontal bars with their values written out, so
// the numbers are readable without the picture and by screen readers (role="img" + a label,
// and a table of the same data next to it).

export interface Bar {
  label: string;
  value: number;
  note?: string; // written after the value ("12 items")
  text?: string; // written instead of the formatted value ("–" for an undefined statistic)
}

/** Widest label drawn in full (characters), and a generous width of one 13 px character. */
export const LABEL_MAX_CHARS = 28;
const CHAR_PX = 7.8;

/** `text` cut to `max` characters with an ellipsis. */
export function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
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
  // Drawn at its own size in CSS pixels (never scaled down with the page), so its 13 px text stays
  // 13 px; the figure scrolls sideways when the column is narrower. Labels get the room they need
  // up to LABEL_MAX_CHARS characters, longer ones are shortened with their full text as a tooltip.
  const labelChars = Math.min(LABEL_MAX_CHARS, Math.max(4, ...bars.map((b) => b.label.length)));
  const labelW = Math.ceil(labelChars * CHAR_PX) + 12;
  const valueW = Math.ceil(Math.max(6, ...bars.map((b) => `${b.text ?? format(b.value)}${b.note ? ` ${b.note}` : ""}`.length)) * CHAR_PX) + 12;
  const barW = 260;
  const width = labelW + barW + valueW;
  const height = bars.length * rowH + 4;
  const summary = bars.map((b) => `${b.label}: ${b.text ?? format(b.value)}`).join(", ");
  return (
    <figure className="chart">
      <figcaption>{title}</figcaption>
      <svg role="img" aria-label={`${title}. ${summary}`} viewBox={`0 0 ${width} ${height}`} width={width} height={height}>
        {bars.map((b, i) => {
          const w = top > 0 ? (Math.max(0, b.value) / top) * barW : 0;
          const y = i * rowH + 2;
          return (
            <g key={b.label} data-bar={b.label} data-value={b.value}>
              <text x={labelW - 8} y={y + 16} textAnchor="end" className="chart-label">
                <title>{b.label}</title>
                {shorten(b.label, LABEL_MAX_CHARS)}
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
