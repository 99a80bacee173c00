// The first frames of a tracks file over the video it is imported onto: the video's frame (from the
// frame endpoint) with the file's boxes drawn in the frame's pixels. Boxes that reach past the
// frame are drawn where they lie, outside its outline, so a file made for a larger video shows it.

import { useState } from "react";
import { api } from "../../api/endpoints";
import { pastFrame, previewViewBox, type TrackFileCheck } from "./importTracks";

export function TrackFilePreview({ video, check }: { video: number; check: TrackFileCheck }) {
  const [shown, setShown] = useState(0);
  const frames = check.preview;
  if (frames.length === 0) return null;
  const index = Math.min(shown, frames.length - 1);
  const frame = frames[index];
  const { video_width: w, video_height: h } = check;
  const [vx, vy, vw, vh] = previewViewBox(w, h, frame);
  const past = frame.boxes.filter((b) => pastFrame(b.box, w, h)).length;
  const label = `Preview of video frame ${frame.frame} with the file's boxes`;
  return (
    <figure className="track-preview" aria-label={label}>
      <svg viewBox={`${vx} ${vy} ${vw} ${vh}`} role="img" aria-label={label} preserveAspectRatio="xMidYMid meet">
        <rect className="outside" x={vx} y={vy} width={vw} height={vh} />
        <image href={api.frameUrl(video, frame.frame, 960)} x={0} y={0} width={w} height={h} preserveAspectRatio="none" />
        <rect className="frame-outline" x={0} y={0} width={w} height={h} />
        {frame.boxes.map((b) => (
          <g key={b.track_id} className={pastFrame(b.box, w, h) ? "box past" : "box"} data-track={b.track_id}>
            <rect x={b.box[0]} y={b.box[1]} width={b.box[2] - b.box[0]} height={b.box[3] - b.box[1]} />
            <text x={b.box[0] + 2} y={b.box[1] + 12}>{b.track_id}</text>
          </g>
        ))}
      </svg>
      <figcaption>
        Video frame {frame.frame} of {check.video_frames} ({w}×{h}): {frame.boxes.length} box{frame.boxes.length === 1 ? "" : "es"} from the file
        {past > 0 ? `, ${past} reaching past the frame` : ""}.{" "}
        {frames.length > 1 && (
          <span className="preview-frames" role="group" aria-label="Preview frames">
            {frames.map((f, i) => (
              <button key={f.frame} type="button" aria-pressed={i === index} onClick={() => setShown(i)}>frame {f.frame}</button>
            ))}
          </span>
        )}
      </figcaption>
    </figure>
  );
}
