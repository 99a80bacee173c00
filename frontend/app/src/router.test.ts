import { describe, expect, it } from "vitest";
import { findRoute } from "./routes";
import { matchPath } from "./router";

describe("matchPath", () => {
  it("matches literal segments and captures parameters", () => {
    expect(matchPath("/review/:stage/:item", "/review/usability/12")).toEqual({ stage: "usability", item: "12" });
    expect(matchPath("/review/:stage/:item", "/review/usability")).toBeNull();
    expect(matchPath("/review/:stage/:item?", "/review/usability")).toEqual({ stage: "usability" });
    expect(matchPath("/manage/jobs", "/manage/jobs/")).toEqual({});
    expect(matchPath("/manage/jobs", "/manage/runs")).toBeNull();
    expect(matchPath("/", "/anything")).toBeNull();
    expect(matchPath("/", "/")).toEqual({});
  });
});

describe("routes", () => {
  it("every screen has one route and item ids must be numbers", () => {
    expect(findRoute("/review/usability/7")?.route.path).toBe("/review/usability/:item");
    expect(findRoute("/review/duplicates")?.route.path).toBe("/review/duplicates");
    expect(findRoute("/adjudication/3")?.params).toEqual({ item: "3" });
    expect(findRoute("/adjudication/x")).toBeNull();
    expect(findRoute("/review/nonsense")).toBeNull();
    expect(findRoute("/manage/agreement")?.route.roles).toEqual(["manager"]);
  });
});

describe("video routes", () => {
  it("takes an optional trajectory and refuses words for ids", () => {
    expect(findRoute("/videos/4")?.params).toEqual({ video: "4" });
    expect(findRoute("/videos/4/17")?.params).toEqual({ video: "4", trajectory: "17" });
    expect(findRoute("/videos/x")).toBeNull();
    expect(findRoute("/videos/4/y")).toBeNull();
  });
});
