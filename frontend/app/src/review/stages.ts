// The review stages the UI knows, as data. A stage names its API stage, its labels (voted with
// 1, 2, 3, …), its reasons (toggled with Shift+1, …) and the component that shows its target.
// The claim / vote / history screen is shared; a stage whose vote carries more than a label
// (a description's correction, a relation row's labels and ratings) brings its own `Screen`
// for the item, inside that shell.

import type { ComponentType } from "react";
import type { StageScreenProps } from "../screens/Review";
import { DESCRIPTION_CHOICES, DESCRIPTION_REASONS, DescriptionReview, DescriptionTarget } from "./DescriptionReview";
import { CrossPairTarget } from "./PairTarget";
import { RelationReview, RelationRowSummary } from "./RelationReview";
import { PairTarget, type TargetProps, TrajectoryTarget } from "./targets";

export interface LabelSpec {
  value: string; // the label the API stores
  text: string; // button text
}

export interface ReviewStageSpec {
  stage: string; // the API's stage name (POST /api/review/next/ {stage})
  path: string; // URL segment: /review/<path>/<item>
  title: string;
  question: string; // what the annotator decides
  labels: LabelSpec[];
  reasons: string[];
  /** Shows the item's target read only (the adjudication screen uses it too). */
  Target: ComponentType<TargetProps>;
  /** The item screen of a stage whose vote carries more than a label (default: the target and
   *  the label buttons). */
  Screen?: ComponentType<StageScreenProps>;
  /** The shortcut scope of the item screen ("review" unless the stage reuses the digit keys for
   *  something else, as the relation row does for its candidates' labels). */
  keyScope?: "review" | "relation";
}

export const REVIEW_STAGES: readonly ReviewStageSpec[] = [
  {
    stage: "usability",
    path: "usability",
    title: "Usability review",
    question: "Does this trajectory follow one object well enough to be a benchmark candidate?",
    labels: [
      { value: "usable", text: "Usable" },
      { value: "unusable", text: "Unusable" },
      { value: "uncertain", text: "Uncertain" },
    ],
    reasons: [
      "switches to another object",
      "box drifts off the object",
      "box much too large or small",
      "not the stated category",
      "too short or mostly occluded",
    ],
    Target: TrajectoryTarget,
  },
  {
    stage: "identity",
    path: "duplicates",
    title: "Duplicate review",
    question: "Are A and B the same object?",
    labels: [
      { value: "same", text: "Same object" },
      { value: "different", text: "Different objects" },
      { value: "uncertain", text: "Uncertain" },
    ],
    reasons: [
      "different appearance",
      "seen at once in different places",
      "continues the other after a gap",
      "one of them switches identity",
    ],
    Target: PairTarget,
  },
  {
    stage: "description",
    path: "descriptions",
    title: "Description review",
    question: "Is this description of the trajectory right?",
    labels: DESCRIPTION_CHOICES.map((c) => ({ value: c.value, text: c.text })),
    reasons: DESCRIPTION_REASONS,
    Target: DescriptionTarget,
    Screen: DescriptionReview,
  },
  {
    stage: "relation",
    path: "relations",
    title: "Relation verification",
    question: "Does each candidate satisfy every predicate of the query at once?",
    labels: [{ value: "reviewed", text: "Send the row's labels" }],
    reasons: [],
    Target: RelationRowSummary,
    Screen: RelationReview,
    keyScope: "relation",
  },
  {
    stage: "pair",
    path: "pairs",
    title: "Cross-video pairs",
    question: "Does this trajectory of another video satisfy every predicate of the query?",
    labels: [
      { value: "match", text: "Match" },
      { value: "mismatch", text: "Mismatch" },
      { value: "uncertain", text: "Uncertain" },
    ],
    reasons: [
      "a predicate is visibly violated",
      "the interval that would show it is not covered",
      "the tracking is off",
      "the query is ambiguous",
    ],
    Target: CrossPairTarget,
  },
];

export function stageByPath(path: string): ReviewStageSpec | undefined {
  return REVIEW_STAGES.find((s) => s.path === path);
}

export function stageByName(stage: string): ReviewStageSpec | undefined {
  return REVIEW_STAGES.find((s) => s.stage === stage);
}
