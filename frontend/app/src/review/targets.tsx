// What a review item shows: one trajectory (usability) or a pair (duplicates), in the player,
// with the quality signals that assist the decision (they never decide it).

import { useEffect, useState } from "react";
import { api } from "../api/endpoints";
import type { Target, TrajectoryDetail, Video } from "../api/types";
import { ErrorState, Loading } from "../components/states";
import { playRange, Track } from "../player/model";
import { Player, type PlayerTrack } from "../player/Player";

export interface TargetProps {
  target: Target;
  /** Called once when the item's first frame is on screen (for the first-frame timing). */
  onFirstFrame?: (frame: number) => void;
}

/** The target of one trajectory shown outside a review item (a video, an audit, a pair's other side). */
export function trajectoryOnly(video: number, trajectory: number): Target {
  return { video, trajectory, trajectory_a: null, trajectory_b: null, description: null, relation_row: null, pair: null };
}

export const COLORS = { single: "#ffd166", a: "#ff9f1c", b: "#2ec4b6" } as const;

// Videos never change once imported: keep them for the session so the next item of the same
// video needs one request less before its first frame (and, once known, none to wait for).
const videos = new Map<number, Promise<Video>>();
const videosKnown = new Map<number, Video>();

export function videoOnce(id: number): Promise<Video> {
  let p = videos.get(id);
  if (!p) {
    p = api.video(id);
    videos.set(id, p);
    p.then((v) => videosKnown.set(id, v), () => videos.delete(id));
  }
  return p;
}

// Trajectories fetched ahead for the next item (review/prefetch.ts), kept until their item opens.
const fetchedAhead = new Map<number, Promise<TrajectoryDetail>>();
const arrivedAhead = new Map<number, TrajectoryDetail>();

export function trajectoryAhead(id: number): Promise<TrajectoryDetail> {
  let p = fetchedAhead.get(id);
  if (!p) {
    const mine = api.trajectory(id);
    p = mine;
    fetchedAhead.set(id, mine);
    mine.then(
      (t) => fetchedAhead.get(id) === mine && arrivedAhead.set(id, t),
      () => fetchedAhead.get(id) === mine && fetchedAhead.delete(id),
    );
    while (fetchedAhead.size > 20) {
      const oldest = fetchedAhead.keys().next().value as number;
      fetchedAhead.delete(oldest);
      arrivedAhead.delete(oldest);
    }
  }
  return p;
}

function trajectoryFor(id: number, signal: AbortSignal): Promise<TrajectoryDetail> {
  const ahead = fetchedAhead.get(id);
  if (!ahead) return api.trajectory(id, signal);
  fetchedAhead.delete(id);
  arrivedAhead.delete(id);
  return ahead.catch(() => api.trajectory(id, signal));
}

/** The video and trajectories, when every one of them has already arrived (the item was fetched
 *  ahead): the item then renders its player at once, with nothing to wait for. Handed over once. */
function arrived(videoId: number, trajectoryIds: number[]): { video: Video; trajectories: TrajectoryDetail[] } | null {
  const video = videosKnown.get(videoId);
  if (!video || !trajectoryIds.every((id) => arrivedAhead.has(id))) return null;
  const trajectories = trajectoryIds.map((id) => arrivedAhead.get(id) as TrajectoryDetail);
  for (const id of trajectoryIds) {
    fetchedAhead.delete(id);
    arrivedAhead.delete(id);
  }
  return { video, trajectories };
}

/** The first frame on which both tracks are seen; null when they never are together. */
export function firstShared(a: Track, b: Track): number | null {
  const inB = new Set(b.frames);
  for (const f of a.frames) if (inB.has(f)) return f;
  return null;
}

/** The frame an item's player opens on: a trajectory's first observation, a pair's first
 *  shared frame (or, when they never meet, the earlier start). */
export function openingFrame(tracks: readonly Track[]): number {
  if (tracks.length === 2) return firstShared(tracks[0], tracks[1]) ?? Math.min(tracks[0].first, tracks[1].first);
  return tracks[0].first;
}

export function useTargetData(videoId: number, trajectoryIds: number[]) {
  const key = trajectoryIds.join(",");
  const [state, setState] = useState<{ video?: Video; trajectories?: TrajectoryDetail[]; error?: unknown; key?: string }>(() => {
    const known = trajectoryIds.length > 0 ? arrived(videoId, trajectoryIds) : null;
    return known ? { ...known, key: `${videoId}:${key}` } : {};
  });
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    if (attempt === 0 && state.key === `${videoId}:${key}`) return undefined; // arrived ahead
    const ctrl = new AbortController();
    setState({});
    Promise.all([videoOnce(videoId), Promise.all(trajectoryIds.map((id) => trajectoryFor(id, ctrl.signal)))]).then(
      ([video, trajectories]) => !ctrl.signal.aborted && setState({ video, trajectories }),
      (error: unknown) => !ctrl.signal.aborted && setState({ error }),
    );
    return () => ctrl.abort();
  }, [videoId, key, attempt]); // trajectoryIds is keyed by its contents
  return { ...state, retry: () => setAttempt((a) => a + 1) };
}

export function toTrack(t: TrajectoryDetail): Track {
  return new Track(t.id, t.frames, t.boxes);
}

export function Signals({ t, label }: { t: TrajectoryDetail; label: string }) {
  return (
    <dl className="signals" aria-label={`Quality signals of ${label}`}>
      <div><dt>category</dt><dd>{t.category}</dd></div>
      <div><dt>observations</dt><dd>{t.n_obs}</dd></div>
      <div><dt>frames</dt><dd>{t.first_frame}–{t.last_frame}</dd></div>
      <div><dt>coverage</dt><dd>{Math.round(t.temporal_coverage * 100)}%</dd></div>
      <div><dt>longest run</dt><dd>{t.longest_run}</dd></div>
      <div><dt>abrupt changes</dt><dd>{t.abrupt_changes}</dd></div>
    </dl>
  );
}

/** Usability: one trajectory over its frames with half a second of context on each side. */
export function TrajectoryTarget({ target, onFirstFrame }: TargetProps) {
  const ids = target.trajectory === null ? [] : [target.trajectory];
  const { video, trajectories, error, retry } = useTargetData(target.video, ids);
  if (target.trajectory === null) return <ErrorState error={new Error("This item names no trajectory.")} />;
  if (error) return <ErrorState error={error} onRetry={retry} title="The trajectory could not be loaded" />;
  if (!video || !trajectories) return <Loading what="the trajectory" />;
  const t = trajectories[0];
  const track = toTrack(t);
  const tracks: PlayerTrack[] = [{ track, style: { color: COLORS.single, label: `#${t.id}` } }];
  const range = playRange([track], video.frame_count, Math.round(video.fps / 2));
  return (
    <div className="target">
      <Player video={video} tracks={tracks} range={range} start={openingFrame([track])} layout="single"
        label={`Trajectory ${t.id} in ${video.name}`} onFirstFrame={onFirstFrame} />
      <Signals t={t} label={`trajectory ${t.id}`} />
    </div>
  );
}

/** Duplicates: two trajectories in sync, each followed in its own zoomed view, both boxes on
 *  the same full frame. */
export function PairTarget({ target, onFirstFrame }: TargetProps) {
  const ids = target.trajectory_a === null || target.trajectory_b === null ? [] : [target.trajectory_a, target.trajectory_b];
  const { video, trajectories, error, retry } = useTargetData(target.video, ids);
  if (ids.length !== 2) return <ErrorState error={new Error("This item does not name two trajectories.")} />;
  if (error) return <ErrorState error={error} onRetry={retry} title="The trajectories could not be loaded" />;
  if (!video || !trajectories) return <Loading what="the two trajectories" />;
  const [a, b] = trajectories;
  const tracks: PlayerTrack[] = [
    { track: toTrack(a), style: { color: COLORS.a, label: `A #${a.id}` } },
    { track: toTrack(b), style: { color: COLORS.b, label: `B #${b.id}` } },
  ];
  const range = playRange(tracks.map((p) => p.track), video.frame_count, Math.round(video.fps / 2));
  return (
    <div className="target">
      <Player video={video} tracks={tracks} range={range} layout="pair" start={openingFrame(tracks.map((p) => p.track))}
        label={`Trajectories ${a.id} and ${b.id} in ${video.name}`} onFirstFrame={onFirstFrame} />
      <div className="pair-signals">
        <Signals t={a} label={`A, trajectory ${a.id}`} />
        <Signals t={b} label={`B, trajectory ${b.id}`} />
      </div>
    </div>
  );
}
