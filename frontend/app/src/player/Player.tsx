// The thin React wrapper of the player: it makes the canvases, builds the controller and views
// (plain TypeScript) once per item, binds the player's shortcuts, and shows the controls. All
// playback logic lives in model.ts / controller.ts.

import { useEffect, useLayoutEffect, useRef, useState, useSyncExternalStore } from "react";
import { api } from "../api/endpoints";
import type { Crop, Video } from "../api/types";
import { MediaImage } from "../components/MediaImage";
import { count } from "../components/plural";
import { ariaKeys, useShortcut } from "../keyboard/useShortcut";
import { PlayerController } from "./controller";
import { loadFrameImage, takeDecodedAhead } from "./frameCache";
import { type FrameRange, formatTime, frameAtFraction, frameToTime, SPEEDS, type Track } from "./model";
import { FrameView, TimelineView, type TrackStyle } from "./view";

export type { TrackStyle };

export interface PlayerTrack {
  track: Track;
  style: TrackStyle;
}

export interface PlayerProps {
  video: Video;
  tracks: PlayerTrack[];
  range: FrameRange;
  start?: number;
  /** "single": the whole frame and a zoomed view following the track; "pair": the whole frame
   *  with both boxes between two zoomed views, A's on the left and B's on the right;
   *  "overview": the whole frame with every box (the relation row's candidates, each followed
   *  in its own `TrackView`). */
  layout: "single" | "pair" | "overview";
  label: string;
  /** Show each track's strip of crops under the player (default true). */
  crops?: boolean;
  onFirstFrame?: (frame: number) => void;
  onController?: (controller: PlayerController | null) => void;
}

const MAIN_WIDTH = 960;
const ZOOM_WIDTH = 360;

/** The size (longest side) the player asks the server for its frames: the prefetch of the next
 *  item asks for the same address, so the player finds that frame decoded when the item opens. */
export function frameRequestSize(video: Pick<Video, "width" | "height">): number {
  return Math.min(Math.max(video.width, video.height), MAIN_WIDTH);
}

export function Player(props: PlayerProps) {
  const { video, range, tracks } = props;
  // One controller per item (video, range and tracks): a new key mounts a new player.
  const key = `${video.id}:${range.start}:${range.end}:${tracks.map((t) => t.track.id).join(",")}`;
  return <PlayerUI key={key} {...props} />;
}

/** The player's controller, its opening frame taken decoded from what was fetched ahead (when it
 *  was), so the first paint can show it. */
function makeController({ video, range, start }: Pick<PlayerProps, "video" | "range" | "start">): PlayerController {
  const maxSize = frameRequestSize(video);
  const controller = new PlayerController({
    range,
    fps: video.fps,
    start,
    loader: (frame, signal) => loadFrameImage(api.frameUrl(video.id, frame, maxSize), signal),
  });
  const opening = controller.state.frame;
  const decoded = takeDecodedAhead(api.frameUrl(video.id, opening, maxSize));
  if (decoded) controller.seed(opening, decoded);
  return controller;
}

function PlayerUI({ video, tracks, range, start, layout, label, crops = true, onFirstFrame, onController }: PlayerProps) {
  const [controller, setController] = useState(() => makeController({ video, range, start }));
  useEffect(() => {
    // An effect run again on the same state (a hot reload in development) finds the controller
    // disposed by the cleanup before it: it gets a new one.
    if (controller.isDisposed) setController(makeController({ video, range, start }));
    return () => controller.dispose(); // disposing cancels its downloads
  }, [controller]);
  const main = useRef<HTMLCanvasElement>(null);
  const zoomA = useRef<HTMLCanvasElement>(null);
  const zoomB = useRef<HTMLCanvasElement>(null);
  const timeline = useRef<HTMLCanvasElement>(null);
  const [zoom, setZoom] = useState(1);
  const [error, setError] = useState<string | null>(null);
  const firstFrame = useRef(onFirstFrame);
  firstFrame.current = onFirstFrame;
  // The crop strips load once the first frame is drawn: their JPEGs would otherwise compete with
  // it for the connection, the server and the page's main thread.
  const [drawn, setDrawn] = useState(false);
  // The whole-frame view's own zoom and pan (mouse wheel, drag), in original pixels.
  const mainView = useRef<FrameView | null>(null);
  const pan = useRef<{ zoom: number; centre: [number, number]; drag: { x: number; y: number } | null }>({
    zoom: 1, centre: [video.width / 2, video.height / 2], drag: null,
  });
  const [mainZoom, setMainZoom] = useState(1);
  const applyPan = () => {
    mainView.current?.setPanZoom(pan.current.zoom, pan.current.centre);
    setMainZoom(pan.current.zoom);
    controller.redraw();
  };
  /** Original-image pixels per CSS pixel of the main view at the current zoom. */
  const scaleOf = (el: HTMLCanvasElement) => {
    const vp = mainView.current?.viewport(controller.state.frame);
    return vp ? vp.w / el.getBoundingClientRect().width : 1;
  };
  const onWheel = (e: React.WheelEvent<HTMLCanvasElement>) => {
    const el = e.currentTarget;
    const vp = mainView.current?.viewport(controller.state.frame);
    if (!vp) return;
    const rect = el.getBoundingClientRect();
    // The point under the cursor stays under it.
    const px = vp.x + ((e.clientX - rect.left) / rect.width) * vp.w;
    const py = vp.y + ((e.clientY - rect.top) / rect.height) * vp.h;
    const zoom = Math.min(8, Math.max(1, pan.current.zoom * (e.deltaY < 0 ? 1.25 : 0.8)));
    const k = pan.current.zoom / zoom;
    const [cx, cy] = [vp.x + vp.w / 2, vp.y + vp.h / 2];
    pan.current.zoom = zoom;
    pan.current.centre = [px + (cx - px) * k, py + (cy - py) * k];
    applyPan();
  };
  useEffect(() => {
    // React's wheel listener is passive: the page would scroll as well. Stop that on the view.
    const el = main.current;
    if (!el) return undefined;
    const stop = (e: WheelEvent) => e.preventDefault();
    el.addEventListener("wheel", stop, { passive: false });
    return () => el.removeEventListener("wheel", stop);
  }, []);
  const onPointerDown = (e: React.PointerEvent<HTMLCanvasElement>) => {
    if (pan.current.zoom <= 1) return;
    pan.current.drag = { x: e.clientX, y: e.clientY };
    e.currentTarget.setPointerCapture(e.pointerId);
  };
  const onPointerMove = (e: React.PointerEvent<HTMLCanvasElement>) => {
    const drag = pan.current.drag;
    if (!drag) return;
    const s = scaleOf(e.currentTarget);
    pan.current.centre = [pan.current.centre[0] - (e.clientX - drag.x) * s, pan.current.centre[1] - (e.clientY - drag.y) * s];
    pan.current.drag = { x: e.clientX, y: e.clientY };
    applyPan();
  };
  const onPointerUp = () => {
    pan.current.drag = null;
  };
  const resetPan = () => {
    pan.current = { zoom: 1, centre: [video.width / 2, video.height / 2], drag: null };
    applyPan();
  };

  // Attached before the first paint, and drawn at once when the opening frame is already decoded.
  useLayoutEffect(() => {
    const t = tracks.map((p) => p.track);
    const styles = tracks.map((p) => p.style);
    const image = { width: video.width, height: video.height };
    const detach: (() => void)[] = [];
    const views: FrameView[] = [];
    if (main.current) {
      mainView.current = new FrameView(main.current, image, t, styles);
      views.push(mainView.current);
    }
    if (zoomA.current) views.push(new FrameView(zoomA.current, image, t, styles, { follow: 0, zoom }));
    if (zoomB.current && t.length > 1) views.push(new FrameView(zoomB.current, image, t, styles, { follow: 1, zoom }));
    for (const v of views) detach.push(controller.attach(v));
    if (timeline.current) detach.push(controller.attachTimeline(new TimelineView(timeline.current, t, styles, range)));
    detach.push(controller.onFirstFrame((f) => {
      setDrawn(true);
      firstFrame.current?.(f);
    }));
    detach.push(controller.onError((m) => setError(m)));
    controller.flush();
    onController?.(controller);
    return () => {
      for (const d of detach) d();
      onController?.(null);
    };
  }, [controller, zoom]);

  const state = useSyncExternalStore(
    (cb) => controller.subscribe(cb),
    () => controller.state,
  );

  useShortcut("player.toggle", () => controller.togglePlay());
  useShortcut("player.back", () => controller.step(-1));
  useShortcut("player.forward", () => controller.step(1));
  useShortcut("player.back10", () => controller.step(-10));
  useShortcut("player.forward10", () => controller.step(10));
  useShortcut("player.start", () => controller.seek(range.start));
  useShortcut("player.end", () => controller.seek(range.end));
  useShortcut("player.slower", () => controller.slower());
  useShortcut("player.faster", () => controller.faster());
  useShortcut("player.replay", () => controller.replay());
  useShortcut("player.zoomIn", () => setZoom((z) => Math.min(4, z * 1.5)));
  useShortcut("player.zoomOut", () => setZoom((z) => Math.max(0.25, z / 1.5)));

  const aspect = video.height / video.width;
  const mainHeight = Math.round(MAIN_WIDTH * aspect);
  const zoomHeight = Math.round(ZOOM_WIDTH * 0.75);
  const observed = tracks.map((p) => (p.track.indexAt(state.frame) >= 0 ? `${p.style.label} observed` : `${p.style.label} not observed`));
  const frameText = `frame ${state.frame} of ${range.start}–${range.end} · ${formatTime(frameToTime(state.frame, video.fps))}`;

  const onTimelineClick = (e: React.MouseEvent<HTMLCanvasElement>) => {
    const rect = e.currentTarget.getBoundingClientRect();
    controller.seek(frameAtFraction((e.clientX - rect.left) / rect.width, range));
  };

  const zoomCanvas = (ref: React.RefObject<HTMLCanvasElement | null>, p: PlayerTrack) => (
    <figure className="zoom-view">
      <canvas ref={ref} width={ZOOM_WIDTH} height={zoomHeight} role="img"
        aria-label={p.track.boxAt(state.frame) ? `${p.style.label}, zoomed in on its box, ${frameText}` : `${p.style.label}: not seen on this frame, ${frameText}`} />
      <figcaption>
        <span className="swatch" style={{ background: p.style.color }} /> {p.style.label} · zoom ×{zoom.toFixed(2)}
      </figcaption>
    </figure>
  );

  return (
    <section className={`player player-${layout}`} aria-label={label}>
      <div className="player-views">
        {layout === "pair" && zoomCanvas(zoomA, tracks[0])}
        <canvas
          ref={main}
          className="main-view"
          width={MAIN_WIDTH}
          height={mainHeight}
          role="img"
          aria-label={`${label}: ${frameText}; ${observed.join(", ")}`}
          data-frame={state.frame}
          data-zoom={mainZoom.toFixed(2)}
          title="Mouse wheel: zoom the whole frame · drag: move around when zoomed · double-click: show all"
          style={{ cursor: mainZoom > 1 ? "grab" : "zoom-in" }}
          onWheel={onWheel}
          onPointerDown={onPointerDown}
          onPointerMove={onPointerMove}
          onPointerUp={onPointerUp}
          onDoubleClick={resetPan}
        />
        {layout === "pair" ? tracks[1] && zoomCanvas(zoomB, tracks[1]) : layout === "single" ? zoomCanvas(zoomA, tracks[0]) : null}
      </div>
      <canvas
        ref={timeline}
        className="timeline"
        width={MAIN_WIDTH}
        height={8 + 16 * tracks.length}
        onClick={onTimelineClick}
        aria-hidden="true"
      />
      <p className="sr-only">{tracks.map((p) => describeTrack(p)).join(" ")}</p>
      <div className="controls" role="group" aria-label="Playback">
        <button type="button" onClick={() => controller.seek(range.start)} aria-label="First frame" title="First frame (Home)" aria-keyshortcuts={ariaKeys("player.start")}>
          |◀
        </button>
        <button type="button" onClick={() => controller.step(-1)} aria-label="Previous frame" title="Previous frame (← or J)" aria-keyshortcuts={ariaKeys("player.back")}>
          −1
        </button>
        <button
          type="button"
          className="play"
          onClick={() => controller.togglePlay()}
          aria-label={state.playing ? "Pause" : "Play"}
          title={state.playing ? "Pause (Space or K)" : "Play (Space or K)"}
          aria-keyshortcuts={ariaKeys("player.toggle")}
        >
          {state.playing ? "▮▮" : "▶"}
        </button>
        <button type="button" onClick={() => controller.step(1)} aria-label="Next frame" title="Next frame (→ or L)" aria-keyshortcuts={ariaKeys("player.forward")}>
          +1
        </button>
        <button type="button" onClick={() => controller.replay()} aria-label="Replay" title="Replay from the start (R)" aria-keyshortcuts={ariaKeys("player.replay")}>
          ↻
        </button>
        <label className="speed" title="Playback speed (- slower, = faster)">
          Speed{" "}
          <select value={state.speed} onChange={(e) => controller.setSpeed(Number(e.target.value))}>
            {SPEEDS.map((s) => (
              <option key={s} value={s}>
                {s}×
              </option>
            ))}
          </select>
        </label>
        <input
          type="range"
          className="seek"
          min={range.start}
          max={range.end}
          value={state.frame}
          onChange={(e) => controller.seek(Number(e.target.value))}
          aria-label="Frame"
          aria-valuetext={frameText}
        />
        <span className="frame-label" aria-live="off">
          {frameText}
        </span>
        {state.buffering && <span className="badge">buffering…</span>}
      </div>
      {error && (
        <p className="error-inline" role="alert">
          {error}
        </p>
      )}
      {crops && tracks.map((p) => (
        <CropStrip key={p.track.id} player={p} frame={state.frame} start={drawn} onSeek={(f) => controller.seek(f)} />
      ))}
    </section>
  );
}

/** A small view of one track driven by another player's controller: a window following its box
 *  and its own timeline row, in step with the shared playhead. One controller (one frame cache,
 *  one download per frame) serves every candidate of a relation row this way. */
export function TrackView({ controller, video, track, style, range, zoom = 0.8, label, width = 320 }: {
  controller: PlayerController;
  video: Video;
  track: Track;
  style: TrackStyle;
  range: FrameRange;
  zoom?: number;
  label: string;
  width?: number;
}) {
  const view = useRef<HTMLCanvasElement>(null);
  const line = useRef<HTMLCanvasElement>(null);
  const height = Math.round(width * 0.75);
  useEffect(() => {
    const detach: (() => void)[] = [];
    const image = { width: video.width, height: video.height };
    if (view.current) detach.push(controller.attach(new FrameView(view.current, image, [track], [style], { follow: 0, zoom })));
    if (line.current) detach.push(controller.attachTimeline(new TimelineView(line.current, [track], [style], range)));
    return () => {
      for (const d of detach) d();
    };
  }, [controller, track, style, range.start, range.end, zoom]);
  const state = useSyncExternalStore(
    (cb) => controller.subscribe(cb),
    () => controller.state,
  );
  const seen = track.indexAt(state.frame) >= 0;
  const onTimelineClick = (e: React.MouseEvent<HTMLCanvasElement>) => {
    const rect = e.currentTarget.getBoundingClientRect();
    controller.seek(frameAtFraction((e.clientX - rect.left) / rect.width, range));
  };
  return (
    <figure className="track-view">
      <canvas ref={view} width={width} height={height} role="img" data-frame={state.frame}
        aria-label={`${label} at frame ${state.frame}: ${seen ? "observed" : "not observed on this frame"}`} />
      <canvas ref={line} className="timeline" width={width} height={24} onClick={onTimelineClick} aria-hidden="true" />
    </figure>
  );
}

function describeTrack({ track, style }: PlayerTrack): string {
  const gaps = track.gaps();
  const gapText = gaps.length === 0 ? "no gaps" : `gaps at frames ${gaps.map((g) => (g.start === g.end ? g.start : `${g.start}–${g.end}`)).join(", ")}`;
  return `${style.label}: observed on ${count(track.length, "frame")} from ${track.first} to ${track.last}, ${gapText}.`;
}

/** The chronological crops of one trajectory; the one nearest the playhead is highlighted and
 *  clicking a crop moves the playhead there. */
function CropStrip({ player, frame, start, onSeek }: {
  player: PlayerTrack; frame: number; start: boolean; onSeek: (f: number) => void;
}) {
  const [crops, setCrops] = useState<Crop[] | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    if (!start) return undefined;
    const ctrl = new AbortController();
    api.crops(player.track.id, 12, ctrl.signal).then(setCrops, (e: unknown) => {
      if (!(e instanceof DOMException && e.name === "AbortError")) setFailed(true);
    });
    return () => ctrl.abort();
  }, [player.track.id, start]);
  if (failed) return <p className="muted">The crops of {player.style.label} could not be loaded.</p>;
  if (!crops) return <div className="crops crops-loading" aria-hidden="true" />;
  let nearest = 0;
  crops.forEach((c, i) => {
    if (Math.abs(c.frame_index - frame) < Math.abs(crops[nearest].frame_index - frame)) nearest = i;
  });
  return (
    <ol className="crops" aria-label={`Crops of ${player.style.label}`} style={{ borderColor: player.style.color }}>
      {crops.map((c, i) => (
        <li key={c.frame_index} className={i === nearest ? "current" : undefined}>
          <button type="button" onClick={() => onSeek(c.frame_index)} aria-label={`Go to frame ${c.frame_index}`}>
            <MediaImage src={`${c.crop_url}?max_size=160`} alt={`${player.style.label} at frame ${c.frame_index}`} />
            <span>{c.frame_index}</span>
          </button>
        </li>
      ))}
    </ol>
  );
}
