import { afterEach, describe, expect, it, vi } from "vitest";
import type { StageDeclaration } from "../api/types";
import { forgetStageDeclarations, loadStageDeclarations, mergeStage, mergeStages } from "./declarations";
import { STAGE_DECLARATIONS } from "./declarations.fixture";
import { REVIEW_STAGES } from "./stages";

afterEach(() => forgetStageDeclarations());

describe("stage declarations", () => {
  it("join each presented stage with the server's labels and reasons, in the presentation's order", () => {
    const specs = mergeStages(REVIEW_STAGES, [...STAGE_DECLARATIONS].reverse());
    expect(specs.map((s) => s.stage)).toEqual(["usability", "identity", "description", "relation", "pair"]);
    const usability = specs[0];
    expect(usability.path).toBe("usability");
    expect(usability.title).toBe("Usability review");
    expect(usability.labels).toEqual([
      { value: "usable", text: "Usable" },
      { value: "unusable", text: "Unusable" },
      { value: "uncertain", text: "Uncertain" },
    ]);
    expect(usability.reasons[0]).toBe("switches to another object");
    expect(usability.decisive).toEqual(["usable", "unusable"]);
    expect([usability.panel, usability.required]).toEqual([3, 2]);
    const description = specs[2];
    expect(description.Screen).toBeDefined();
    expect(description.labels.map((l) => l.text)).toEqual([
      "Usable as shown", "Usable after minor correction", "Unusable", "Uncertain",
    ]);
  });

  it("leave out stages the UI does not present and refuse a presented stage the server lacks", () => {
    const extra: StageDeclaration = { stage: "future", labels: [], decisive: [], reasons: [], panel: 1, required: 1 };
    expect(mergeStages(REVIEW_STAGES, [...STAGE_DECLARATIONS, extra])).toHaveLength(REVIEW_STAGES.length);
    const withoutPair = STAGE_DECLARATIONS.filter((d) => d.stage !== "pair");
    expect(() => mergeStage(REVIEW_STAGES[4], withoutPair)).toThrow("The server declares no pair review stage.");
  });

  it("are fetched once and kept, and fetched again after a failure", async () => {
    const failing = vi.fn(() => Promise.reject(new Error("offline")));
    await expect(loadStageDeclarations(failing)).rejects.toThrow("offline");
    const fetch = vi.fn(() => Promise.resolve(STAGE_DECLARATIONS));
    expect(await loadStageDeclarations(fetch)).toBe(STAGE_DECLARATIONS);
    expect(await loadStageDeclarations(fetch)).toBe(STAGE_DECLARATIONS);
    expect(failing).toHaveBeenCalledTimes(1);
    expect(fetch).toHaveBeenCalledTimes(1);
  });
});
