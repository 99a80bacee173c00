// The review stages the UI knows, as presentation: where a stage lives, what it asks and the
// component that shows its target. What is voted on (labels and their text, reasons, panel) is
// the server's declaration (GET /api/review/stages/), joined in by declarations.ts. The claim /
// vote / history screen is shared; a stage whose vote carries more than a label (a
// description's correction, a relation row's labels and ratings) brings its own `Screen` for
// the item, inside that shell.

import { DescriptionReview, DescriptionTarget } from "./description/DescriptionReview";
import { CrossPairTarget } from "./pair/PairTarget";
import { RelationReview, RelationRowSummary } from "./relation/RelationReview";
import type { StagePresentation } from "./spec";
import { PairTarget, TrajectoryTarget } from "./targets";

export type { LabelSpec, ReviewStageSpec, StagePresentation } from "./spec";

export const REVIEW_STAGES: readonly StagePresentation[] = [
  {
    stage: "usability",
    path: "usability",
    title: "Usability review",
    question: "Does this trajectory follow one object well enough to be a benchmark candidate?",
    Target: TrajectoryTarget,
  },
  {
    stage: "identity",
    path: "duplicates",
    title: "Duplicate review",
    question: "Are A and B the same object?",
    Target: PairTarget,
  },
  {
    stage: "description",
    path: "descriptions",
    title: "Description review",
    question: "Is this description of the trajectory right?",
    Target: DescriptionTarget,
    Screen: DescriptionReview,
  },
  {
    stage: "relation",
    path: "relations",
    title: "Relation verification",
    question: "Does each candidate satisfy every predicate of the query at once?",
    Target: RelationRowSummary,
    Screen: RelationReview,
    keyScope: "relation",
  },
  {
    stage: "pair",
    path: "pairs",
    title: "Cross-video pairs",
    question: "Does this trajectory of another video satisfy every predicate of the query?",
    Target: CrossPairTarget,
  },
];

export function stageByPath(path: string): StagePresentation | undefined {
  return REVIEW_STAGES.find((s) => s.path === path);
}

export function stageByName(stage: string): StagePresentation | undefined {
  return REVIEW_STAGES.find((s) => s.stage === stage);
}
