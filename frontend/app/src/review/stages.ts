// The review stages the UI knows, as data. A stage names its API stage, its labels (voted with
// 1, 2, 3, …), its reasons (toggled with Shift+1, …) and the component that shows its target.
// Later stages (description review, relation verification, cross-video pairs, audit) slot in by
// adding an entry here once their API exists; the claim / vote / history screen is shared.

import type { ComponentType } from "react";
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
  Target: ComponentType<TargetProps>;
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
];

export function stageByPath(path: string): ReviewStageSpec | undefined {
  return REVIEW_STAGES.find((s) => s.path === path);
}

export function stageByName(stage: string): ReviewStageSpec | undefined {
  return REVIEW_STAGES.find((s) => s.stage === stage);
}
