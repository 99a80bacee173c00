import { describe, expect, it } from "vitest";
import { MediaBudget } from "./mediaBudget";

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("MediaBudget", () => {
  it("runs at most its slots at once, so other requests keep connections", async () => {
    const budget = new MediaBudget(3);
    const granted: number[] = [];
    const releases: (() => void)[] = [];
    for (let i = 0; i < 7; i++) void budget.acquire("crop").then((r) => { granted.push(i); releases.push(r); });
    await tick();
    expect(granted).toEqual([0, 1, 2]);
    expect(budget.load).toEqual({ busy: 3, waiting: 4 });
    releases[0]();
    releases[0](); // a second release is ignored
    await tick();
    expect(granted).toEqual([0, 1, 2, 3]);
    expect(budget.load).toEqual({ busy: 3, waiting: 3 });
  });

  it("starts frames before frames fetched ahead before crops, in order within each", async () => {
    const budget = new MediaBudget(1);
    const order: string[] = [];
    const first = await budget.acquire("frame");
    const names: [string, "frame" | "ahead" | "crop"][] = [["c1", "crop"], ["a1", "ahead"], ["f1", "frame"], ["c2", "crop"], ["f2", "frame"]];
    const releases = names.map(([name, p]) => budget.acquire(p).then((r) => { order.push(name); r(); }));
    first();
    await Promise.all(releases);
    expect(order).toEqual(["f1", "f2", "a1", "c1", "c2"]);
  });

  it("drops a waiter whose item was left, and refuses an aborted one at once", async () => {
    const budget = new MediaBudget(1);
    const held = await budget.acquire("frame");
    const ctrl = new AbortController();
    const left = budget.acquire("crop", ctrl.signal);
    ctrl.abort();
    await expect(left).rejects.toMatchObject({ name: "AbortError" });
    expect(budget.load).toEqual({ busy: 1, waiting: 0 });
    await expect(budget.acquire("crop", ctrl.signal)).rejects.toMatchObject({ name: "AbortError" });
    held();
    expect(budget.load).toEqual({ busy: 0, waiting: 0 });
  });
});
