import { describe, expect, it } from "vitest";
import type { AdjudicationVote } from "../api/types";
import { initBottomRow, missing, reviewsOf, setLabel, toJudgments } from "./bottomRow";

describe("an adjudication of a row's ⊥ candidates", () => {
  it("is complete only when every candidate left ⊥ has a label", () => {
    let s = initBottomRow([7, 9]);
    expect(toJudgments(s)).toBeNull();
    s = setLabel(s, 9, 0);
    expect(missing(s)).toEqual([7]);
    expect(toJudgments(s)).toBeNull();
    s = setLabel(s, 7, -1);
    expect(toJudgments(s)).toEqual({ "7": -1, "9": 0 });
  });

  it("refuses a candidate that was not left ⊥ and a label that is not 1, 0 or ⊥", () => {
    const s = initBottomRow([7]);
    expect(() => setLabel(s, 8, 1)).toThrow(RangeError);
    expect(() => setLabel(s, 7, 2 as never)).toThrow(RangeError);
    expect(() => initBottomRow([7, 7])).toThrow(RangeError);
  });

  it("has nothing to send for an empty row", () => {
    expect(toJudgments(initBottomRow([]))).toBeNull();
  });

  it("reads each panel vote's label of a candidate in casting order", () => {
    const vote = (annotator: string, judgments: Record<string, number>) => ({ annotator, judgments }) as unknown as AdjudicationVote;
    const votes = [vote("ann3", { "7": -1, "8": 1 }), vote("ann4", { "7": -1 })];
    expect(reviewsOf(votes, 7)).toEqual([{ annotator: "ann3", label: -1 }, { annotator: "ann4", label: -1 }]);
    expect(reviewsOf(votes, 8)).toEqual([{ annotator: "ann3", label: 1 }]);
  });
});
