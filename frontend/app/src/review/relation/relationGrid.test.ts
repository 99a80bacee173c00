import { describe, expect, it } from "vitest";
import {
  initGrid,
  labelSelected,
  labelText,
  labelTrajectory,
  missing,
  move,
  nextUnlabelled,
  select,
  selected,
  setFaithful,
  setNatural,
  tally,
  toVote,
} from "./relationGrid";

describe("a relation row under review", () => {
  it("needs candidates, each once", () => {
    expect(() => initGrid([], true)).toThrow(/at least one/);
    expect(() => initGrid([4, 4], true)).toThrow(/twice/);
  });

  it("labels the selected candidate and moves on to the next one without a label", () => {
    let s = initGrid([11, 12, 13], true);
    expect(selected(s)).toBe(11);
    s = labelSelected(s, 1);
    expect(selected(s)).toBe(12);
    s = labelSelected(s, 0);
    expect(selected(s)).toBe(13);
    s = labelSelected(s, -1);
    // every candidate has a label: the cursor stays on the last one labelled
    expect(selected(s)).toBe(13);
    expect(tally(s)).toEqual({ match: 1, mismatch: 1, unknown: 1, unlabelled: 0 });
  });

  it("wraps round to a skipped candidate", () => {
    let s = initGrid([1, 2, 3], false);
    s = move(s, 1); // skip the first
    s = labelSelected(s, 0); // 2 -> next without label is 3
    expect(selected(s)).toBe(3);
    s = labelSelected(s, 0); // 3 -> wraps to 1
    expect(selected(s)).toBe(1);
    expect(nextUnlabelled(s)).toBe(0);
  });

  it("relabels in place and moves the cursor only within the row", () => {
    let s = initGrid([1, 2], false);
    s = labelTrajectory(s, 2, 1);
    expect(selected(s)).toBe(2); // a click selects, no jump
    s = labelTrajectory(s, 2, 0);
    expect(s.labels.get(2)).toBe(0);
    expect(selected(move(s, 5))).toBe(2);
    expect(selected(move(s, -5))).toBe(1);
    expect(() => select(s, 2)).toThrow(/outside/);
    expect(() => labelTrajectory(s, 9, 1)).toThrow(/not a shown candidate/);
    expect(() => labelSelected(s, 2 as never)).toThrow(/1, 0 or -1/);
  });

  it("asks for every label and, on the first review, both ratings", () => {
    let s = initGrid([5, 6], true);
    expect(missing(s)).toEqual([
      "Label every candidate.",
      "Say whether the query is faithful to its target.",
      "Rate how natural the query reads (1-5).",
    ]);
    s = labelSelected(s, 1);
    expect(missing(s)[0]).toBe("Label candidate #6.");
    expect(() => toVote(s)).toThrow(/#6/);
    s = setNatural(setFaithful(labelSelected(s, 0), true), 4);
    expect(missing(s)).toEqual([]);
    expect(toVote(s)).toEqual({ label: "reviewed", judgments: { "5": 1, "6": 0 }, payload: { faithful: true, natural: 4 } });
  });

  it("sends no ratings on a second review and refuses them", () => {
    let s = initGrid([8], false);
    expect(() => setFaithful(s, true)).toThrow(/first review/);
    expect(() => setNatural(s, 3)).toThrow(/first review/);
    s = labelSelected(s, -1);
    expect(toVote(s)).toEqual({ label: "reviewed", judgments: { "8": -1 } });
  });

  it("keeps naturalness within 1-5", () => {
    const s = initGrid([1], true);
    expect(() => setNatural(s, 0)).toThrow(/1 to 5/);
    expect(() => setNatural(s, 6)).toThrow(/1 to 5/);
    expect(() => setNatural(s, 2.5)).toThrow(/1 to 5/);
    expect(setNatural(s, 5).natural).toBe(5);
  });

  it("writes labels as 1, 0 and ⊥", () => {
    expect([1, 0, -1, null].map((v) => labelText(v as never))).toEqual(["1", "0", "⊥", "–"]);
  });
});
