// The player's views: canvases that draw what the model says, nothing else.
//
// Boxes are stored in original-image pixels. A view shows a viewport of the original image (the
// whole frame, or a window that follows one track at a zoom) and maps both the image and the
// boxes through the same transform, so a box sits on its object at any zoom and whatever size
// the server scaled the JPEG to.

import { type Box, type FrameRange, type Track, timelineSpans } from "./model";

export interface Size {
  readonly width: number;
  readonly height: number;
}

/** A rectangle of the original image, in original pixels. */
export interface Viewport {
  readonly x: number;
  readonly y: number;
  readonly w: number;
  readonly h: number;
}

export interface TrackStyle {
  readonly color: string; // stroke colour of the box and the timeline row
  readonly label: string; // drawn next to the box ("A", "#12")
}

/** Fit `aspect` (width / height) around a centre, at least `minW` wide and `minH` high, inside
 *  the image when it can be (a viewport larger than the image is centred on it). */
export function fitViewport(cx: number, cy: number, minW: number, minH: number, aspect: number, image: Size): Viewport {
  let w = Math.max(minW, minH * aspect);
  let h = w / aspect;
  if (w > image.width && h > image.height) {
    // Zoomed out past the image: show all of it, letterboxed.
    w = Math.max(image.width, image.height * aspect);
    h = w / aspect;
  }
  const clampAxis = (c: number, size: number, limit: number) =>
    size >= limit ? (limit - size) / 2 : Math.min(limit - size, Math.max(0, c - size / 2));
  return { x: clampAxis(cx, w, image.width), y: clampAxis(cy, h, image.height), w, h };
}

/** The viewport that shows the whole image in a canvas of aspect `aspect`. */
export function fullViewport(image: Size, aspect: number): Viewport {
  return fitViewport(image.width / 2, image.height / 2, image.width, image.height, aspect, image);
}

/** The part of `box` inside the image, or null when none of it is. */
export function visiblePart(box: Box, image: Size): Box | null {
  const part: Box = [Math.max(0, box[0]), Math.max(0, box[1]), Math.min(image.width, box[2]), Math.min(image.height, box[3])];
  return part[2] > part[0] && part[3] > part[1] ? part : null;
}

/** The viewport that follows `box` at `zoom` (1: the box fills a third of the view's width).
 *
 *  It follows the part of the box inside the image (an object half out of the frame has a box
 *  that is a strip at the edge), and stays inside the image only as far as that keeps the box in
 *  the middle half of the view: at an edge, the view shows what is beyond it as empty rather than
 *  slide onto whoever stands next to the object. */
export function followViewport(box: Box, zoom: number, aspect: number, image: Size): Viewport {
  if (!(zoom > 0)) throw new RangeError(`zoom must be positive, got ${zoom}`);
  const seen = visiblePart(box, image) ?? box;
  const bw = seen[2] - seen[0];
  const bh = seen[3] - seen[1];
  const cx = (seen[0] + seen[2]) / 2;
  const cy = (seen[1] + seen[3]) / 2;
  const vp = fitViewport(cx, cy, (3 * bw) / zoom, (1.6 * bh) / zoom, aspect, image);
  // the box's centre within the middle half: start between c - 3/4 size and c - 1/4 size
  const middle = (start: number, size: number, c: number) => Math.min(c - size / 4, Math.max(c - (3 * size) / 4, start));
  return { ...vp, x: middle(vp.x, vp.w, cx), y: middle(vp.y, vp.h, cy) };
}

/** A box in canvas pixels for a viewport drawn over a canvas of `canvas` size. */
export function projectBox(box: Box, viewport: Viewport, canvas: Size): { x: number; y: number; w: number; h: number } {
  const sx = canvas.width / viewport.w;
  const sy = canvas.height / viewport.h;
  return { x: (box[0] - viewport.x) * sx, y: (box[1] - viewport.y) * sy, w: (box[2] - box[0]) * sx, h: (box[3] - box[1]) * sy };
}

export interface FrameViewOptions {
  /** Follow this track (index into tracks) at `zoom`; undefined shows the whole frame (at
   *  `zoom` around `centre`, when set: the mouse wheel and drag of the main view). */
  follow?: number;
  zoom?: number;
  centre?: readonly [number, number];
  /** Tracks (by index) to draw boxes for; all when undefined. */
  draw?: readonly number[];
}

/** Draws one frame and the boxes observed on it. */
export class FrameView {
  readonly canvas: HTMLCanvasElement;
  private readonly ctx: CanvasRenderingContext2D;
  private readonly image: Size;
  private readonly tracks: readonly Track[];
  private readonly styles: readonly TrackStyle[];
  private opts: FrameViewOptions;

  constructor(canvas: HTMLCanvasElement, image: Size, tracks: readonly Track[], styles: readonly TrackStyle[],
              opts: FrameViewOptions = {}) {
    if (styles.length !== tracks.length) throw new RangeError("one style per track");
    if (opts.follow !== undefined && !(opts.follow >= 0 && opts.follow < tracks.length)) {
      throw new RangeError(`follow index ${opts.follow} is not a track`);
    }
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("this browser has no 2D canvas");
    this.canvas = canvas;
    this.ctx = ctx;
    this.image = image;
    this.tracks = tracks;
    this.styles = styles;
    this.opts = opts;
  }

  setZoom(zoom: number): void {
    this.opts = { ...this.opts, zoom };
  }

  /** Zoom the whole-frame view to `zoom` (1: all of it) around `centre` (original pixels). */
  setPanZoom(zoom: number, centre: readonly [number, number]): void {
    if (!(zoom > 0)) throw new RangeError(`zoom must be positive, got ${zoom}`);
    this.opts = { ...this.opts, zoom, centre };
  }

  viewport(frame: number): Viewport {
    const aspect = this.canvas.width / this.canvas.height;
    if (this.opts.follow === undefined) {
      const zoom = this.opts.zoom ?? 1;
      if (zoom <= 1 || !this.opts.centre) return fullViewport(this.image, aspect);
      const full = fullViewport(this.image, aspect);
      return fitViewport(this.opts.centre[0], this.opts.centre[1], full.w / zoom, full.h / zoom, aspect, this.image);
    }
    const track = this.tracks[this.opts.follow];
    // Between observations the window stays on the nearest one: steady, and honest (no box drawn).
    const box = track.boxAt(frame) ?? track.box(track.nearestIndex(frame));
    return followViewport(box, this.opts.zoom ?? 1, aspect, this.image);
  }

  /** Draw `picture` (any resolution of the frame) or, while it loads, a placeholder. */
  render(frame: number, picture: CanvasImageSource & { width: number; height: number } | null): void {
    const { ctx, canvas } = this;
    ctx.fillStyle = "#111418";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (this.opts.follow !== undefined && !this.tracks[this.opts.follow].boxAt(frame)) {
      // The followed track is not seen here: say so, and show nothing that could pass for it.
      ctx.fillStyle = "#ffd166";
      ctx.font = "14px system-ui, sans-serif";
      ctx.fillText(`${this.styles[this.opts.follow].label}: not seen on this frame`, 12, 24);
      return;
    }
    const vp = this.viewport(frame);
    if (picture) {
      // The JPEG may be downscaled: map original pixels to its pixels.
      const kx = picture.width / this.image.width;
      const ky = picture.height / this.image.height;
      const sx = Math.max(0, vp.x);
      const sy = Math.max(0, vp.y);
      const ex = Math.min(this.image.width, vp.x + vp.w);
      const ey = Math.min(this.image.height, vp.y + vp.h);
      const dx = ((sx - vp.x) / vp.w) * canvas.width;
      const dy = ((sy - vp.y) / vp.h) * canvas.height;
      const dw = ((ex - sx) / vp.w) * canvas.width;
      const dh = ((ey - sy) / vp.h) * canvas.height;
      ctx.drawImage(picture, sx * kx, sy * ky, (ex - sx) * kx, (ey - sy) * ky, dx, dy, dw, dh);
    } else {
      ctx.fillStyle = "#9aa4b2";
      ctx.font = "14px system-ui, sans-serif";
      ctx.fillText("loading frame…", 12, 24);
    }
    const draw = this.opts.draw ?? this.tracks.map((_, i) => i);
    const missing: string[] = [];
    for (const i of draw) {
      const box = this.tracks[i].boxAt(frame);
      if (!box) {
        missing.push(this.styles[i].label);
        continue;
      }
      const r = projectBox(box, vp, canvas);
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#000";
      ctx.strokeRect(r.x - 1, r.y - 1, r.w + 2, r.h + 2); // dark halo: visible on any background
      ctx.strokeStyle = this.styles[i].color;
      ctx.strokeRect(r.x, r.y, r.w, r.h);
      ctx.font = "bold 13px system-ui, sans-serif";
      const label = this.styles[i].label;
      const tw = ctx.measureText(label).width + 8;
      const ly = r.y > 18 ? r.y - 18 : r.y + r.h;
      ctx.fillStyle = this.styles[i].color;
      ctx.fillRect(r.x, ly, tw, 18);
      ctx.fillStyle = "#000";
      ctx.fillText(label, r.x + 4, ly + 13);
    }
    if (missing.length > 0) {
      const text = `no observation: ${missing.join(", ")}`;
      ctx.font = "13px system-ui, sans-serif";
      const tw = ctx.measureText(text).width + 12;
      ctx.fillStyle = "rgba(0,0,0,0.7)";
      ctx.fillRect(canvas.width - tw - 6, 6, tw, 22);
      ctx.fillStyle = "#ffd166";
      ctx.fillText(text, canvas.width - tw, 22);
    }
  }
}

/** Draws where each track is observed and where it has gaps, the loaded frames and the playhead. */
export class TimelineView {
  readonly canvas: HTMLCanvasElement;
  private readonly ctx: CanvasRenderingContext2D;
  private readonly tracks: readonly Track[];
  private readonly styles: readonly TrackStyle[];
  private readonly range: FrameRange;

  constructor(canvas: HTMLCanvasElement, tracks: readonly Track[], styles: readonly TrackStyle[], range: FrameRange) {
    const ctx = canvas.getContext("2d");
    if (!ctx) throw new Error("this browser has no 2D canvas");
    this.canvas = canvas;
    this.ctx = ctx;
    this.tracks = tracks;
    this.styles = styles;
    this.range = range;
  }

  render(frame: number, loaded: (frame: number) => boolean): void {
    const { ctx, canvas, range } = this;
    const W = canvas.width;
    const rowH = Math.max(8, Math.floor((canvas.height - 8) / this.tracks.length) - 2);
    ctx.fillStyle = "#1c2129";
    ctx.fillRect(0, 0, W, canvas.height);
    this.tracks.forEach((track, i) => {
      const y = 2 + i * (rowH + 2);
      const spans = timelineSpans(track, range);
      ctx.fillStyle = "#3a4250";
      for (const s of spans.gaps) ctx.fillRect(s.x0 * W, y + rowH / 2 - 1, (s.x1 - s.x0) * W, 2); // a thin line: nothing seen
      ctx.fillStyle = this.styles[i].color;
      for (const s of spans.observed) ctx.fillRect(s.x0 * W, y, Math.max(1, (s.x1 - s.x0) * W), rowH);
    });
    // Loaded frames: a thin strip along the bottom, like a video's buffer bar.
    const n = range.end - range.start + 1;
    ctx.fillStyle = "#6b7a90";
    for (let f = range.start; f <= range.end; f++) {
      if (loaded(f)) ctx.fillRect(((f - range.start) / n) * W, canvas.height - 3, Math.ceil(W / n), 3);
    }
    const x = ((frame - range.start + 0.5) / n) * W;
    ctx.fillStyle = "#fff";
    ctx.fillRect(x - 1, 0, 2, canvas.height);
  }
}
