// The server's declarations of the review stages (GET /api/review/stages/: labels with their
// button text, decisive labels, reasons, panel and required votes), loaded once per page and
// joined with the UI's presentation of each stage (stages.ts).

import { useEffect, useState } from "react";
import { api } from "../api/endpoints";
import type { StageDeclaration } from "../api/types";
import type { ReviewStageSpec, StagePresentation } from "./spec";

/** A stage's presentation with its declaration; throws when the server declares no such stage. */
export function mergeStage(presentation: StagePresentation, declarations: readonly StageDeclaration[]): ReviewStageSpec {
  const d = declarations.find((x) => x.stage === presentation.stage);
  if (!d) throw new Error(`The server declares no ${presentation.stage} review stage.`);
  return { ...presentation, labels: d.labels, decisive: d.decisive, reasons: d.reasons, panel: d.panel, required: d.required };
}

/** Every presented stage with its declaration, in the presentation's order. Stages the server
 *  declares and the UI does not present are left out (the UI has no screen for them). */
export function mergeStages(
  presentations: readonly StagePresentation[], declarations: readonly StageDeclaration[],
): ReviewStageSpec[] {
  return presentations.map((p) => mergeStage(p, declarations));
}

let pending: Promise<StageDeclaration[]> | null = null;
let loaded: StageDeclaration[] | null = null;

/** The declarations, fetched on the first call and kept for the page's life (a failed fetch is
 *  forgotten, so the next call tries again). */
export function loadStageDeclarations(fetch: () => Promise<StageDeclaration[]> = api.reviewStages): Promise<StageDeclaration[]> {
  if (!pending) {
    pending = fetch().then(
      (declarations) => (loaded = declarations),
      (error: unknown) => {
        pending = null;
        throw error;
      },
    );
  }
  return pending;
}

/** Drop the kept declarations (for tests). */
export function forgetStageDeclarations(): void {
  pending = null;
  loaded = null;
}

function tryMerge(presentation: StagePresentation, declarations: readonly StageDeclaration[] | null) {
  if (!declarations) return { spec: null, error: null };
  try {
    return { spec: mergeStage(presentation, declarations), error: null };
  } catch (error) {
    return { spec: null, error };
  }
}

/** A stage with the server's declaration: `spec` stays null (nothing to vote with) until the
 *  declarations are in, or `error` says why they are not. */
export function useReviewStage(presentation: StagePresentation): { spec: ReviewStageSpec | null; error: unknown; retry: () => void } {
  const [state, setState] = useState<{ spec: ReviewStageSpec | null; error: unknown }>(() => tryMerge(presentation, loaded));
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    if (loaded) {
      setState(tryMerge(presentation, loaded));
      return undefined;
    }
    let live = true;
    loadStageDeclarations().then(
      (declarations) => live && setState(tryMerge(presentation, declarations)),
      (error: unknown) => live && setState({ spec: null, error }),
    );
    return () => {
      live = false;
    };
  }, [presentation, attempt]);
  return { ...state, retry: () => setAttempt((a) => a + 1) };
}
