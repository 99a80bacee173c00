import { describe, expect, it } from "vitest";
import { BACKEND_CHOICES, parseCategories, trackerChoices } from "./ProposalRunForm";

describe("parseCategories", () => {
  it("splits on commas, trims, drops empties and repeats, keeps the order", () => {
    expect(parseCategories(" person, Car ,, person ,dog")).toEqual(["person", "Car", "dog"]);
    expect(parseCategories(" , ")).toEqual([]);
  });
});

describe("trackerChoices", () => {
  it("lists the registered trackers first, then the embedded ones the server accepts, never a path", () => {
    expect(BACKEND_CHOICES.map((c) => c.value).sort()).toEqual(["dnn-bytetrack", "hog-bytetrack", "sam2", "sam3"]);
    const choices = trackerChoices({
      registered: [
        { name: "sam2-large", backend: "sam2", label: "SAM 2.1 large", uses: ["tracker"] },
        { name: "lab-vlm", backend: "openai", label: "", uses: ["describer", "scorer", "writer"] },
      ],
      embedded: { tracker: ["hog-bytetrack", "dnn-bytetrack"], describer: ["heuristic"] },
    });
    expect(choices.map((c) => c.value)).toEqual(["sam2-large", "hog-bytetrack", "dnn-bytetrack"]);
    expect(choices[0].label).toContain("SAM 2.1 large");
    expect(trackerChoices(undefined).map((c) => c.value)).toEqual(BACKEND_CHOICES.map((c) => c.value));
  });
});
