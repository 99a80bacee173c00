// The trajectory player's model: pure state and arithmetic, no DOM.
//
// A trajectory is a sorted list of observations (frame index, box in original-image pixels).
// Frames without an observation are gaps: nothing is interpolated, so the player never draws a
// box where the tracker did not see the object. The model answers the questions the view and
// the controller ask — which box is on this frame, where are the gaps, which frame is at this
// time, which frames to fetch next — and owns the playback clock, so all of it is unit-tested
// without a browser.

import { count } from "../components/plural";

/** A box `[x1, y1, x2, y2]` in original-image pixels. */
export type Box = readonly [number, number, number, number];

/** An inclusive range of frame indices `[start, end]`. */
export interface FrameRange {
  readonly start: number;
  readonly end: number;
}

/** One trajectory's observations, validated and packed for binary search. */
export class Track {
  readonly id: number;
  readonly frames: Int32Array; // [N] strictly increasing frame indices
  readonly boxes: Float32Array; // [N * 4] x1, y1, x2, y2 per observation

  constructor(id: number, frames: ArrayLike<number>, boxes: ArrayLike<ArrayLike<number>>) {
    if (frames.length === 0) throw new RangeError(`track ${id}: a trajectory needs at least one observation`);
    if (boxes.length !== frames.length) {
      throw new RangeError(`track ${id}: ${count(frames.length, "frame")} but ${count(boxes.length, "box")}`);
    }
    this.id = id;
    this.frames = new Int32Array(frames.length);
    this.boxes = new Float32Array(frames.length * 4);
    for (let i = 0; i < frames.length; i++) {
      const f = frames[i];
      if (!Number.isInteger(f) || f < 0) throw new RangeError(`track ${id}: frame ${f} is not a non-negative integer`);
      if (i > 0 && f <= frames[i - 1]) throw new RangeError(`track ${id}: frames must increase strictly (${frames[i - 1]} then ${f})`);
      const b = boxes[i];
      if (b.length !== 4 || !(b[2] > b[0]) || !(b[3] > b[1])) {
        throw new RangeError(`track ${id}: box on frame ${f} is not [x1, y1, x2, y2] with x2 > x1 and y2 > y1`);
      }
      this.frames[i] = f;
      this.boxes.set([b[0], b[1], b[2], b[3]], i * 4);
    }
  }

  get length(): number {
    return this.frames.length;
  }

  get first(): number {
    return this.frames[0];
  }

  get last(): number {
    return this.frames[this.frames.length - 1];
  }

  /** Index of the observation on `frame`, or -1 when the frame is a gap or outside the track. */
  indexAt(frame: number): number {
    const i = this.lowerBound(frame);
    return i < this.frames.length && this.frames[i] === frame ? i : -1;
  }

  /** The box observed on `frame`, or null (no interpolation over gaps). */
  boxAt(frame: number): Box | null {
    const i = this.indexAt(frame);
    return i < 0 ? null : this.box(i);
  }

  box(index: number): Box {
    const o = index * 4;
    return [this.boxes[o], this.boxes[o + 1], this.boxes[o + 2], this.boxes[o + 3]];
  }

  /** The index of the observation closest in time to `frame` (earlier one on a tie). */
  nearestIndex(frame: number): number {
    const i = this.lowerBound(frame);
    if (i === 0) return 0;
    if (i === this.frames.length) return i - 1;
    return frame - this.frames[i - 1] <= this.frames[i] - frame ? i - 1 : i;
  }

  /** The first observed frame after `frame`, or null. */
  nextObserved(frame: number): number | null {
    const i = this.lowerBound(frame + 1);
    return i < this.frames.length ? this.frames[i] : null;
  }

  /** The last observed frame before `frame`, or null. */
  previousObserved(frame: number): number | null {
    const i = this.lowerBound(frame) - 1;
    return i >= 0 ? this.frames[i] : null;
  }

  /** Maximal runs of consecutive observed frames, as inclusive ranges in time order. */
  runs(): FrameRange[] {
    const out: FrameRange[] = [];
    let start = this.frames[0];
    for (let i = 1; i <= this.frames.length; i++) {
      if (i === this.frames.length || this.frames[i] !== this.frames[i - 1] + 1) {
        out.push({ start, end: this.frames[i - 1] });
        if (i < this.frames.length) start = this.frames[i];
      }
    }
    return out;
  }

  /** Missing frames between the first and last observation, as inclusive ranges of at least
   *  `minLength` frames (a detector that fires every other frame has gaps of length 1). */
  gaps(minLength = 1): FrameRange[] {
    if (!(minLength >= 1)) throw new RangeError(`minLength must be >= 1, got ${minLength}`);
    const out: FrameRange[] = [];
    for (let i = 1; i < this.frames.length; i++) {
      const start = this.frames[i - 1] + 1;
      const end = this.frames[i] - 1;
      if (end - start + 1 >= minLength) out.push({ start, end });
    }
    return out;
  }

  private lowerBound(frame: number): number {
    let lo = 0;
    let hi = this.frames.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.frames[mid] < frame) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

// -- time ------------------------------------------------------------------------------------
/** Seconds from the start of the video to the start of `frame`. */
export function frameToTime(frame: number, fps: number): number {
  if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
  return frame / fps;
}

/** The frame shown at `seconds` (the frame whose interval contains it), clamped to the video.
 *  A small epsilon absorbs float error, so `timeToFrame(frameToTime(f)) === f`. */
export function timeToFrame(seconds: number, fps: number, frameCount: number): number {
  if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
  if (!(frameCount >= 1)) throw new RangeError(`frameCount must be >= 1, got ${frameCount}`);
  const f = Math.floor(seconds * fps + 1e-6);
  return Math.min(frameCount - 1, Math.max(0, f));
}

/** `m:ss.t` for a time in seconds, for labels next to the frame number. */
export function formatTime(seconds: number): string {
  const m = Math.floor(seconds / 60);
  const s = seconds - m * 60;
  return `${m}:${s.toFixed(1).padStart(4, "0")}`;
}

// -- which frames to show --------------------------------------------------------------------
/** The frames a review item plays: the union of its tracks with `margin` frames of context on
 *  each side, clamped to the video. */
export function playRange(tracks: readonly Track[], frameCount: number, margin: number): FrameRange {
  if (tracks.length === 0) throw new RangeError("playRange needs at least one track");
  const first = Math.min(...tracks.map((t) => t.first));
  const last = Math.max(...tracks.map((t) => t.last));
  return { start: Math.max(0, first - margin), end: Math.min(frameCount - 1, last + margin) };
}

export interface PrefetchOptions {
  ahead: number; // frames after the playhead to keep loaded
  behind: number; // frames before the playhead (stepping back is common while reviewing)
}

/** Frames to have loaded around `frame`, most urgent first: the frame itself, then the frames
 *  ahead in playing order, then the frames behind, nearest first. Stays inside `range`. */
export function prefetchWindow(frame: number, range: FrameRange, opts: PrefetchOptions): number[] {
  if (opts.ahead < 0 || opts.behind < 0) throw new RangeError("prefetch window sizes must be >= 0");
  const f = Math.min(range.end, Math.max(range.start, frame));
  const out = [f];
  for (let i = 1; i <= opts.ahead && f + i <= range.end; i++) out.push(f + i);
  for (let i = 1; i <= opts.behind && f - i >= range.start; i++) out.push(f - i);
  return out;
}

/** How far ahead to prefetch: `seconds` of playback at the current speed, at least `minFrames`. */
export function lookaheadFrames(fps: number, speed: number, seconds: number, minFrames: number): number {
  return Math.max(minFrames, Math.ceil(fps * speed * seconds));
}

// -- timeline geometry -----------------------------------------------------------------------
/** A horizontal span as fractions `[x0, x1)` of the timeline's width. */
export interface Span {
  readonly x0: number;
  readonly x1: number;
}

/** Where a track is observed and where it has gaps, as fractions of a timeline over `range`
 *  (each frame owns `1 / (range length)` of the width). */
export function timelineSpans(track: Track, range: FrameRange): { observed: Span[]; gaps: Span[] } {
  const n = range.end - range.start + 1;
  const toSpan = (r: FrameRange): Span | null => {
    const a = Math.max(r.start, range.start);
    const b = Math.min(r.end, range.end);
    return b < a ? null : { x0: (a - range.start) / n, x1: (b - range.start + 1) / n };
  };
  const keep = (s: Span | null): s is Span => s !== null;
  return { observed: track.runs().map(toSpan).filter(keep), gaps: track.gaps().map(toSpan).filter(keep) };
}

/** The frame under a pointer at fraction `x` of a timeline over `range`. */
export function frameAtFraction(x: number, range: FrameRange): number {
  const n = range.end - range.start + 1;
  return Math.min(range.end, Math.max(range.start, range.start + Math.floor(x * n)));
}

// -- playback --------------------------------------------------------------------------------
export const SPEEDS = [0.25, 0.5, 1, 2, 4] as const;

export interface PlayerState {
  readonly frame: number;
  readonly playing: boolean;
  readonly speed: number;
  readonly buffering: boolean;
}

/** Playback time that must be loaded ahead before playback resumes after a wait (seconds). */
export const RESUME_AHEAD_S = 0.5;

/** Playhead, play/pause and speed over a frame range, with a wall-clock driven `tick`.
 *
 *  Playback follows the clock, but never shows a frame that has not loaded and never skips one:
 *  `tick` moves through the loaded frames that follow the playhead, up to where the clock is. When
 *  the next frame is missing it holds the playhead (buffering) until `RESUME_AHEAD_S` of playback
 *  after it has loaded, then restarts the clock from there, so a cold cache plays in steady runs
 *  instead of jumping to whatever frame happened to arrive first. */
export class PlayerModel {
  readonly range: FrameRange;
  readonly fps: number;
  private state: PlayerState;
  private anchorMs = 0; // wall time at which the clock was last (re)started
  private anchorFrame = 0; // playhead at that time
  private lastNowMs = 0; // the latest wall time seen: a seek while playing restarts the clock there
  private listeners = new Set<(s: PlayerState) => void>();

  constructor(range: FrameRange, fps: number, start?: number) {
    if (!(fps > 0)) throw new RangeError(`fps must be positive, got ${fps}`);
    if (!Number.isInteger(range.start) || !Number.isInteger(range.end) || range.start < 0 || range.end < range.start) {
      throw new RangeError(`bad frame range [${range.start}, ${range.end}]`);
    }
    this.range = range;
    this.fps = fps;
    this.state = { frame: this.clamp(start ?? range.start), playing: false, speed: 1, buffering: false };
  }

  get snapshot(): PlayerState {
    return this.state;
  }

  get frame(): number {
    return this.state.frame;
  }

  subscribe(listener: (s: PlayerState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  seek(frame: number): void {
    const f = this.clamp(Math.round(frame));
    this.anchorFrame = f;
    this.anchorMs = this.lastNowMs;
    this.set({ frame: f });
  }

  step(delta: number): void {
    this.pause();
    this.seek(this.state.frame + delta);
  }

  play(nowMs: number): void {
    if (this.state.playing) return;
    const frame = this.state.frame >= this.range.end ? this.range.start : this.state.frame;
    this.lastNowMs = nowMs;
    this.anchorMs = nowMs;
    this.anchorFrame = frame;
    this.set({ frame, playing: true, buffering: false });
  }

  pause(): void {
    if (this.state.playing || this.state.buffering) this.set({ playing: false, buffering: false });
  }

  toggle(nowMs: number): void {
    if (this.state.playing) this.pause();
    else this.play(nowMs);
  }

  /** Back to the start of the range and play: the "watch it again" of a review. */
  replay(nowMs: number): void {
    this.pause();
    this.seek(this.range.start);
    this.play(nowMs);
  }

  setSpeed(speed: number, nowMs: number): void {
    if (!(speed > 0)) throw new RangeError(`speed must be positive, got ${speed}`);
    this.lastNowMs = nowMs;
    this.anchorMs = nowMs; // the clock restarts from the current frame at the new rate
    this.anchorFrame = this.state.frame;
    this.set({ speed });
  }

  /** The next speed in SPEEDS up (`+1`) or down (`-1`), staying at the ends. */
  shiftSpeed(direction: 1 | -1, nowMs: number): void {
    const i = SPEEDS.findIndex((s) => s >= this.state.speed);
    const at = i < 0 ? SPEEDS.length - 1 : i;
    const next = SPEEDS[Math.min(SPEEDS.length - 1, Math.max(0, at + direction))];
    this.setSpeed(next, nowMs);
  }

  /** Advance the playhead for wall time `nowMs`; `ready(f)` says whether frame f has loaded.
   *  Returns true when the state changed. */
  tick(nowMs: number, ready: (frame: number) => boolean): boolean {
    if (!this.state.playing) return false;
    this.lastNowMs = nowMs;
    if (this.state.buffering) {
      // Waiting: play on once the frames of the next RESUME_AHEAD_S are all there.
      const need = Math.min(this.range.end - this.state.frame, Math.max(1, Math.ceil(this.fps * this.state.speed * RESUME_AHEAD_S)));
      for (let f = this.state.frame + 1; f <= this.state.frame + need; f++) {
        if (!ready(f)) return false;
      }
      this.anchorMs = nowMs;
      this.anchorFrame = this.state.frame;
      this.set({ buffering: false });
      return true;
    }
    const elapsed = Math.max(0, nowMs - this.anchorMs) / 1000;
    const target = Math.min(this.range.end, this.anchorFrame + Math.floor(elapsed * this.fps * this.state.speed + 1e-6));
    if (target <= this.state.frame) return false;
    let shown = this.state.frame;
    while (shown < target && ready(shown + 1)) shown++; // the loaded frames that follow, in order
    if (shown < target) {
      // The next frame is missing: show what is there and wait for it (and the frames after it).
      this.anchorMs = nowMs;
      this.anchorFrame = shown;
      this.set({ frame: shown, buffering: true });
      return true;
    }
    const ended = shown >= this.range.end;
    this.set({ frame: shown, buffering: false, playing: !ended });
    return true;
  }

  private clamp(frame: number): number {
    return Math.min(this.range.end, Math.max(this.range.start, frame));
  }

  private set(patch: Partial<PlayerState>): void {
    this.state = { ...this.state, ...patch };
    for (const l of this.listeners) l(this.state);
  }
}
