import { describe, expect, it } from "vitest";
import { fitViewport, followViewport, fullViewport, projectBox, visiblePart } from "./view";

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
    const vp = followViewport([20, 10, 40, 50], 1, 4 / 3, image);
    expect(vp.x).toBe(0);
    expect(vp.y).toBe(0);
    const far = followViewport([600, 310, 620, 350], 1, 4 / 3, image);
    expect(far.x + far.w).toBeCloseTo(640);
    expect(far.y + far.h).toBeCloseTo(360);
  });

  // issue 27, finding 15: a pair opened with one candidate half outside the image (its box a thin
  // strip at the edge); the view, pushed inside the image, showed another person in its middle.
  it("keeps the followed box in the middle half of the view, at the image's edge too", () => {
    const cases: [number, number, number, number][] = [
      [0, 100, 30, 300], [610, 100, 640, 300], [300, 0, 340, 12], [0, 0, 20, 40], [200, 120, 260, 300], [620, 320, 640, 360]];
    for (const box of cases) {
      for (const zoom of [0.5, 1, 2]) {
        const vp = followViewport(box, zoom, 4 / 3, image);
        const r = projectBox(box, vp, { width: 360, height: 270 });
        const [cx, cy] = [r.x + r.w / 2, r.y + r.h / 2];
        expect(cx).toBeGreaterThanOrEqual(90 - 1e-6);
        expect(cx).toBeLessThanOrEqual(270 + 1e-6);
        expect(cy).toBeGreaterThanOrEqual(67.5 - 1e-6);
        expect(cy).toBeLessThanOrEqual(202.5 + 1e-6);
      }
    }
    // the strip at the left edge: the view reaches about 335 px into the image, not 427 (to whoever is there)
    const edge = followViewport([0, 100, 30, 300], 1, 4 / 3, image);
    expect(edge.x).toBeLessThan(0);
    expect(edge.x + edge.w).toBeLessThanOrEqual(340);
  });

  it("follows only the part of a box inside the image", () => {
    const inside = followViewport([0, 100, 80, 300], 1, 4 / 3, image);
    expect(followViewport([-80, 100, 80, 300], 1, 4 / 3, image)).toEqual(inside);
    expect(visiblePart([-80, 100, 80, 300], image)).toEqual([0, 100, 80, 300]);
    expect(visiblePart([700, 0, 720, 10], image)).toBeNull();
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
