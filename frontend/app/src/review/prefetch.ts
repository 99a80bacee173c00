// Fetching the next item ahead: while one item is reviewed, the item a claim would likely give
// next (the claim's `upcoming`) has its video, trajectories and opening frame loaded and decoded,
// so the item's first paint shows its first frame.

import { api } from "../api/endpoints";
import type { Upcoming } from "../api/types";
import { loadAhead } from "../player/frameCache";
import { frameRequestSize } from "../player/Player";
import { openingFrame, toTrack, trajectoryAhead, videoOnce } from "./targets";

const started = new Set<number>();

/** Start loading `upcoming`'s first frame (once per item; failures are ignored: the item loads
 *  as usual when it opens). */
export function prefetchUpcoming(upcoming: Upcoming): void {
  if (started.has(upcoming.item)) return;
  started.add(upcoming.item);
  void Promise.all([videoOnce(upcoming.video), Promise.all(upcoming.trajectories.map(trajectoryAhead))])
    .then(([video, trajectories]) => {
      if (trajectories.length === 0) return null; // a relation row: its video is what can be fetched ahead
      const frame = openingFrame(trajectories.map(toTrack));
      return loadAhead(api.frameUrl(video.id, frame, frameRequestSize(video)));
    })
    .catch(() => undefined);
}
