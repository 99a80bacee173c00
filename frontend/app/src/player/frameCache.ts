// Decoded frames by index, loaded ahead of the playhead.
//
// The controller asks for a prefetch window (most urgent first) on every move; the cache starts
// at most `maxInFlight` downloads at a time in that order, drops queued frames that left the
// window, and evicts the least recently used frames beyond `capacity`. Loading is injected, so
// the scheduling is unit-tested without a browser.

import { type MediaPriority, mediaBudget } from "../api/mediaBudget";

export type FrameLoader<T> = (frame: number, signal: AbortSignal) => Promise<T>;

export interface FrameCacheOptions {
  capacity: number; // decoded frames kept (least recently used evicted first)
  maxInFlight: number; // concurrent downloads; more only queue behind each other on the server
}

export class FrameCache<T> {
  private readonly loader: FrameLoader<T>;
  private readonly opts: FrameCacheOptions;
  private readonly loaded = new Map<number, T>(); // insertion order = recency
  private readonly inFlight = new Map<number, AbortController>();
  private queue: number[] = [];
  private failed = new Set<number>();
  private listeners = new Set<(frame: number) => void>();
  private errorListeners = new Set<(frame: number, error: unknown) => void>();
  private disposed = false;

  constructor(loader: FrameLoader<T>, opts: FrameCacheOptions) {
    if (!(opts.capacity >= 1) || !(opts.maxInFlight >= 1)) {
      throw new RangeError("frame cache capacity and maxInFlight must be >= 1");
    }
    this.loader = loader;
    this.opts = opts;
  }

  has(frame: number): boolean {
    return this.loaded.has(frame);
  }

  /** The decoded frame, or null; marks it recently used. */
  get(frame: number): T | null {
    const value = this.loaded.get(frame);
    if (value === undefined) return null;
    this.loaded.delete(frame);
    this.loaded.set(frame, value);
    return value;
  }

  /** Frames currently downloading (for tests and the buffer indicator). */
  get pending(): number[] {
    return [...this.inFlight.keys()];
  }

  get loadedFrames(): number[] {
    return [...this.loaded.keys()];
  }

  /** Called with the frame index whenever a frame finishes loading. */
  onLoad(listener: (frame: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  onError(listener: (frame: number, error: unknown) => void): () => void {
    this.errorListeners.add(listener);
    return () => this.errorListeners.delete(listener);
  }

  /** Make `window` (most urgent first) the set of frames to load. Downloads of frames that left
   *  the window are cancelled; loaded frames in the window are marked recently used so
   *  eviction spares them; frames that failed stay failed until `retry`. */
  prefetch(window: readonly number[]): void {
    if (this.disposed) return;
    const wanted = new Set(window);
    for (const [frame, ctrl] of this.inFlight) {
      if (!wanted.has(frame)) {
        ctrl.abort();
        this.inFlight.delete(frame);
      }
    }
    for (let i = window.length - 1; i >= 0; i--) this.get(window[i]); // urgent ones most recent
    this.queue = window.filter((f) => !this.loaded.has(f) && !this.inFlight.has(f) && !this.failed.has(f));
    this.pump();
  }

  /** Forget a failed frame so a later prefetch tries it again. */
  retry(frame: number): void {
    this.failed.delete(frame);
  }

  dispose(): void {
    this.disposed = true;
    for (const ctrl of this.inFlight.values()) ctrl.abort();
    this.inFlight.clear();
    this.queue = [];
    this.loaded.clear();
    this.listeners.clear();
    this.errorListeners.clear();
  }

  private pump(): void {
    while (this.inFlight.size < this.opts.maxInFlight && this.queue.length > 0) {
      const frame = this.queue.shift() as number;
      const ctrl = new AbortController();
      this.inFlight.set(frame, ctrl);
      this.loader(frame, ctrl.signal).then(
        (value) => {
          if (this.inFlight.get(frame) !== ctrl) return; // cancelled meanwhile
          this.inFlight.delete(frame);
          this.store(frame, value);
          for (const l of this.listeners) l(frame);
          this.pump();
        },
        (error: unknown) => {
          if (this.inFlight.get(frame) !== ctrl) return;
          this.inFlight.delete(frame);
          this.failed.add(frame);
          for (const l of this.errorListeners) l(frame, error);
          this.pump();
        },
      );
    }
  }

  /** Add a frame decoded elsewhere (the opening frame fetched ahead of its player). */
  put(frame: number, value: T): void {
    if (this.disposed) return;
    this.failed.delete(frame);
    this.store(frame, value);
  }

  private store(frame: number, value: T): void {
    this.loaded.set(frame, value);
    while (this.loaded.size > this.opts.capacity) {
      const oldest = this.loaded.keys().next().value as number;
      this.loaded.delete(oldest);
    }
  }
}

/** Load and decode one image (decoded before it is handed out, so drawing never stalls). */
/** Load and decode the image at `url` within the page's media budget (api/mediaBudget.ts): it
 *  waits for a slot by `priority`, and an abort (its item left) cancels the wait or the download
 *  and gives the slot back. */
export async function loadImage(url: string, signal: AbortSignal, priority: MediaPriority = "frame"): Promise<HTMLImageElement> {
  const release = await mediaBudget.acquire(priority, signal);
  try {
    return await downloadImage(url, signal);
  } finally {
    release();
  }
}

function downloadImage(url: string, signal: AbortSignal): Promise<HTMLImageElement> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new DOMException("aborted", "AbortError"));
      return;
    }
    const img = new Image();
    img.decoding = "async";
    const abort = () => {
      img.src = "";
      reject(new DOMException("aborted", "AbortError"));
    };
    signal.addEventListener("abort", abort, { once: true });
    img.onload = () => {
      signal.removeEventListener("abort", abort); // a later abort must not blank a loaded image
      img.decode().then(
        () => resolve(img),
        () => resolve(img), // decode() can reject for detached images; onload already means usable
      );
    };
    img.onerror = () => {
      signal.removeEventListener("abort", abort);
      reject(new Error(`could not load ${url}`));
    };
    img.src = url;
  });
}

// Frames loaded ahead of the player that will show them (the next review item's opening frame,
// review/prefetch.ts), by address. The player takes its opening frame from here already decoded,
// so it draws it on its first paint; a download still under way is joined, not repeated.
const AHEAD_KEPT = 8;
interface Ahead {
  image: Promise<HTMLImageElement>;
  decoded: HTMLImageElement | null;
  ctrl: AbortController;
  joined: boolean; // a player waits on it (loadFrameImage): never cancelled under it
}
const ahead = new Map<string, Ahead>();

/** Start loading and decoding `url` for a player that does not exist yet (once per address). An
 *  entry pushed out by newer ones (the reviewer moved on faster than they loaded) gives up its
 *  wait or its download, so it holds no media slot the current screen needs. */
export function loadAhead(url: string): Promise<HTMLImageElement> {
  const known = ahead.get(url);
  if (known) return known.image;
  const ctrl = new AbortController();
  const entry: Ahead = { image: loadImage(url, ctrl.signal, "ahead"), decoded: null, ctrl, joined: false };
  entry.image.then(
    (img) => {
      entry.decoded = img;
    },
    () => ahead.get(url) === entry && ahead.delete(url),
  );
  ahead.set(url, entry);
  while (ahead.size > AHEAD_KEPT) {
    const oldest = ahead.keys().next().value as string;
    const dropped = ahead.get(oldest) as Ahead;
    ahead.delete(oldest);
    if (!dropped.decoded && !dropped.joined) dropped.ctrl.abort();
  }
  return entry.image;
}

/** The image at `url` if it was loaded ahead and is decoded, handed over once; null otherwise. */
export function takeDecodedAhead(url: string): HTMLImageElement | null {
  const entry = ahead.get(url);
  if (!entry?.decoded) return null;
  ahead.delete(url);
  return entry.decoded;
}

/** `loadImage`, joining a download of the same address started ahead. The entry stays for the
 *  player it was loaded for (the current item's player may show the next item's opening frame
 *  too: both then draw the same decoded image, which nothing changes). */
export function loadFrameImage(url: string, signal: AbortSignal): Promise<HTMLImageElement> {
  const entry = ahead.get(url);
  if (entry) entry.joined = true;
  return entry ? entry.image : loadImage(url, signal);
}
