// The state of a relation row under review: pure data, no DOM.
//
// A relation item shows a query against candidates of its video's frozen pool: every member on
// the first review, only the disputed ones on an independent second review. The reviewer labels
// each shown candidate `1` (every required predicate jointly supported), `0` (a necessary
// condition demonstrably violated) or `⊥` (-1, otherwise), and on the first review also rates
// the query: faithful to its target's facts (yes / no) and natural (1-5). The vote is complete
// only when every shown candidate has a label (and, on the first review, both ratings are set):
// the server refuses anything less, and so does `toVote` before it is sent.
//
// A cursor marks the selected candidate; labelling it moves the cursor on to the next candidate
// without a label, so a row is labelled with one key per candidate.

import type { RelationLabel } from "../../api/types";

export const RELATION_LABELS: readonly RelationLabel[] = [1, 0, -1];
export const NATURAL_MIN = 1;
export const NATURAL_MAX = 5;

export interface GridState {
  /** Trajectory ids of the shown candidates, in display order. */
  readonly candidates: readonly number[];
  /** Labels given so far, by trajectory id. */
  readonly labels: ReadonlyMap<number, RelationLabel>;
  /** Index into `candidates` of the selected candidate. */
  readonly cursor: number;
  /** Whether this review rates the query (first review only). */
  readonly rateQuery: boolean;
  readonly faithful: boolean | null;
  readonly natural: number | null;
}

export function initGrid(candidates: readonly number[], rateQuery: boolean): GridState {
  if (candidates.length === 0) throw new RangeError("a relation row needs at least one candidate");
  if (new Set(candidates).size !== candidates.length) throw new RangeError("a candidate is listed twice");
  return { candidates: [...candidates], labels: new Map(), cursor: 0, rateQuery, faithful: null, natural: null };
}

/** The selected candidate's trajectory id. */
export function selected(s: GridState): number {
  return s.candidates[s.cursor];
}

export function select(s: GridState, index: number): GridState {
  if (!Number.isInteger(index) || index < 0 || index >= s.candidates.length) {
    throw new RangeError(`candidate index ${index} is outside 0..${s.candidates.length - 1}`);
  }
  return index === s.cursor ? s : { ...s, cursor: index };
}

export function selectTrajectory(s: GridState, trajectory: number): GridState {
  const i = s.candidates.indexOf(trajectory);
  if (i < 0) throw new RangeError(`trajectory ${trajectory} is not a shown candidate`);
  return select(s, i);
}

/** Move the cursor by `delta` candidates, stopping at the ends. */
export function move(s: GridState, delta: number): GridState {
  return select(s, Math.min(s.candidates.length - 1, Math.max(0, s.cursor + delta)));
}

/** The next candidate without a label after `from` (wrapping round), or -1 when all have one. */
export function nextUnlabelled(s: GridState, from = s.cursor): number {
  const n = s.candidates.length;
  for (let k = 1; k <= n; k++) {
    const i = (from + k) % n;
    if (!s.labels.has(s.candidates[i])) return i;
  }
  return -1;
}

function checkLabel(value: number): asserts value is RelationLabel {
  if (!(RELATION_LABELS as readonly number[]).includes(value)) throw new RangeError(`a relation label is 1, 0 or -1, not ${value}`);
}

/** Label the selected candidate and move on to the next one without a label (the cursor stays
 *  when every candidate has one, so a relabel does not jump away). */
export function labelSelected(s: GridState, value: RelationLabel): GridState {
  checkLabel(value);
  const labels = new Map(s.labels);
  labels.set(selected(s), value);
  const next = { ...s, labels };
  const after = nextUnlabelled(next);
  return after < 0 ? next : { ...next, cursor: after };
}

/** Label one candidate (a click on its button): it becomes the selected one; no jump. */
export function labelTrajectory(s: GridState, trajectory: number, value: RelationLabel): GridState {
  checkLabel(value);
  const at = selectTrajectory(s, trajectory);
  const labels = new Map(at.labels);
  labels.set(trajectory, value);
  return { ...at, labels };
}

export function setFaithful(s: GridState, faithful: boolean): GridState {
  if (!s.rateQuery) throw new RangeError("only the first review rates the query");
  return { ...s, faithful };
}

export function setNatural(s: GridState, natural: number): GridState {
  if (!s.rateQuery) throw new RangeError("only the first review rates the query");
  if (!Number.isInteger(natural) || natural < NATURAL_MIN || natural > NATURAL_MAX) {
    throw new RangeError(`naturalness is an integer from ${NATURAL_MIN} to ${NATURAL_MAX}, not ${natural}`);
  }
  return { ...s, natural };
}

export interface Tally {
  match: number;
  mismatch: number;
  unknown: number;
  unlabelled: number;
}

export function tally(s: GridState): Tally {
  const out: Tally = { match: 0, mismatch: 0, unknown: 0, unlabelled: 0 };
  for (const t of s.candidates) {
    const l = s.labels.get(t);
    if (l === 1) out.match++;
    else if (l === 0) out.mismatch++;
    else if (l === -1) out.unknown++;
    else out.unlabelled++;
  }
  return out;
}

/** What is still missing before the vote can be sent; empty when it is ready. */
export function missing(s: GridState): string[] {
  const out: string[] = [];
  const unlabelled = s.candidates.filter((t) => !s.labels.has(t));
  if (unlabelled.length > 0) {
    out.push(`Label ${unlabelled.length === s.candidates.length ? "every candidate" : `candidate${unlabelled.length > 1 ? "s" : ""} ${unlabelled.map((t) => `#${t}`).join(", ")}`}.`);
  }
  if (s.rateQuery && s.faithful === null) out.push("Say whether the query is faithful to its target.");
  if (s.rateQuery && s.natural === null) out.push("Rate how natural the query reads (1-5).");
  return out;
}

export interface RowVote {
  label: "reviewed";
  judgments: Record<string, RelationLabel>;
  payload?: { faithful: boolean; natural: number };
}

/** The vote of this review: every shown candidate's label and, on the first review, the ratings.
 *  Throws when something is missing (see `missing`). */
export function toVote(s: GridState): RowVote {
  const gaps = missing(s);
  if (gaps.length > 0) throw new RangeError(gaps.join(" "));
  const judgments: Record<string, RelationLabel> = {};
  for (const t of s.candidates) judgments[String(t)] = s.labels.get(t) as RelationLabel;
  if (!s.rateQuery) return { label: "reviewed", judgments };
  return { label: "reviewed", judgments, payload: { faithful: s.faithful as boolean, natural: s.natural as number } };
}

/** How a label is written: 1, 0 or ⊥. */
export function labelText(value: RelationLabel | null | undefined): string {
  return value === 1 ? "1" : value === 0 ? "0" : value === -1 ? "⊥" : "–";
}

/** What a label means, for buttons and screen readers. */
export function labelMeaning(value: RelationLabel): string {
  return value === 1 ? "match" : value === 0 ? "mismatch" : "unknown";
}
