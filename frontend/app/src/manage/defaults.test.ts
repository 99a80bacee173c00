import { describe, expect, it } from "vitest";
import { defaultsLabel, defaultsRank, olderDefaults } from "./defaults";

const v = (model: number, extra = {}) => ({ model_kind: "vtrajembed", model, train: 1, commit: "abc", ...extra });

describe("defaults versions", () => {
  it("names a record as the tables do", () => {
    expect(defaultsLabel(v(2))).toBe("vtrajembed v2, train v1");
    expect(defaultsLabel({})).toBe("unrecorded");
    expect(defaultsLabel(v(2, { resumed_over: v(1) }))).toBe("vtrajembed v2, train v1 resumed over vtrajembed v1, train v1");
    expect(defaultsRank({})).toEqual([-1, -1, -1]);
  });
  it("marks the runs older than the newest of their model kind", () => {
    const runs = [
      { id: 1, model_kind: "vtrajembed", defaults_version: v(2) },
      { id: 2, model_kind: "vtrajembed", defaults_version: v(1) },
      { id: 3, model_kind: "vtrajembed", defaults_version: {} },
      { id: 4, model_kind: "vtrajembed", defaults_version: v(2, { resumed_over: v(1) }) },
      { id: 5, model_kind: "scout", defaults_version: { model_kind: "scout", model: 1, train: 1 } },
    ];
    expect([...olderDefaults(runs)].sort()).toEqual([2, 3, 4]);
    expect(olderDefaults(runs.filter((r) => r.id === 1 || r.id === 5)).size).toBe(0);
  });
});
