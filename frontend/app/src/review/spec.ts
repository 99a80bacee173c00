// The shapes a review stage is made of on the UI side, shared by the stage table (stages.ts),
// the review shell (Review.tsx) and the stage screens, so none of them imports another's module
// for its types.

import type { ComponentType, ReactNode } from "react";
import type { Assignment, OwnVote, StageDeclaration, VoteInput } from "../api/types";
import type { TargetProps } from "./targets";

/** How the UI presents a stage; what is voted on (labels, reasons, panel) the server declares. */
export interface StagePresentation {
  stage: string; // the API's stage name (POST /api/review/next/ {stage})
  path: string; // URL segment: /review/<path>/<item>
  title: string;
  question: string; // what the annotator decides
  /** Shows the item's target read only (the adjudication screen uses it too). */
  Target: ComponentType<TargetProps>;
  /** The item screen of a stage whose vote carries more than a label (default: the target and
   *  the label buttons). */
  Screen?: ComponentType<StageScreenProps>;
  /** The shortcut scope of the item screen ("review" unless the stage reuses the digit keys for
   *  something else, as the relation row does for its candidates' labels). */
  keyScope?: "review" | "relation";
}

export type LabelSpec = StageDeclaration["labels"][number];

/** A stage as the item screen uses it: its presentation with the server's declaration (labels
 *  voted with 1, 2, 3, …; reasons toggled with Shift+1, …). */
export type ReviewStageSpec = StagePresentation & Omit<StageDeclaration, "stage">;

export type VoteParts = Omit<VoteInput, "time_spent_ms" | "client_request_id">;

/** What a stage's own screen gets from the shared review shell (for stages whose vote carries
 *  more than a label: a description's correction, a relation row's labels and ratings). */
export interface StageScreenProps {
  spec: ReviewStageSpec;
  seat: Assignment;
  itemId: number;
  /** Your vote on this item once cast (the screen shows it instead of the controls). */
  voted: OwnVote | null;
  busy: boolean;
  /** Send the vote (time spent and the retry-safe request id are added), then open the next item. */
  submit: (vote: VoteParts) => Promise<void>;
  /** Say something in the status line (read out by screen readers). */
  say: (status: string) => void;
  onFirstFrame: () => void;
  /** Item navigation, the last vote's error and the status line, for the screen's side panel. */
  footer: ReactNode;
}
