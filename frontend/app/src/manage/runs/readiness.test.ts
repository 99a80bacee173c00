import { describe, expect, it } from "vitest";
import { readiness } from "./readiness";

const row = (open: number, adjudicate: number, decided: number, unresolved = 0) => ({
  run: 1, items: open + adjudicate + decided + unresolved, open, adjudicate, decided, unresolved,
  ready: open + adjudicate + decided + unresolved > 0 && open + adjudicate === 0,
});

describe("a proposal run's review readiness", () => {
  // issue 27, finding 14: the runs table said nothing of where review stands
  it("says how much is decided and what is still open or in adjudication", () => {
    expect(readiness(row(3, 1, 12), false)).toEqual({ state: "open", text: "12 of 16 decided · 3 open · 1 in adjudication" });
    expect(readiness(row(1, 0, 0), false).text).toBe("0 of 1 decided · 1 open");
  });

  it("is ready to freeze once nothing is open or in adjudication (unresolved items count as decided)", () => {
    expect(readiness(row(0, 0, 10, 2), false)).toEqual({ state: "ready", text: "ready to freeze · 12 of 12 decided" });
  });

  it("names a run whose review was never opened, and a frozen pool", () => {
    expect(readiness(row(0, 0, 0), false)).toEqual({ state: "none", text: "review not opened" });
    expect(readiness(undefined, false).state).toBe("none");
    expect(readiness(row(0, 0, 4), true)).toEqual({ state: "frozen", text: "pool frozen · 4 of 4 decided" });
  });
});
