import { describe, expect, it } from "vitest";
import { ordinal, queueText } from "./Jobs";
import { runAction } from "./RunControls";

describe("queue position in words", () => {
  it("spells ordinals, teens included", () => {
    expect([1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111].map(ordinal)).toEqual(
      ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]);
  });
  it("says where a queued job waits, and only for a queued one", () => {
    expect(queueText({ status: "queued", queue: "gpu", queue_position: 1 })).toBe("next on queue gpu");
    expect(queueText({ status: "queued", queue: "cpu", queue_position: 3 })).toBe("3rd on queue cpu");
    expect(queueText({ status: "running", queue: "cpu", queue_position: null })).toBe("queue cpu");
  });
});

describe("run actions", () => {
  it("offers cancel while a run waits or works and retry once it ended badly", () => {
    expect(runAction("queued")).toBe("cancel");
    expect(runAction("running")).toBe("cancel");
    expect(runAction("running", true)).toBeNull();
    expect(runAction("failed")).toBe("retry");
    expect(runAction("cancelled")).toBe("retry");
    expect(runAction("succeeded")).toBeNull();
  });
});
