import { describe, expect, it } from "vitest";
import { count, pluralOf } from "./plural";

describe("counts in words", () => {
  it("is singular for exactly one", () => {
    expect(count(1, "item")).toBe("1 item");
    expect(count(0, "item")).toBe("0 items");
    expect(count(2, "vote")).toBe("2 votes");
  });
  it("knows the irregular and -es, -ies plurals", () => {
    expect(["query", "trajectory", "box", "match", "key", "judgment"].map(pluralOf)).toEqual(
      ["queries", "trajectories", "boxes", "matches", "keys", "judgments"]);
    expect(count(3, "person")).toBe("3 people");
    expect(count(2, "datum", "data")).toBe("2 data");
  });
});
