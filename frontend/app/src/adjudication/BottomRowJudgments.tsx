// The adjudicator's labels of a relation row's candidates that both reviews left ⊥ (dev/test):
// each shows what the reviews said, and takes 1, 0 or ⊥ (they cannot tell either). State lives in
// `bottomRow.ts`; Y / X / U label the next candidate without a label.

import type { AdjudicationVote, RelationLabel } from "../api/types";
import { ariaKeys } from "../keyboard/useShortcut";
import { RELATION_LABELS, labelMeaning, labelText } from "../review/relation/relationGrid";
import { type BottomRow, missing, reviewsOf } from "./bottomRow";

const KEY_OF: Record<string, string> = { "1": "adjudication.bottomMatch", "0": "adjudication.bottomMismatch", "-1": "adjudication.bottomUnknown" };

export function BottomRowJudgments({ row, votes, onLabel, disabled }: {
  row: BottomRow; votes: readonly AdjudicationVote[]; onLabel: (trajectory: number, label: RelationLabel) => void; disabled: boolean;
}) {
  const next = missing(row)[0];
  return (
    <fieldset className="bottom-row">
      <legend>Candidates both reviews left ⊥: label each (the query is admitted or rejected after this)</legend>
      {row.candidates.map((t) => {
        const chosen = row.labels.get(t);
        return (
          <div key={t} className="candidate-head" aria-label={`Trajectory #${t}`}>
            <span>Trajectory #{t}</span>
            <span className="muted small">
              reviews: {reviewsOf(votes, t).map((r) => `${r.annotator} ${labelText(r.label)}`).join(", ") || "–"}
            </span>
            <span className="rel-buttons" role="group" aria-label={`Label trajectory #${t}`}>
              {RELATION_LABELS.map((l) => (
                <button key={l} type="button" className={`rel-button rel rel-${l}`} aria-pressed={chosen === l} disabled={disabled}
                  title={labelMeaning(l)} onClick={() => onLabel(t, l)}
                  aria-keyshortcuts={t === next ? ariaKeys(KEY_OF[String(l)]) : undefined}>
                  {labelText(l)}
                </button>
              ))}
            </span>
          </div>
        );
      })}
      <p className="muted small" role="status">
        {next === undefined ? "Every candidate has a label." : `${missing(row).length} left; Y / X / U label trajectory #${next} 1 / 0 / ⊥.`}
      </p>
    </fieldset>
  );
}
