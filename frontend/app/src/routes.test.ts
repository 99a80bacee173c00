import { describe, expect, it } from "vitest";
import { SHORTCUTS } from "./keyboard/shortcuts";
import { mergeStages } from "./review/declarations";
import { STAGE_DECLARATIONS } from "./review/declarations.fixture";
import { REVIEW_STAGES as PRESENTED } from "./review/stages";
import { findRoute, mayOpen, ROUTES } from "./routes";

const REVIEW_STAGES = mergeStages(PRESENTED, STAGE_DECLARATIONS);

describe("routes", () => {
  it("finds every screen of the navigation at its own path", () => {
    for (const route of ROUTES.filter((r) => r.nav)) expect(findRoute(route.path)?.route).toBe(route);
  });

  it("gives every review stage a claim screen and an item screen", () => {
    for (const spec of REVIEW_STAGES) {
      expect(findRoute(`/review/${spec.path}`)?.route.title({})).toBe(spec.title);
      const item = findRoute(`/review/${spec.path}/42`);
      expect(item?.params.item).toBe("42");
      expect(item?.route.roles).toEqual(["annotator"]);
    }
  });

  it("opens runs, releases and audits by number only", () => {
    expect(findRoute("/manage/training/7")?.params).toEqual({ run: "7" });
    expect(findRoute("/manage/releases/3")?.params).toEqual({ release: "3" });
    expect(findRoute("/audit/12")?.params).toEqual({ audit: "12" });
    expect(findRoute("/manage/experiments/5")?.params).toEqual({ experiment: "5" });
    expect(findRoute("/manage/experiments/five")).toBeNull();
    expect(findRoute("/manage/training/seven")).toBeNull();
    expect(findRoute("/audit/x")).toBeNull();
  });

  it("keeps manager and auditor screens to their roles", () => {
    const me = (roles: string[]) => ({ id: 1, username: "u", roles }) as never;
    const snapshots = findRoute("/manage/snapshots")!.route;
    expect(mayOpen(snapshots, me(["manager"]))).toBe(true);
    expect(mayOpen(snapshots, me(["annotator", "auditor"]))).toBe(false);
    const audit = findRoute("/audit/1")!.route;
    expect(mayOpen(audit, me(["auditor"]))).toBe(true);
    expect(mayOpen(audit, me(["manager"]))).toBe(false);
  });
});

describe("review stages", () => {
  it("bind item navigation in a scope the shortcut list defines", () => {
    const ids = new Set(SHORTCUTS.map((s) => s.id));
    for (const spec of REVIEW_STAGES) {
      const scope = spec.keyScope ?? "review";
      expect(ids.has(`${scope}.previous`) && ids.has(`${scope}.next`)).toBe(true);
      if (!spec.Screen) {
        // stages voted with the label keys: one key per label, one per reason (up to six)
        expect(spec.labels.length).toBeLessThanOrEqual(4);
        expect(spec.labels.every((_, i) => ids.has(`review.label${i + 1}`))).toBe(true);
      }
    }
  });

  it("are unique by API stage and by path", () => {
    expect(new Set(REVIEW_STAGES.map((s) => s.stage)).size).toBe(REVIEW_STAGES.length);
    expect(new Set(REVIEW_STAGES.map((s) => s.path)).size).toBe(REVIEW_STAGES.length);
  });
});
