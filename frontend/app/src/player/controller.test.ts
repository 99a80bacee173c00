import { describe, expect, it } from "vitest";
import { PlayerController } from "./controller";
import type { FrameView, TimelineView } from "./view";

type Pic = { width: number; height: number; frame: number };

/** A controller with a fake clock, a manual animation-frame queue and manual downloads. */
function setup(range = { start: 0, end: 99 }, fps = 10) {
  let now = 0;
  const frames: (() => void)[] = [];
  const downloads = new Map<number, (p: Pic) => void>();
  const requested: number[] = [];
  const c = new PlayerController<Pic & CanvasImageSource>({
    range,
    fps,
    loader: (frame) => {
      requested.push(frame);
      return new Promise((resolve) => downloads.set(frame, resolve as (p: Pic) => void));
    },
    maxInFlight: 3,
    now: () => now,
    schedule: (cb) => frames.push(cb),
    cancel: () => undefined,
  });
  const drawn: [number, number | null][] = [];
  const view = { render: (f: number, p: Pic | null) => drawn.push([f, p ? p.frame : null]) } as unknown as FrameView;
  const timelineDraws: number[] = [];
  const timeline = { render: (f: number) => timelineDraws.push(f) } as unknown as TimelineView;
  const flush = async () => {
    await Promise.resolve();
    await Promise.resolve();
    // One animation frame: run what is queued now (a playing controller queues the next one).
    for (const cb of frames.splice(0)) cb();
  };
  const load = async (...fs: number[]) => {
    for (const f of fs) downloads.get(f)?.({ width: 64, height: 36, frame: f });
    await flush();
  };
  return { c, view, timeline, drawn, timelineDraws, requested, flush, load, setNow: (t: number) => (now = t) };
}

describe("PlayerController", () => {
  it("draws a seeded opening frame at once on flush, in the same task, before any download", () => {
    const s = setup({ start: 10, end: 99 });
    const first: number[] = [];
    s.c.onFirstFrame((f) => first.push(f));
    s.c.seed(10, { width: 64, height: 36, frame: 10 } as Pic & CanvasImageSource);
    s.c.attach(s.view);
    s.c.flush(); // no animation frame, no await
    expect(s.drawn).toEqual([[10, 10]]);
    expect(first).toEqual([10]);
    expect(s.requested).not.toContain(10); // the seeded frame is never fetched again
    expect(s.requested.slice(0, 3)).toEqual([11, 12, 13]); // the window around it starts at once
  });

  it("flushes nothing after it is disposed", () => {
    const s = setup();
    s.c.attach(s.view);
    s.c.dispose();
    s.c.flush();
    expect(s.drawn).toEqual([]);
  });

  it("draws a placeholder, then the frame when it arrives, and reports the first frame once", async () => {
    const s = setup();
    const first: number[] = [];
    s.c.onFirstFrame((f) => first.push(f));
    s.c.attach(s.view);
    s.c.attachTimeline(s.timeline);
    await s.flush();
    expect(s.drawn).toEqual([[0, null]]);
    expect(s.requested).toEqual([0]); // the frame on screen alone, so nothing competes with it
    await s.load(0);
    expect(s.drawn.at(-1)).toEqual([0, 0]);
    expect(s.requested).toEqual([0, 1, 2, 3]); // then the window ahead, three at a time
    await s.load(1, 2);
    s.c.step(1);
    await s.flush();
    expect(s.drawn.at(-1)).toEqual([1, 1]);
    expect(first).toEqual([0]);
  });

  it("loads ahead of the playhead while playing and keeps time with the clock", async () => {
    const s = setup();
    s.c.attach(s.view);
    await s.flush();
    await s.load(0);
    await s.load(1, 2);
    s.c.play();
    await s.flush();
    // Playing at 10 fps with 2 s lookahead: the window reaches 20 frames ahead.
    expect(s.c.window()).toEqual([0, ...Array.from({ length: 20 }, (_, i) => i + 1)]);
    for (let f = 3; f <= 20; f++) await s.load(f);
    s.setNow(1000);
    await s.flush();
    expect(s.c.state.frame).toBe(10);
    expect(s.drawn.at(-1)).toEqual([10, 10]);
  });

  it("waits for frames rather than skipping to one it does not have", async () => {
    const s = setup();
    s.c.attach(s.view);
    await s.flush();
    await s.load(0);
    await s.load(1);
    s.c.play();
    s.setNow(800); // the clock wants frame 8: 1 is the last one there, and it waits there
    await s.flush();
    expect(s.c.state).toMatchObject({ frame: 1, buffering: true });
    await s.load(2, 3);
    s.setNow(900);
    await s.flush();
    expect(s.c.state).toMatchObject({ frame: 1, buffering: true }); // half a second ahead is not there yet
    expect(s.drawn.filter(([f, p]) => f > 0 && p === null)).toEqual([]); // never a frame without its picture
    await s.load(4, 5, 6); // frames 2-6 are there: the clock restarts (at 900) from frame 1
    expect(s.c.state).toMatchObject({ frame: 1, buffering: false });
    s.setNow(1000);
    await s.flush();
    expect(s.c.state).toMatchObject({ frame: 2, buffering: false });
  });

  it("stops drawing after dispose", async () => {
    const s = setup();
    s.c.attach(s.view);
    await s.flush();
    const before = s.drawn.length;
    s.c.dispose();
    s.c.step(5);
    await s.flush();
    expect(s.drawn.length).toBe(before);
  });
});
