import { describe, expect, it } from "vitest";
import { SHORTCUTS } from "./keyboard/shortcuts";
import { mergeStages } from "./review/declarations";
import { STAGE_DECLARATIONS } from "./review/declarations.fixture";
import { REVIEW_STAGES as PRESENTED } from "./review/stages";
import { findRoute, homeSections, mayOpen, MENUS, menuOf, navMenus, ROUTES } from "./routes";

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
    // a review item opened from Find (issue 27, finding 14)
    expect(findRoute("/manage/items/42")?.params).toEqual({ item: "42" });
    expect(findRoute("/manage/items/42")?.route.roles).toEqual(["manager"]);
    expect(findRoute("/manage/items/x")).toBeNull();
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

describe("navigation", () => {
  // issue 27, finding 14: 21 header links in one sideways scroller, and screens missing from home
  const me = (roles: string[]) => ({ id: 1, username: "u", roles }) as never;
  const everyone = me(["annotator", "adjudicator", "auditor", "manager"]);

  it("groups every screen of the navigation into a few menus, each link once", () => {
    const menus = navMenus(everyone);
    expect(menus.map((m) => m.section)).toEqual([...MENUS]);
    expect(menus.length).toBeLessThanOrEqual(5);
    const links = menus.flatMap((m) => m.routes.map((r) => r.path));
    expect(new Set(links).size).toBe(links.length);
    expect([...links].sort()).toEqual(ROUTES.filter((r) => r.nav).map((r) => r.path).sort());
    for (const m of menus) expect(m.routes.length).toBeLessThanOrEqual(10);
  });

  it("shows each person only the menus and links of their roles", () => {
    const annotator = navMenus(me(["annotator"]));
    expect(annotator.map((m) => m.section)).toEqual(["Review", "Build"]);
    expect(annotator.flatMap((m) => m.routes).every((r) => mayOpen(r, me(["annotator"])))).toBe(true);
    const manager = navMenus(me(["manager"])).flatMap((m) => m.routes.map((r) => r.nav?.label));
    for (const label of ["Find", "Seats", "Experiments", "Videos", "Runs", "Jobs", "Releases"]) expect(manager).toContain(label);
    expect(manager).not.toContain("Usability review");
  });

  it("knows which menu holds the current page, its sub-pages included", () => {
    expect(menuOf("/manage/training/4")).toBe("Models");
    expect(menuOf("/manage/find")).toBe("Admin");
    expect(menuOf("/review/usability/12")).toBe("Review");
    expect(menuOf("/videos/3/7")).toBe("Build");
    expect(menuOf("/")).toBeNull();
  });

  it("lists on the home page every screen a manager has in the menus", () => {
    const manager = me(["manager"]);
    const home = homeSections(manager).flatMap((s) => s.routes.map((r) => r.path));
    const menus = navMenus(manager).flatMap((m) => m.routes.map((r) => r.path));
    expect([...home].sort()).toEqual([...menus].sort());
    for (const path of ["/manage/find", "/manage/seats", "/manage/experiments", "/videos"]) expect(home).toContain(path);
    // an annotator's review stages are the queue cards, not links again
    expect(homeSections(me(["annotator"])).flatMap((s) => s.routes.map((r) => r.path))).toEqual(["/videos"]);
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
