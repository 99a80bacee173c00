import { describe, expect, it } from "vitest";
import { statusBadge } from "./status";

describe("status badges", () => {
  // issue 27, finding 14: a cancelled run's job showed a red "failed" badge
  it("says cancelled, in a neutral style, for a job whose run was cancelled", () => {
    expect(statusBadge("failed", "cancelled")).toEqual({ text: "cancelled", className: "badge status-cancelled" });
    expect(statusBadge("cancelled")).toEqual({ text: "cancelled", className: "badge status-cancelled" });
  });

  it("keeps failed for a run that failed, and any other status as it is", () => {
    expect(statusBadge("failed", "failed")).toEqual({ text: "failed", className: "badge status-failed" });
    expect(statusBadge("failed")).toEqual({ text: "failed", className: "badge status-failed" });
    expect(statusBadge("running", "running").text).toBe("running");
    expect(statusBadge("queued", null).className).toBe("badge status-queued");
  });
});
