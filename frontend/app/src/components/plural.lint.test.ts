// "1 items" (issue 27, finding 15): every count in the UI's words goes through `count` (plural.ts).
// This reads the sources for a number written straight before a plural noun (`{x.length} items`),
// which says "1 items" when the number is one.

import { describe, expect, it } from "vitest";

// Every source file of the UI, as text (Vite reads them at build time of the test).
const FILES = import.meta.glob<string>(["../**/*.ts", "../**/*.tsx", "!../**/*.test.ts", "!../api/schema.gen.ts"],
  { query: "?raw", import: "default", eager: true });
const NOUNS = "items|votes|candidates|queries|seeds|runs|videos|members|relations|samples|frames|pairs|trajectories|"
  + "annotators|rows|steps|predicates|facts|records|seats|releases|jobs|errors|tracks|pools|descriptions|judgments|"
  + "cells|boxes|observations|results|versions|labels|snapshots|experiments|variants|audits|crops|resamples";
// A number: a length, a count, a size, an n_… field, a total.
const NUMBER = String.raw`[^{}]*(?:\.length|\.count|\.size|\bn_\w+|_count\b|\bcount\b|\btotal\b)[^{}]*`;
const RULES: [string, RegExp][] = [
  ["a number before a plural noun", new RegExp(String.raw`\$?\{${NUMBER}\}\s*(?:${NOUNS})\b`)],
];

describe("counts in words", () => {
  it("are written with count() everywhere in the UI", () => {
    const found: string[] = [];
    expect(Object.keys(FILES).length).toBeGreaterThan(50);
    for (const [path, text] of Object.entries(FILES)) {
      text.split("\n").forEach((line, i) => {
        for (const [what, rule] of RULES) if (rule.test(line)) found.push(`${path}:${i + 1}: ${what}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it("catches what it is meant to catch", () => {
    const hits = (line: string) => RULES.some(([, rule]) => rule.test(line));
    expect(hits("<caption>{videos.data.count} videos</caption>")).toBe(true);
    expect(hits("`${items.length} items wait`")).toBe(true);
    expect(hits("{a.n_samples} records checked")).toBe(true);
    expect(hits("{count(items.length, \"item\")} wait")).toBe(false);
    expect(hits("`on ${split} videos`")).toBe(false);
  });
});
