// The editing model of a description review's inline correction: pure data, no DOM.
//
// A reviewer who votes `usable_after_minor_correction` sends the full corrected content
// (`{appearance, motion, facts}`, models/facts.py). The server counts approvals on exact content
// hashes, so the edit must change something and must stay valid against the same schema
// (`parse_description`): a known fact needs a value, texts and values have length limits. The
// minor edits offered here are the ones a reviewer makes while watching: rewrite a sentence,
// fix a fact's value, mark a fact unknown ("cannot tell"), drop a fact that is not there. Facts
// are never added here (a missing fact is a reason, not a minor correction of what was shown).
//
// Every operation returns a new state and leaves the old one untouched, so React re-renders by
// identity and an edit can be undone by keeping the previous state.

import type { DescriptionContent, Fact } from "../../api/types";

export type TextField = "appearance" | "motion";

/** One editable line of the review table: a sentence, or a fact by id. */
export type Row = { readonly kind: "text"; readonly field: TextField } | { readonly kind: "fact"; readonly id: string };

export const TEXT_FIELDS: readonly TextField[] = ["appearance", "motion"];
export const MAX_TEXT = 1000; // DESCRIPTION_SCHEMA: appearance and motion
export const MAX_VALUE = 100; // _FACT_SCHEMA: a fact's value

export interface Correction {
  /** The version under review, as the server sent it. */
  readonly original: DescriptionContent;
  /** The texts as edited. */
  readonly texts: Readonly<Record<TextField, string>>;
  /** Every fact of the original, in its order, with the reviewer's edits. */
  readonly facts: readonly Fact[];
  /** Ids of facts the reviewer removed (still listed, so a removal can be undone). */
  readonly removed: ReadonlySet<string>;
}

/** A correction that has changed nothing yet. */
export function startCorrection(original: DescriptionContent): Correction {
  const ids = new Set<string>();
  for (const f of original.facts) {
    if (ids.has(f.id)) throw new RangeError(`fact id ${f.id} appears twice in the description`);
    ids.add(f.id);
  }
  return {
    original,
    texts: { appearance: original.appearance, motion: original.motion },
    facts: original.facts.map((f) => ({ ...f, evidence_frames: [...f.evidence_frames] })),
    removed: new Set(),
  };
}

/** The table's rows: the two sentences, then every fact of the original (removed ones too). */
export function rows(c: Correction): Row[] {
  return [...TEXT_FIELDS.map((field): Row => ({ kind: "text", field })), ...c.facts.map((f): Row => ({ kind: "fact", id: f.id }))];
}

function factIndex(c: Correction, id: string): number {
  const i = c.facts.findIndex((f) => f.id === id);
  if (i < 0) throw new RangeError(`the description has no fact ${id}`);
  return i;
}

function originalFact(c: Correction, id: string): Fact {
  return c.original.facts[factIndex(c, id)];
}

function withFact(c: Correction, id: string, patch: Partial<Fact>): Correction {
  const i = factIndex(c, id);
  const facts = c.facts.slice();
  facts[i] = { ...facts[i], ...patch };
  return { ...c, facts };
}

export function fact(c: Correction, id: string): Fact {
  return c.facts[factIndex(c, id)];
}

export function setText(c: Correction, field: TextField, value: string): Correction {
  if (!TEXT_FIELDS.includes(field)) throw new RangeError(`${field} is not a text of a description`);
  return { ...c, texts: { ...c.texts, [field]: value } };
}

/** A new value for a fact. A non-empty value makes an unknown fact known again. */
export function setFactValue(c: Correction, id: string, value: string): Correction {
  return withFact(c, id, value.trim() ? { value, known: true } : { value });
}

/** Mark a fact known or unknown. Unknown clears its value (an unknown fact says nothing); known
 *  again brings back the original value when the original knew it, else the value stays empty
 *  and must be written (see `problems`). */
export function setFactKnown(c: Correction, id: string, known: boolean): Correction {
  if (!known) return withFact(c, id, { known: false, value: "" });
  const before = originalFact(c, id);
  const current = fact(c, id);
  return withFact(c, id, { known: true, value: current.value || (before.known ? before.value : "") });
}

export function toggleKnown(c: Correction, id: string): Correction {
  return setFactKnown(c, id, !fact(c, id).known);
}

/** Remove a fact from the corrected version, or bring it back. */
export function toggleRemoved(c: Correction, id: string): Correction {
  factIndex(c, id);
  const removed = new Set(c.removed);
  if (removed.has(id)) removed.delete(id);
  else removed.add(id);
  return { ...c, removed };
}

/** Undo every edit of one row. */
export function revertRow(c: Correction, row: Row): Correction {
  if (row.kind === "text") return setText(c, row.field, c.original[row.field]);
  const removed = new Set(c.removed);
  removed.delete(row.id);
  const i = factIndex(c, row.id);
  const facts = c.facts.slice();
  facts[i] = { ...c.original.facts[i], evidence_frames: [...c.original.facts[i].evidence_frames] };
  return { ...c, facts, removed };
}

export function revertAll(c: Correction): Correction {
  return startCorrection(c.original);
}

/** The corrected content as the vote sends it: removed facts left out, texts and values without
 *  the spaces typed around them (a value "red " would not match a predicate "red"). */
export function content(c: Correction): DescriptionContent {
  return {
    appearance: c.texts.appearance.trim(),
    motion: c.texts.motion.trim(),
    facts: c.facts
      .filter((f) => !c.removed.has(f.id))
      .map((f) => ({ ...f, value: f.value.trim(), evidence_frames: [...f.evidence_frames] })),
  };
}

/** JSON with sorted keys, the way the server hashes content (models.facts.canonical_json). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Whether the correction differs from the version under review (a correction that changes
 *  nothing is refused: the reviewer should vote `usable`). */
export function isChanged(c: Correction): boolean {
  return canonicalJson(content(c)) !== canonicalJson(content(startCorrection(c.original)));
}

export interface Change {
  row: Row;
  label: string; // "appearance", "upper_colour (f1)"
  what: "text" | "value" | "unknown" | "known" | "removed";
  from: string;
  to: string;
}

function factLabel(f: Fact): string {
  return `${f.name} (${f.id})`;
}

/** The edits, row by row, as people read them (the summary next to the vote). */
export function changes(c: Correction): Change[] {
  const out: Change[] = [];
  for (const field of TEXT_FIELDS) {
    if (c.texts[field] !== c.original[field]) {
      out.push({ row: { kind: "text", field }, label: field, what: "text", from: c.original[field], to: c.texts[field] });
    }
  }
  c.facts.forEach((f, i) => {
    const before = c.original.facts[i];
    const row: Row = { kind: "fact", id: f.id };
    if (c.removed.has(f.id)) out.push({ row, label: factLabel(f), what: "removed", from: before.value, to: "" });
    else if (before.known && !f.known) out.push({ row, label: factLabel(f), what: "unknown", from: before.value, to: "" });
    else if (!before.known && f.known) out.push({ row, label: factLabel(f), what: "known", from: "", to: f.value });
    else if (f.value !== before.value) out.push({ row, label: factLabel(f), what: "value", from: before.value, to: f.value });
  });
  return out;
}

/** Why the corrected content would be refused (the checks of parse_description that edits can
 *  break); empty when it can be sent. */
export function problems(c: Correction): string[] {
  const out: string[] = [];
  for (const field of TEXT_FIELDS) {
    if (c.texts[field].length > MAX_TEXT) out.push(`The ${field} sentence is longer than ${MAX_TEXT} characters.`);
  }
  for (const f of c.facts) {
    if (c.removed.has(f.id)) continue;
    if (f.known && !f.value.trim()) out.push(`Fact ${factLabel(f)} is marked known but has no value: write one or mark it unknown.`);
    if (f.value.length > MAX_VALUE) out.push(`The value of fact ${factLabel(f)} is longer than ${MAX_VALUE} characters.`);
  }
  return out;
}

/** Whether a row has been edited (for highlighting it). */
export function rowChanged(c: Correction, row: Row): boolean {
  if (row.kind === "text") return c.texts[row.field] !== c.original[row.field];
  if (c.removed.has(row.id)) return true;
  return canonicalJson(fact(c, row.id)) !== canonicalJson(originalFact(c, row.id));
}

/** The frames that show a fact, in order: its evidence frames, or the start of its interval when
 *  it names none. `seekTargets` walks through them on repeated presses. */
export function evidenceFrames(f: Fact): number[] {
  const frames = [...new Set(f.evidence_frames)].sort((a, b) => a - b);
  return frames.length > 0 ? frames : [f.start_frame];
}

/** The evidence frame after `current` (wrapping round), for "show me the next evidence". */
export function nextEvidence(f: Fact, current: number | null): number {
  const frames = evidenceFrames(f);
  if (current === null) return frames[0];
  return frames.find((x) => x > current) ?? frames[0];
}
