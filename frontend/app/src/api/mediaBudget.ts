// The page's budget of media downloads (video frames, crops).
//
// Over HTTP/1.1 a browser opens at most six connections to one server, and a request waits in the
// browser for a free one before the server ever sees it. A screen that asks for a dozen crops and a
// window of frames at once would hold all six while a vote or a claim waits behind them. Media take
// at most `MEDIA_SLOTS` connections at a time, so an API call always finds one free: waiting media
// are started by priority (the frames a player shows, then frames fetched ahead for the next item,
// then crops), in the order asked within one priority; a waiter whose signal aborts (its item was
// left) leaves the queue, and an aborted download gives its slot back at once.

export const MEDIA_SLOTS = 3;
export type MediaPriority = "frame" | "ahead" | "crop";
const RANK: Record<MediaPriority, number> = { frame: 0, ahead: 1, crop: 2 };

interface Waiter {
  rank: number;
  seq: number;
  grant: (release: () => void) => void;
}

export class MediaBudget {
  private busy = 0;
  private seq = 0;
  private waiting: Waiter[] = [];

  constructor(readonly slots: number) {
    if (!(slots >= 1)) throw new RangeError("a media budget needs at least one slot");
  }

  /** Downloads running and waiting (for tests and the perf overlay). */
  get load(): { busy: number; waiting: number } {
    return { busy: this.busy, waiting: this.waiting.length };
  }

  /** A slot: resolves with its release function once one is free; rejects with an AbortError
   *  when `signal` aborts first. Release exactly once, when the download settles. */
  acquire(priority: MediaPriority, signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted) return Promise.reject(new DOMException("aborted", "AbortError"));
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { rank: RANK[priority], seq: this.seq++, grant: resolve };
      const abort = () => {
        const i = this.waiting.indexOf(waiter);
        if (i >= 0) {
          this.waiting.splice(i, 1);
          reject(new DOMException("aborted", "AbortError"));
        }
      };
      signal?.addEventListener("abort", abort, { once: true });
      waiter.grant = (release) => {
        signal?.removeEventListener("abort", abort);
        resolve(release);
      };
      this.waiting.push(waiter);
      this.waiting.sort((a, b) => a.rank - b.rank || a.seq - b.seq);
      this.next();
    });
  }

  private next(): void {
    while (this.busy < this.slots && this.waiting.length > 0) {
      const waiter = this.waiting.shift() as Waiter;
      this.busy += 1;
      let released = false;
      waiter.grant(() => {
        if (released) return;
        released = true;
        this.busy -= 1;
        this.next();
      });
    }
  }
}

/** The page's one budget. */
export const mediaBudget = new MediaBudget(MEDIA_SLOTS);
