// The player's controller: turns commands (play, step, seek, speed) into model changes, keeps
// the frame cache loading ahead of the playhead, and redraws the views when something changed.
// One controller can drive several views, which is how the duplicate review plays two
// trajectories in sync.

import { FrameCache, type FrameLoader } from "./frameCache";
import {
  type FrameRange,
  lookaheadFrames,
  PlayerModel,
  type PlayerState,
  prefetchWindow,
} from "./model";
import type { FrameView, TimelineView } from "./view";

type Picture = CanvasImageSource & { width: number; height: number };

export interface PlayerControllerOptions<T extends Picture> {
  range: FrameRange; // frames the player moves over
  fps: number; // the video's frame rate
  start?: number; // first frame shown (default: range.start)
  loader: FrameLoader<T>; // fetches and decodes one frame
  cacheCapacity?: number; // decoded frames kept (default 160)
  maxInFlight?: number; // concurrent frame downloads (default 4)
  lookaheadSeconds?: number; // playback time to keep loaded ahead of the playhead (default 2)
  now?: () => number; // wall clock in ms (tests pass a fake)
  schedule?: (cb: () => void) => number; // next animation frame (tests pass a fake)
  cancel?: (handle: number) => void;
}

export class PlayerController<T extends Picture = HTMLImageElement> {
  readonly model: PlayerModel;
  readonly cache: FrameCache<T>;
  private views: FrameView[] = [];
  private timelines: TimelineView[] = [];
  private readonly lookahead: number;
  private readonly now: () => number;
  private readonly schedule: (cb: () => void) => number;
  private readonly cancel: (handle: number) => void;
  private handle: number | null = null;
  private firstFrameListeners = new Set<(frame: number) => void>();
  private errorListeners = new Set<(message: string) => void>();
  private firstFrameSeen = false;
  private disposed = false;

  constructor(opts: PlayerControllerOptions<T>) {
    this.model = new PlayerModel(opts.range, opts.fps, opts.start);
    this.cache = new FrameCache(opts.loader, { capacity: opts.cacheCapacity ?? 160, maxInFlight: opts.maxInFlight ?? 4 });
    this.lookahead = opts.lookaheadSeconds ?? 2;
    this.now = opts.now ?? (() => performance.now());
    this.schedule = opts.schedule ?? ((cb) => requestAnimationFrame(cb));
    this.cancel = opts.cancel ?? ((h) => cancelAnimationFrame(h));
    this.cache.onLoad((frame) => {
      if (frame === this.model.frame || this.model.snapshot.playing) this.invalidate();
      else this.invalidateTimeline();
    });
    this.cache.onError((frame) => {
      for (const l of this.errorListeners) l(`frame ${frame} could not be loaded`);
    });
    this.model.subscribe(() => this.invalidate());
  }

  get state(): PlayerState {
    return this.model.snapshot;
  }

  subscribe(listener: (s: PlayerState) => void): () => void {
    return this.model.subscribe(listener);
  }

  /** Called once, when a view first shows a real frame (not the placeholder). */
  onFirstFrame(listener: (frame: number) => void): () => void {
    this.firstFrameListeners.add(listener);
    return () => this.firstFrameListeners.delete(listener);
  }

  onError(listener: (message: string) => void): () => void {
    this.errorListeners.add(listener);
    return () => this.errorListeners.delete(listener);
  }

  attach(view: FrameView): () => void {
    this.views.push(view);
    this.invalidate();
    return () => {
      this.views = this.views.filter((v) => v !== view);
    };
  }

  attachTimeline(view: TimelineView): () => void {
    this.timelines.push(view);
    this.invalidate();
    return () => {
      this.timelines = this.timelines.filter((v) => v !== view);
    };
  }

  // -- commands ------------------------------------------------------------------------------
  togglePlay(): void {
    this.model.toggle(this.now());
  }

  play(): void {
    this.model.play(this.now());
  }

  pause(): void {
    this.model.pause();
  }

  step(delta: number): void {
    this.model.step(delta);
  }

  seek(frame: number): void {
    this.model.seek(frame);
  }

  replay(): void {
    this.model.replay(this.now());
  }

  faster(): void {
    this.model.shiftSpeed(1, this.now());
  }

  slower(): void {
    this.model.shiftSpeed(-1, this.now());
  }

  setSpeed(speed: number): void {
    this.model.setSpeed(speed, this.now());
  }

  dispose(): void {
    this.disposed = true;
    if (this.handle !== null) this.cancel(this.handle);
    this.handle = null;
    this.cache.dispose();
    this.views = [];
    this.timelines = [];
    this.firstFrameListeners.clear();
    this.errorListeners.clear();
  }

  /** The frames to keep loaded now: more ahead while playing (at the current speed). */
  window(): number[] {
    const s = this.model.snapshot;
    const ahead = s.playing ? lookaheadFrames(this.model.fps, s.speed, this.lookahead, 8) : 8;
    return prefetchWindow(s.frame, this.model.range, { ahead, behind: s.playing ? 1 : 4 });
  }

  /** Draw the views again (a view's zoom or pan changed; the frame did not). */
  redraw(): void {
    this.invalidate();
  }

  /** Whether `dispose` ran (the player then needs a new controller). */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Hand the controller a frame decoded elsewhere (the opening frame fetched ahead). */
  seed(frame: number, picture: T): void {
    this.cache.put(frame, picture);
  }

  /** Draw now instead of at the next animation frame: the views just attached show a frame that
   *  is already decoded in the same paint as the page around them, not one paint later. */
  flush(): void {
    if (this.disposed) return;
    if (this.handle !== null) this.cancel(this.handle);
    this.frame();
  }

  // -- drawing -------------------------------------------------------------------------------
  private dirty = true; // the views must be redrawn (state changed, or the shown frame loaded)
  private timelineDirty = true; // only the timeline changed (another frame loaded)
  private drawn: { frame: number; picture: boolean } | null = null;

  private invalidate(): void {
    this.dirty = true;
    this.request();
  }

  private invalidateTimeline(): void {
    this.timelineDirty = true;
    this.request();
  }

  private request(): void {
    if (this.handle === null && !this.disposed) this.handle = this.schedule(() => this.frame());
  }

  /** One animation frame: advance the clock, prefetch, draw what changed. Keeps running while
   *  playing; otherwise it runs only when something asked for it. */
  private frame(): void {
    this.handle = null;
    if (this.disposed) return;
    if (this.model.snapshot.playing) this.model.tick(this.now(), (f) => this.cache.has(f));
    const s = this.model.snapshot;
    // The frame on screen first, alone (the server decodes it without competing downloads);
    // the window around it once it is there.
    this.cache.prefetch(this.cache.has(s.frame) ? this.window() : [s.frame]);
    const picture = this.cache.get(s.frame);
    const stale = !this.drawn || this.drawn.frame !== s.frame || this.drawn.picture !== (picture !== null);
    if (this.dirty || stale) {
      for (const v of this.views) v.render(s.frame, picture);
      this.drawn = { frame: s.frame, picture: picture !== null };
      if (picture && !this.firstFrameSeen && this.views.length > 0) {
        this.firstFrameSeen = true;
        for (const l of this.firstFrameListeners) l(s.frame);
      }
    }
    if (this.dirty || stale || this.timelineDirty) {
      for (const t of this.timelines) t.render(s.frame, (f) => this.cache.has(f));
    }
    this.dirty = false;
    this.timelineDirty = false;
    if (s.playing) this.request();
  }
}
