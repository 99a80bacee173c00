import { afterEach, describe, expect, it, vi } from "vitest";
import { FrameCache, loadAhead, loadFrameImage, takeDecodedAhead } from "./frameCache";

/** A loader whose downloads finish when the test says so. */
function manualLoader() {
  const calls: { frame: number; signal: AbortSignal; resolve: (v: string) => void; reject: (e: unknown) => void }[] = [];
  const loader = (frame: number, signal: AbortSignal) =>
    new Promise<string>((resolve, reject) => calls.push({ frame, signal, resolve, reject }));
  const finish = async (frame: number) => {
    const c = [...calls].reverse().find((x) => x.frame === frame && !x.signal.aborted); // the latest request
    if (!c) throw new Error(`frame ${frame} is not loading`);
    c.resolve(`img${frame}`);
    await Promise.resolve();
    await Promise.resolve();
  };
  return { calls, loader, finish };
}

describe("FrameCache", () => {
  it("loads the window in priority order, a few at a time", async () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 10, maxInFlight: 2 });
    cache.prefetch([5, 6, 7, 4]);
    expect(m.calls.map((c) => c.frame)).toEqual([5, 6]);
    await m.finish(5);
    expect(cache.get(5)).toBe("img5");
    expect(m.calls.map((c) => c.frame)).toEqual([5, 6, 7]);
    await m.finish(6);
    await m.finish(7);
    expect(m.calls.map((c) => c.frame)).toEqual([5, 6, 7, 4]);
  });

  it("cancels downloads that left the window and never requests a frame twice", async () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 10, maxInFlight: 2 });
    cache.prefetch([1, 2, 3]);
    cache.prefetch([2, 3, 4]); // the playhead moved on: 1 is no longer wanted
    expect(m.calls.find((c) => c.frame === 1)?.signal.aborted).toBe(true);
    expect(m.calls.filter((c) => c.frame === 2)).toHaveLength(1);
    expect(cache.pending.sort()).toEqual([2, 3]);
    m.calls.find((c) => c.frame === 1)?.resolve("late"); // a cancelled download that still finishes
    await Promise.resolve();
    expect(cache.has(1)).toBe(false);
  });

  it("evicts the least recently used frames, sparing the window", async () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 3, maxInFlight: 4 });
    cache.prefetch([1, 2, 3]);
    for (const f of [1, 2, 3]) await m.finish(f);
    cache.prefetch([1, 4]); // 1 is touched, so 2 is the oldest
    await m.finish(4);
    expect(cache.loadedFrames.sort()).toEqual([1, 3, 4]);
  });

  it("reports a failed frame once and retries it only when asked", async () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 3, maxInFlight: 1 });
    const errors: number[] = [];
    const loads: number[] = [];
    cache.onError((f) => errors.push(f));
    cache.onLoad((f) => loads.push(f));
    cache.prefetch([9]);
    m.calls[0].reject(new Error("404"));
    await Promise.resolve();
    await Promise.resolve();
    expect(errors).toEqual([9]);
    cache.prefetch([9]);
    expect(m.calls).toHaveLength(1);
    cache.retry(9);
    cache.prefetch([9]);
    await m.finish(9);
    expect(loads).toEqual([9]);
  });

  it("stops everything when disposed", () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 3, maxInFlight: 2 });
    cache.prefetch([1, 2, 3]);
    cache.dispose();
    expect(m.calls.every((c) => c.signal.aborted)).toBe(true);
    cache.prefetch([4]);
    expect(m.calls).toHaveLength(2);
  });

  it("rejects a useless configuration", () => {
    expect(() => new FrameCache(async () => 1, { capacity: 0, maxInFlight: 1 })).toThrow(/capacity/);
  });
});

/** A stand-in for the browser's Image: loading starts when `src` is set and ends when the test
 *  says so; every image made is listed. */
class FakeImage {
  static made: FakeImage[] = [];
  decoding = "";
  onload: (() => void) | null = null;
  onerror: (() => void) | null = null;
  private source = "";
  constructor() {
    FakeImage.made.push(this);
  }
  set src(url: string) {
    this.source = url;
  }
  get src() {
    return this.source;
  }
  decode() {
    return Promise.resolve();
  }
}

const settle = async () => {
  for (let i = 0; i < 4; i++) await Promise.resolve();
};

describe("frames loaded ahead of their player", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    FakeImage.made = [];
  });

  it("hands a decoded frame over once, and joins a download still under way instead of repeating it", async () => {
    vi.stubGlobal("Image", FakeImage);
    void loadAhead("/f/1.jpg");
    void loadAhead("/f/1.jpg"); // once per address
    await settle(); // a download starts once the page's media budget gives it a slot
    expect(FakeImage.made).toHaveLength(1);
    expect(takeDecodedAhead("/f/1.jpg")).toBeNull(); // not loaded yet
    FakeImage.made[0].onload?.();
    await settle();
    expect(takeDecodedAhead("/f/1.jpg")).toBe(FakeImage.made[0]);
    expect(takeDecodedAhead("/f/1.jpg")).toBeNull(); // handed over once

    void loadAhead("/f/2.jpg");
    const joined = loadFrameImage("/f/2.jpg", new AbortController().signal);
    await settle();
    expect(FakeImage.made).toHaveLength(2); // the current player's request joined the one under way
    FakeImage.made[1].onload?.();
    await expect(joined).resolves.toBe(FakeImage.made[1]);
    await settle();
    expect(takeDecodedAhead("/f/2.jpg")).toBe(FakeImage.made[1]); // still there for the next item's player
    const plain = new AbortController();
    void loadFrameImage("/f/3.jpg", plain.signal).catch(() => undefined);
    await settle();
    expect(FakeImage.made).toHaveLength(3); // nothing ahead: a plain load
    plain.abort(); // gives its slot back
  });

  it("gives up a frame fetched ahead that newer ones push out, unless a player waits on it", async () => {
    vi.stubGlobal("Image", FakeImage);
    const dropped = loadAhead("/g/0.jpg");
    const kept = loadAhead("/g/1.jpg");
    void loadFrameImage("/g/1.jpg", new AbortController().signal); // a player joined this one
    for (let i = 2; i < 10; i++) void loadAhead(`/g/${i}.jpg`).catch(() => undefined);
    await expect(dropped).rejects.toMatchObject({ name: "AbortError" });
    let settled = false;
    kept.then(() => (settled = true), () => (settled = true));
    await settle();
    expect(settled).toBe(false); // still loading for its player
    for (let round = 0; round < 12; round++) { // let every load finish: the page's budget is shared
      for (const img of FakeImage.made.splice(0)) img.onload?.();
      await settle();
    }
    expect(settled).toBe(true);
  });

  it("forgets a frame whose download failed, so it can be tried again", async () => {
    vi.stubGlobal("Image", FakeImage);
    void loadAhead("/f/9.jpg").catch(() => undefined);
    await settle();
    FakeImage.made[0].onerror?.();
    await settle();
    expect(takeDecodedAhead("/f/9.jpg")).toBeNull();
    void loadAhead("/f/9.jpg");
    await settle();
    expect(FakeImage.made).toHaveLength(2);
  });
});

describe("FrameCache.put", () => {
  it("adds a frame decoded elsewhere, so the window does not fetch it", () => {
    const m = manualLoader();
    const cache = new FrameCache(m.loader, { capacity: 10, maxInFlight: 2 });
    cache.put(5, "seeded5");
    cache.prefetch([5, 6]);
    expect(cache.get(5)).toBe("seeded5");
    expect(m.calls.map((c) => c.frame)).toEqual([6]);
  });
});
