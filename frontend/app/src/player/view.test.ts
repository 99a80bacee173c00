import { describe, expect, it } from "vitest";
import { fitViewport, followViewport, fullViewport, projectBox } from "./view";

const image = { width: 640, height: 360 };

describe("viewports and box projection", () => {
  it("shows the whole frame in a canvas of the same aspect", () => {
    expect(fullViewport(image, 16 / 9)).toEqual({ x: 0, y: 0, w: 640, h: 360 });
  });

  it("letterboxes the whole frame in a taller canvas", () => {
    const vp = fullViewport(image, 4 / 3);
    expect(vp.w).toBeCloseTo(640);
    expect(vp.h).toBeCloseTo(480);
    expect(vp.y).toBeCloseTo(-60);
  });

  it("maps a box to canvas pixels at any zoom and any canvas size", () => {
    const box = [100, 50, 140, 130] as const;
    expect(projectBox(box, { x: 0, y: 0, w: 640, h: 360 }, { width: 960, height: 540 })).toEqual({ x: 150, y: 75, w: 60, h: 120 });
    const vp = followViewport(box, 2, 4 / 3, image);
    const r = projectBox(box, vp, { width: 360, height: 270 });
    // The followed box sits in the middle of the view.
    expect(r.x + r.w / 2).toBeCloseTo(180);
    expect(r.y + r.h / 2).toBeCloseTo(135);
    // Zooming in makes it larger on screen.
    const r4 = projectBox(box, followViewport(box, 4, 4 / 3, image), { width: 360, height: 270 });
    expect(r4.w).toBeGreaterThan(r.w * 1.9);
  });

  it("keeps a zoomed view inside the image near its edges", () => {
    const vp = followViewport([0, 0, 20, 40], 1, 4 / 3, image);
    expect(vp.x).toBe(0);
    expect(vp.y).toBe(0);
    const far = followViewport([620, 320, 640, 360], 1, 4 / 3, image);
    expect(far.x + far.w).toBeCloseTo(640);
    expect(far.y + far.h).toBeCloseTo(360);
  });

  it("rejects a zoom of zero", () => {
    expect(() => followViewport([0, 0, 1, 1], 0, 1, image)).toThrow(/zoom/);
  });

  it("never makes a viewport thinner than asked", () => {
    const vp = fitViewport(320, 180, 100, 100, 2, image);
    expect(vp.w).toBeGreaterThanOrEqual(100);
    expect(vp.h).toBeGreaterThanOrEqual(100);
    expect(vp.w / vp.h).toBeCloseTo(2);
  });
});
