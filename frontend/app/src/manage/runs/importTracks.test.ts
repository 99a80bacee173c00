import { describe, expect, it } from "vitest";
import { ApiError } from "../../api/client";
import { findingsOf, formatOf, importText, pastFrame, previewViewBox, problemsOf, type TrackImport } from "./importTracks";

const record = (over: Partial<TrackImport>): TrackImport => ({
  id: 4, run: 9, video: 2, run_status: "queued", job: 12, progress: 0, message: "", error: "", trajectory_count: 0,
  duplicate_count: 0, format: "mot", purpose: "proposals", source: "TUD", file_name: "gt.txt", file_sha256: "0".repeat(64),
  review: "reviewed", created_at: "2026-01-01T00:00:00Z", ...over,
});

describe("formatOf", () => {
  it("reads the format from the file's name", () => {
    expect([formatOf("a.JSON"), formatOf("t.csv"), formatOf("gt.txt"), formatOf("output"), formatOf("annotations.XML")])
      .toEqual(["json", "csv", "mot", "mot", "cvat"]);
  });
});

describe("refusals", () => {
  it("lists a refused file's problems and a refused fit's findings, and nothing of other errors", () => {
    const refused = new ApiError(400, "invalid_track_file", "bad", { problems: [{ line: 3, message: "x" }] });
    const unfit = new ApiError(409, "fit_unconfirmed", "check", { findings: [{ code: "frames_short", message: "m" }] });
    expect(problemsOf(refused)).toEqual([{ line: 3, message: "x" }]);
    expect(findingsOf(unfit)).toEqual([{ code: "frames_short", message: "m" }]);
    expect(findingsOf(refused)).toEqual([]);
    expect(problemsOf(new Error("x"))).toEqual([]);
    expect(findingsOf(new ApiError(409, "split_unassigned", "m", { findings: [] }))).toEqual([]);
  });
});

describe("importText", () => {
  it("follows the job, then says what was imported, or why not", () => {
    expect(importText(record({}), true)).toBe("Importing gt.txt as run 9: 0% (waiting for a worker).");
    expect(importText(record({ run_status: "running", progress: 0.42, message: "appearance descriptors" }), true))
      .toBe("Importing gt.txt as run 9: 42% (appearance descriptors).");
    expect(importText(record({ run_status: "succeeded", trajectory_count: 8 }), true)).toBe("Imported 8 tracks as run 9 (reviewed).");
    expect(importText(record({ run_status: "succeeded", purpose: "tubes", trajectory_count: 1, review: "source_verified" }), true))
      .toBe("Imported 1 tubes as run 9 (source-verified).");
    expect(importText(record({ run_status: "succeeded" }), false)).toBe("Already imported as run 9.");
    expect(importText(record({ run_status: "failed", error: "the disk is full" }), true)).toBe("The import of gt.txt failed: the disk is full.");
  });
});

describe("the preview's geometry", () => {
  it("shows the whole frame and every box, with a margin", () => {
    const frame = { frame: 0, boxes: [{ track_id: 1, category: "person", box: [-31, 150, 60, 441] }] };
    const [x, y, w, h] = previewViewBox(640, 360, frame);
    expect(x).toBeLessThan(-31);
    expect(y).toBeLessThan(0);
    expect(x + w).toBeGreaterThan(640);
    expect(y + h).toBeGreaterThan(441);
    expect(previewViewBox(640, 360, { frame: 0, boxes: [] })).toEqual([-12.8, -12.8, 665.6, 385.6]);
    expect(pastFrame([-31, 150, 60, 441], 640, 360)).toBe(true);
    expect(pastFrame([0, 0, 640, 360], 640, 360)).toBe(false);
  });
});
