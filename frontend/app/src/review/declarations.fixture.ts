// The review stages as GET /api/review/stages/ declares them, for the UI's unit tests.

import type { StageDeclaration } from "../api/types";

export const STAGE_DECLARATIONS: StageDeclaration[] = [
  {
    stage: "usability",
    labels: [
      { value: "usable", text: "Usable" },
      { value: "unusable", text: "Unusable" },
      { value: "uncertain", text: "Uncertain" },
    ],
    decisive: ["usable", "unusable"],
    reasons: [
      "switches to another object",
      "box drifts off the object",
      "box much too large or small",
      "not the stated category",
      "too short or mostly occluded",
    ],
    panel: 3,
    required: 2,
  },
  {
    stage: "identity",
    labels: [
      { value: "same", text: "Same object" },
      { value: "different", text: "Different objects" },
      { value: "uncertain", text: "Uncertain" },
    ],
    decisive: ["same", "different"],
    reasons: [
      "different appearance",
      "seen at once in different places",
      "continues the other after a gap",
      "one of them switches identity",
    ],
    panel: 3,
    required: 2,
  },
  {
    stage: "description",
    labels: [
      { value: "usable", text: "Usable as shown" },
      { value: "usable_after_minor_correction", text: "Usable after minor correction" },
      { value: "unusable", text: "Unusable" },
      { value: "uncertain", text: "Uncertain" },
    ],
    decisive: ["usable", "unusable"],
    reasons: [
      "a fact is wrong",
      "a fact is missing",
      "the evidence frames do not show it",
      "describes another object",
      "the sentences contradict the facts",
    ],
    panel: 3,
    required: 2,
  },
  {
    stage: "relation",
    labels: [{ value: "reviewed", text: "Send the row's labels" }],
    decisive: ["reviewed"],
    reasons: [],
    panel: 1,
    required: 1,
  },
  {
    stage: "pair",
    labels: [
      { value: "match", text: "Match" },
      { value: "mismatch", text: "Mismatch" },
      { value: "uncertain", text: "Uncertain" },
    ],
    decisive: ["match", "mismatch"],
    reasons: [
      "a predicate is visibly violated",
      "the interval that would show it is not covered",
      "the tracking is off",
      "the query is ambiguous",
    ],
    panel: 1,
    required: 1,
  },
];
