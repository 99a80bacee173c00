import { describe, expect, it } from "vitest";
import { Track } from "../player/model";
import { firstShared, openingFrame } from "./targets";

const track = (id: number, frames: number[]) => new Track(id, frames, frames.map(() => [0, 0, 10, 10] as [number, number, number, number]));

describe("the frame an item opens on", () => {
  it("opens a pair on the first frame both tracks are seen", () => {
    const a = track(1, [0, 1, 2, 5, 6, 9]);
    const b = track(2, [3, 4, 6, 9]);
    expect(firstShared(a, b)).toBe(6);
    expect(openingFrame([a, b])).toBe(6);
  });

  it("opens a pair that never meets on the earlier start", () => {
    const a = track(1, [10, 11]);
    const b = track(2, [2, 3]);
    expect(firstShared(a, b)).toBeNull();
    expect(openingFrame([a, b])).toBe(2);
  });

  it("opens one trajectory on its first observation", () => {
    expect(openingFrame([track(1, [7, 8, 12])])).toBe(7);
  });
});
