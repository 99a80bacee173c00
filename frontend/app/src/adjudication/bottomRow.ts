// An adjudication of a relation row (pure data, no DOM). On dev and test a row whose two reviews
// left candidates ⊥ comes to an adjudicator before its query is admitted or rejected: the
// adjudicator labels exactly those candidates (`target.relation_row.bottom`) 1, 0 or ⊥ again
// (they cannot tell either). The decision is complete only when every one has a label; the server
// refuses anything else, and so does `toJudgments` before it is sent.

import type { AdjudicationVote, RelationLabel } from "../api/types";

export interface BottomRow {
  /** Trajectory ids the adjudicator labels, in display order. */
  readonly candidates: readonly number[];
  /** Labels given so far, by trajectory id. */
  readonly labels: ReadonlyMap<number, RelationLabel>;
}

export function initBottomRow(candidates: readonly number[]): BottomRow {
  if (new Set(candidates).size !== candidates.length) throw new RangeError("a candidate is listed twice");
  return { candidates: [...candidates], labels: new Map() };
}

export function setLabel(s: BottomRow, trajectory: number, label: RelationLabel): BottomRow {
  if (!s.candidates.includes(trajectory)) throw new RangeError(`trajectory ${trajectory} is not left ⊥ on this row`);
  if (label !== 1 && label !== 0 && label !== -1) throw new RangeError(`label must be 1, 0 or -1, got ${String(label)}`);
  const labels = new Map(s.labels);
  labels.set(trajectory, label);
  return { ...s, labels };
}

/** The candidates still without a label. */
export function missing(s: BottomRow): number[] {
  return s.candidates.filter((t) => !s.labels.has(t));
}

/** The judgments to send (`{trajectory id: label}`), or null while a candidate has no label. */
export function toJudgments(s: BottomRow): Record<string, RelationLabel> | null {
  if (s.candidates.length === 0 || missing(s).length > 0) return null;
  return Object.fromEntries(s.candidates.map((t) => [String(t), s.labels.get(t) as RelationLabel]));
}

/** What each panel vote said of one candidate, in casting order (absent where a vote did not label it). */
export function reviewsOf(votes: readonly AdjudicationVote[], trajectory: number): { annotator: string; label: RelationLabel }[] {
  const out: { annotator: string; label: RelationLabel }[] = [];
  for (const v of votes) {
    const label = (v.judgments as Record<string, number> | undefined)?.[String(trajectory)];
    if (label === 1 || label === 0 || label === -1) out.push({ annotator: v.annotator, label });
  }
  return out;
}
