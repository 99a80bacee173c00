// Small inline-SVG charts (no chart library): horizontal bars with their values written out, so
// the numbers are readable without the picture and by screen readers (role="img" + a label,
// and a table of the same data next to it).

import { useLayoutEffect, useRef, useState } from "react";

export interface Bar {
  label: string;
  value: number;
  note?: string; // written after the value ("12 items")
  text?: string; // written instead of the formatted value ("–" for an undefined statistic)
}

/** Widest label drawn in full (characters), and a generous width of one 13 px character (the
 *  estimate used until the drawn text has been measured). */
export const LABEL_MAX_CHARS = 28;
const CHAR_PX = 7.8;
const GAP = 12; // between a column's text and the next column
const BAR_MAX = 260; // a full-length bar when there is room
const BAR_MIN = 60; // the shortest bar still readable; below it the figure scrolls sideways

/** `text` cut to `max` characters with an ellipsis. */
export function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** The columns of a bar chart: its labels' and values' own widths (`labelPx`, `valuePx`: the
 *  widest text of each), and the bars in what is left of `available` (the figure's width; none
 *  known yet: full-length bars), between BAR_MIN and BAR_MAX. */
export function barLayout({ labelPx, valuePx, available }: { labelPx: number; valuePx: number; available?: number }) {
  const labelW = Math.ceil(labelPx) + GAP;
  const valueW = Math.ceil(valuePx) + GAP;
  const barW = available === undefined ? BAR_MAX : Math.max(BAR_MIN, Math.min(BAR_MAX, Math.floor(available - labelW - valueW)));
  return { labelW, valueW, barW, width: labelW + barW + valueW };
}

/** The widest of `texts` as drawn in `svg`, or null before it is drawn. */
function widest(svg: SVGSVGElement | null, selector: string): number | null {
  const texts = svg ? [...svg.querySelectorAll<SVGTextContentElement>(selector)] : [];
  return texts.length ? Math.max(...texts.map((t) => t.getComputedTextLength())) : null;
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
  const valueText = (b: Bar) => `${b.text ?? format(b.value)}${b.note ? ` ${b.note}` : ""}`;
  // Drawn at its own size in CSS pixels (never scaled down with the page), so its 13 px text stays
  // 13 px. The labels and the values get the room their drawn text takes (measured once drawn;
  // estimated from their length before), labels up to LABEL_MAX_CHARS characters (longer ones are
  // shortened with their full text as a tooltip); the bars take what is left of the figure's width.
  const figure = useRef<HTMLElement>(null);
  const svg = useRef<SVGSVGElement>(null);
  const [available, setAvailable] = useState<number | undefined>(undefined);
  const [drawn, setDrawn] = useState<{ label: number; value: number } | null>(null);
  useLayoutEffect(() => {
    const el = figure.current;
    if (!el) return undefined;
    const read = () => {
      const style = getComputedStyle(el);
      setAvailable(el.clientWidth - Number.parseFloat(style.paddingLeft) - Number.parseFloat(style.paddingRight));
    };
    read();
    const watch = new ResizeObserver(read);
    watch.observe(el);
    return () => watch.disconnect();
  }, []);
  const texts = bars.map((b) => `${b.label}\u0000${valueText(b)}`).join("\u0001");
  useLayoutEffect(() => {
    const label = widest(svg.current, ".chart-label");
    const value = widest(svg.current, ".chart-value");
    if (label !== null && value !== null && (label !== drawn?.label || value !== drawn?.value)) setDrawn({ label, value });
  }, [texts]);
  const labelChars = Math.min(LABEL_MAX_CHARS, Math.max(4, ...bars.map((b) => b.label.length)));
  const { labelW, barW, width } = barLayout({
    labelPx: drawn?.label ?? labelChars * CHAR_PX,
    valuePx: drawn?.value ?? Math.max(6, ...bars.map((b) => valueText(b).length)) * CHAR_PX,
    available,
  });
  const height = bars.length * rowH + 4;
  const summary = bars.map((b) => `${b.label}: ${b.text ?? format(b.value)}`).join(", ");
  return (
    <figure className="chart" ref={figure}>
      <figcaption>{title}</figcaption>
      <svg ref={svg} role="img" aria-label={`${title}. ${summary}`} viewBox={`0 0 ${width} ${height}`} width={width} height={height}>
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
              <text x={labelW + barW + 8} y={y + 16} className="chart-value">{valueText(b)}</text>
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
