// Import existing tracks or annotated tubes onto a video (POST /api/track-imports/, multipart):
// a MOTChallenge gt.txt or tracker output, a JSON tube file, CSV, CVAT for video 1.1 XML or a Label
// Studio video export (their keyframes interpolated on the server). As soon as a file and a video
// are chosen the file is checked against the video (POST /api/track-imports/check/, nothing
// stored): its first frame is drawn with the file's boxes, and a file that may belong to another
// video is imported only with "Import anyway" ticked. A refused file lists the problems with their
// line numbers; nothing was stored. An accepted file is stored by a job, followed here.

import { useEffect, useRef, useState } from "react";
import type { Video } from "../../api/types";
import { ErrorState } from "../../components/states";
import {
  checkTracks, ENDED, type Finding, findingsOf, FOLLOW_MS, type Format, formatOf, importText, problemsOf,
  type TrackFileCheck, type TrackImport, trackImport, uploadTracks,
} from "./importTracks";
import { TrackFilePreview } from "./TrackFilePreview";

export type { TrackImport } from "./importTracks";
export { uploadTracks } from "./importTracks";

type Purpose = "proposals" | "tubes";
type Review = "reviewed" | "source_verified";
const CHECK_DELAY_MS = 250;

/** The file checked against the video whenever either (or how it is read) changes. */
function useTrackCheck(file: File | null, video: number | "", format: Format, clip: boolean, purpose: Purpose) {
  const [check, setCheck] = useState<TrackFileCheck | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [checking, setChecking] = useState(false);
  useEffect(() => {
    setCheck(null);
    setError(null);
    if (file === null || video === "") return;
    const ctrl = new AbortController();
    const form = new FormData();
    form.append("file", file);
    form.append("video", String(video));
    form.append("format", format);
    form.append("purpose", purpose);
    form.append("clip", clip ? "true" : "false");
    setChecking(true);
    const timer = window.setTimeout(() => {
      checkTracks(form, ctrl.signal).then(
        (c) => { setCheck(c); setChecking(false); },
        (e: unknown) => {
          if (e instanceof DOMException && e.name === "AbortError") return;
          setError(e);
          setChecking(false);
        },
      );
    }, CHECK_DELAY_MS);
    return () => {
      window.clearTimeout(timer);
      ctrl.abort();
    };
  }, [file, video, format, clip, purpose]);
  return { check, error, checking };
}

/** An import followed until its job ends. */
function useFollowedImport(onEnded: () => void) {
  const [followed, setFollowed] = useState<{ record: TrackImport; created: boolean } | null>(null);
  const id = followed && !ENDED.has(followed.record.run_status) ? followed.record.id : null;
  const ended = useRef(onEnded);
  ended.current = onEnded;
  useEffect(() => {
    if (id === null) return;
    const ctrl = new AbortController();
    let timer = 0;
    const poll = async () => {
      try {
        const record = await trackImport(id, ctrl.signal);
        setFollowed((f) => (f && f.record.id === id ? { ...f, record } : f));
        if (ENDED.has(record.run_status)) ended.current();
        else timer = window.setTimeout(poll, FOLLOW_MS);
      } catch (e) {
        if (!(e instanceof DOMException && e.name === "AbortError")) timer = window.setTimeout(poll, 2 * FOLLOW_MS);
      }
    };
    timer = window.setTimeout(poll, FOLLOW_MS);
    return () => {
      ctrl.abort();
      window.clearTimeout(timer);
    };
  }, [id]);
  return { followed, setFollowed, following: id !== null };
}

function Findings({ findings }: { findings: Finding[] }) {
  return (
    <div className="warning fit-findings" role="alert" aria-label="The file may not belong to this video">
      <strong>The file may not belong to this video.</strong>
      <ul>{findings.map((f) => <li key={f.code}>{f.message}</li>)}</ul>
    </div>
  );
}

export function ImportTracksForm({ videos, onDone }: { videos: Video[]; onDone: () => void }) {
  const [video, setVideo] = useState<number | "">(videos[0]?.id ?? "");
  const [file, setFile] = useState<File | null>(null);
  const [format, setFormat] = useState<Format>("mot");
  const [purpose, setPurpose] = useState<Purpose>("proposals");
  const [review, setReview] = useState<Review>("reviewed");
  const [reason, setReason] = useState("");
  const [source, setSource] = useState("");
  const [clip, setClip] = useState(false);
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const { check, error: checkError, checking } = useTrackCheck(file, video, format, clip, purpose);
  const { followed, setFollowed, following } = useFollowedImport(onDone);
  useEffect(() => setConfirm(false), [file, video, format, clip, purpose]);

  const findings = check && check.findings.length > 0 ? check.findings : findingsOf(error);
  const submit = async () => {
    if (file === null || video === "") return;
    const form = new FormData();
    form.append("file", file);
    form.append("video", String(video));
    form.append("format", format);
    form.append("source", source);
    form.append("purpose", purpose);
    form.append("review", purpose === "tubes" ? "reviewed" : review);
    form.append("review_reason", review === "source_verified" && purpose === "proposals" ? reason : "");
    form.append("clip", clip ? "true" : "false");
    form.append("confirm_fit", confirm ? "true" : "false");
    setBusy(true);
    setError(null);
    setFollowed(null);
    try {
      const answer = await uploadTracks(form);
      setFollowed(answer);
      if (ENDED.has(answer.record.run_status)) onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const problems = problemsOf(error).length > 0 ? problemsOf(error)
    : problemsOf(checkError).length > 0 ? problemsOf(checkError) : check?.problems ?? [];
  const refusal = error ?? checkError;
  const needsConfirm = findings.length > 0 && !confirm;
  const ended = followed !== null && ENDED.has(followed.record.run_status);
  return (
    <form className="import-tracks run-form" aria-label="Import tracks" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <fieldset className="inline-form" disabled={busy || following}>
        <legend>Import existing tracks or annotated tubes</legend>
        <label>
          Video
          <select aria-label="Video" value={video} onChange={(e) => setVideo(Number(e.target.value))} required>
            {videos.map((v) => <option key={v.id} value={v.id}>{v.name} ({v.split || "no split"})</option>)}
          </select>
        </label>
        <label>
          File
          <input aria-label="File" type="file" accept=".txt,.json,.csv,.xml" required onChange={(e) => {
            const f = e.target.files?.[0] ?? null;
            setFile(f);
            setError(null);
            if (f) setFormat(formatOf(f.name));
          }} />
        </label>
        <label>
          Format
          <select aria-label="Format" value={format} onChange={(e) => setFormat(e.target.value as Format)}>
            <option value="mot">MOTChallenge (gt.txt or tracker output)</option>
            <option value="json">JSON tubes</option>
            <option value="csv">CSV</option>
            <option value="cvat">CVAT for video 1.1 (XML)</option>
            <option value="labelstudio">Label Studio video (JSON export)</option>
          </select>
        </label>
        <label>
          Source
          <input aria-label="Source" type="text" value={source} onChange={(e) => setSource(e.target.value)} required placeholder="data set, sequence or tool" />
        </label>
        <label>
          Use as
          <select aria-label="Use as" value={purpose} onChange={(e) => setPurpose(e.target.value as Purpose)}>
            <option value="proposals">candidate tracks</option>
            <option value="tubes">annotated tubes to match against</option>
          </select>
        </label>
        {purpose === "proposals" && (
          <label>
            Review
            <select aria-label="Review" value={review} onChange={(e) => setReview(e.target.value as Review)}>
              <option value="reviewed">usability and duplicate review</option>
              <option value="source_verified">source-verified (no review)</option>
            </select>
          </label>
        )}
        {purpose === "proposals" && review === "source_verified" && (
          <label>
            Why the source can be trusted
            <input aria-label="Why the source can be trusted" type="text" value={reason} onChange={(e) => setReason(e.target.value)} required />
          </label>
        )}
        <label className="check">
          <input type="checkbox" checked={clip} onChange={(e) => setClip(e.target.checked)} /> clip boxes partly outside the frame
        </label>
        {findings.length > 0 && (
          <label className="check">
            <input type="checkbox" checked={confirm} onChange={(e) => setConfirm(e.target.checked)} /> Import anyway: the file may belong to another video
          </label>
        )}
        <button type="submit" className="primary" disabled={busy || following || file === null || video === "" || !source.trim() || needsConfirm}
          title={needsConfirm ? "Look at the preview; tick “Import anyway” to import the file as it is" : undefined}>Import</button>
      </fieldset>
      {checking && <p className="muted">Checking the file against the video…</p>}
      {check && (
        <p className="muted" aria-label="What the file holds">
          {check.tracks} track{check.tracks === 1 ? "" : "s"}, {check.boxes} box{check.boxes === 1 ? "" : "es"} on frames {check.first_frame}–{check.last_frame} of the file;
          its boxes span x {Math.round(check.box_extent[0])} to {Math.round(check.box_extent[2])}, y {Math.round(check.box_extent[1])} to {Math.round(check.box_extent[3])}.
          The video is {check.video_width}×{check.video_height} with {check.video_frames} frames.
        </p>
      )}
      {findings.length > 0 && <Findings findings={findings} />}
      {check && video !== "" && <TrackFilePreview key={`${video}:${file?.name}`} video={video} check={check} />}
      {followed && (
        <p role="status" className={followed.record.run_status === "failed" ? "error-text" : ended ? "ok" : "muted"}>
          {importText(followed.record, followed.created)}
        </p>
      )}
      {refusal !== null && findingsOf(refusal).length === 0 && (
        <ErrorState error={refusal} title={error !== null ? "The file was not imported" : "The file cannot be imported as it is"}
          details={problemsOf(refusal).length === 0} />
      )}
      {refusal === null && problems.length > 0 && (
        <p className="error-text">The file cannot be imported onto this video as it is read{clip ? "" : " (boxes partly outside the frame are imported only with clipping)"}:</p>
      )}
      {problems.length > 0 && (
        <ul className="problems" aria-label="Problems in the file">
          {problems.map((p, i) => <li key={i}>{p.line ? `line ${p.line}: ` : ""}{p.message}</li>)}
        </ul>
      )}
    </form>
  );
}
