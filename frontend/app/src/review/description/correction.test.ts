import { describe, expect, it } from "vitest";
import type { DescriptionContent } from "../../api/types";
import {
  canonicalJson,
  changes,
  content,
  evidenceFrames,
  isChanged,
  nextEvidence,
  problems,
  revertAll,
  revertRow,
  rowChanged,
  rows,
  setFactKnown,
  setFactValue,
  setText,
  startCorrection,
  toggleKnown,
  toggleRemoved,
} from "./correction";

const ORIGINAL: DescriptionContent = {
  appearance: "A person in a red top and blue trousers.",
  motion: "Walks to the right.",
  facts: [
    { id: "f1", kind: "attribute", name: "upper_colour", value: "red", start_frame: 0, end_frame: 30, evidence_frames: [12, 3], scope: "whole", known: true },
    { id: "f2", kind: "attribute", name: "lower_colour", value: "blue", start_frame: 0, end_frame: 30, evidence_frames: [], scope: "whole", known: true },
    { id: "f3", kind: "event", name: "walks", value: "", start_frame: 4, end_frame: 20, evidence_frames: [8], scope: "interval", known: false },
  ],
};

const fresh = () => startCorrection(structuredClone(ORIGINAL));

describe("a correction", () => {
  it("starts unchanged, with a row per sentence and per fact", () => {
    const c = fresh();
    expect(isChanged(c)).toBe(false);
    expect(changes(c)).toEqual([]);
    expect(problems(c)).toEqual([]);
    expect(rows(c)).toEqual([
      { kind: "text", field: "appearance" }, { kind: "text", field: "motion" },
      { kind: "fact", id: "f1" }, { kind: "fact", id: "f2" }, { kind: "fact", id: "f3" },
    ]);
    expect(canonicalJson(content(c))).toBe(canonicalJson(ORIGINAL));
  });

  it("refuses a description with a repeated fact id", () => {
    const bad = structuredClone(ORIGINAL);
    bad.facts[1].id = "f1";
    expect(() => startCorrection(bad)).toThrow(/twice/);
  });

  it("edits a value without touching the version under review", () => {
    const c0 = fresh();
    const c1 = setFactValue(c0, "f1", "orange");
    expect(c0.facts[0].value).toBe("red");
    expect(c1.original.facts[0].value).toBe("red");
    expect(content(c1).facts[0]).toMatchObject({ id: "f1", value: "orange", known: true });
    expect(isChanged(c1)).toBe(true);
    expect(changes(c1)).toEqual([
      { row: { kind: "fact", id: "f1" }, label: "upper_colour (f1)", what: "value", from: "red", to: "orange" },
    ]);
    expect(rowChanged(c1, { kind: "fact", id: "f1" })).toBe(true);
    expect(rowChanged(c1, { kind: "fact", id: "f2" })).toBe(false);
  });

  it("trims what was typed around values and sentences", () => {
    const c = setText(setFactValue(fresh(), "f2", " black "), "motion", "  Walks left. ");
    expect(content(c).facts[1].value).toBe("black");
    expect(content(c).motion).toBe("Walks left.");
    // spaces alone change nothing
    expect(isChanged(setFactValue(fresh(), "f1", "red  "))).toBe(false);
  });

  it("marks a fact unknown (clearing its value) and known again (restoring it)", () => {
    const unknown = setFactKnown(fresh(), "f1", false);
    expect(content(unknown).facts[0]).toMatchObject({ known: false, value: "" });
    expect(changes(unknown)[0]).toMatchObject({ what: "unknown", from: "red" });
    const back = toggleKnown(unknown, "f1");
    expect(content(back).facts[0]).toMatchObject({ known: true, value: "red" });
    expect(isChanged(back)).toBe(false);
  });

  it("makes an unknown fact known only with a value", () => {
    const c = toggleKnown(fresh(), "f3"); // the original did not know it: no value to restore
    expect(content(c).facts[2]).toMatchObject({ known: true, value: "" });
    expect(problems(c)).toEqual(["Fact walks (f3) is marked known but has no value: write one or mark it unknown."]);
    const fixed = setFactValue(c, "f3", "left");
    expect(problems(fixed)).toEqual([]);
    expect(changes(fixed)[0]).toMatchObject({ what: "known", to: "left" });
    // writing a value into an unknown fact makes it known
    expect(content(setFactValue(fresh(), "f3", "right")).facts[2].known).toBe(true);
  });

  it("removes a fact from the sent content but keeps it listed, and brings it back", () => {
    const removed = toggleRemoved(fresh(), "f2");
    expect(content(removed).facts.map((f) => f.id)).toEqual(["f1", "f3"]);
    expect(rows(removed)).toHaveLength(5);
    expect(changes(removed)[0]).toMatchObject({ what: "removed", label: "lower_colour (f2)" });
    expect(isChanged(toggleRemoved(removed, "f2"))).toBe(false);
    // a removed fact's problems do not count
    expect(problems(toggleRemoved(setFactValue(fresh(), "f2", ""), "f2"))).toEqual([]);
  });

  it("reverts one row or everything", () => {
    let c = setText(setFactValue(toggleRemoved(fresh(), "f2"), "f1", "pink"), "appearance", "Someone.");
    c = revertRow(c, { kind: "fact", id: "f2" });
    expect(changes(c).map((x) => x.label)).toEqual(["appearance", "upper_colour (f1)"]);
    c = revertRow(c, { kind: "text", field: "appearance" });
    expect(changes(c).map((x) => x.label)).toEqual(["upper_colour (f1)"]);
    expect(isChanged(revertAll(c))).toBe(false);
  });

  it("reports values and sentences beyond the schema's limits", () => {
    const long = setText(setFactValue(fresh(), "f1", "x".repeat(101)), "appearance", "y".repeat(1001));
    expect(problems(long)).toEqual([
      "The appearance sentence is longer than 1000 characters.",
      "The value of fact upper_colour (f1) is longer than 100 characters.",
    ]);
  });

  it("refuses edits of facts that do not exist", () => {
    expect(() => setFactValue(fresh(), "f9", "x")).toThrow(/no fact f9/);
    expect(() => toggleRemoved(fresh(), "f9")).toThrow(/no fact f9/);
  });
});

describe("evidence", () => {
  it("walks through a fact's evidence frames in order, wrapping round", () => {
    const f = ORIGINAL.facts[0];
    expect(evidenceFrames(f)).toEqual([3, 12]);
    expect(nextEvidence(f, null)).toBe(3);
    expect(nextEvidence(f, 3)).toBe(12);
    expect(nextEvidence(f, 12)).toBe(3);
    expect(nextEvidence(f, 5)).toBe(12);
  });

  it("falls back to the start of the interval when a fact names no frames", () => {
    expect(evidenceFrames(ORIGINAL.facts[1])).toEqual([0]);
  });
});

describe("canonical JSON", () => {
  it("sorts keys at every depth like the server's canonical_json", () => {
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: "x" }] })).toBe('{"a":[{"c":"x","d":2}],"b":1}');
  });
});
