import { describe, expect, it } from "vitest";
import { heldOutSplit } from "./guards";

const snaps = [{ id: 1, split: "train" }, { id: 2, split: "dev" }, { id: 3, split: "test" }];

describe("training on a held-out snapshot", () => {
  // issue 27, finding 14: the form trained on a dev or test snapshot without a word
  it("names the split of a dev or test training snapshot", () => {
    expect(heldOutSplit(snaps, 2)).toBe("dev");
    expect(heldOutSplit(snaps, 3)).toBe("test");
  });

  it("has nothing to say of a train snapshot or of none", () => {
    expect(heldOutSplit(snaps, 1)).toBeNull();
    expect(heldOutSplit(snaps, "")).toBeNull();
    expect(heldOutSplit(snaps, 9)).toBeNull();
  });
});
