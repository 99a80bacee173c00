import { describe, expect, it } from "vitest";
import { BACKEND_CHOICES, parseCategories } from "./ProposalRunForm";

describe("parseCategories", () => {
  it("splits on commas, trims, drops empties and repeats, keeps the order", () => {
    expect(parseCategories(" person, Car ,, person ,dog")).toEqual(["person", "Car", "dog"]);
    expect(parseCategories(" , ")).toEqual([]);
  });
});

describe("BACKEND_CHOICES", () => {
  it("lists every tracker the API accepts, with the files each needs", () => {
    const byName = Object.fromEntries(BACKEND_CHOICES.map((c) => [c.value, c]));
    expect(Object.keys(byName).sort()).toEqual(["dnn-bytetrack", "hog-bytetrack", "sam2", "sam3"]);
    expect(byName.sam3.checkpoint).toBe("required");
    expect(byName.sam3.modelConfig).toBe(false);
    expect(byName.sam2.modelConfig).toBe(true);
    expect(byName["hog-bytetrack"].checkpoint).toBe("none");
  });
});
