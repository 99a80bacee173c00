// Import existing tracks or annotated tubes onto a video (POST /api/track-imports/, multipart):
// a MOTChallenge gt.txt or tracker output, a JSON tube file or CSV. A refused file lists the
// problems with their line numbers; nothing was stored.

import { useState } from "react";
import { ApiError, csrfToken, errorFromResponse } from "../../api/client";
import type { components } from "../../api/schema.gen";
import type { Video } from "../../api/types";
import { ErrorState } from "../../components/states";

type Schemas = components["schemas"];
export type TrackImport = Schemas["TrackImportOutput"];
type Format = "mot" | "json" | "csv";
type Purpose = "proposals" | "tubes";
type Review = "reviewed" | "source_verified";

interface Problem {
  line: number;
  message: string;
}

/** Upload one tracks file; resolves with the import and whether it was new (201) or already there (200). */
export async function uploadTracks(form: FormData): Promise<{ record: TrackImport; created: boolean }> {
  let response: Response;
  try {
    response = await fetch("/api/track-imports/", {
      method: "POST", body: form, credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    });
  } catch {
    throw new ApiError(0, "network_error", "The server could not be reached. Check your connection and try again.");
  }
  if (!response.ok) throw await errorFromResponse(response);
  return { record: (await response.json()) as TrackImport, created: response.status === 201 };
}

function formatOf(name: string): Format {
  const lower = name.toLowerCase();
  return lower.endsWith(".json") ? "json" : lower.endsWith(".csv") ? "csv" : "mot";
}

function problemsOf(error: unknown): Problem[] {
  if (!(error instanceof ApiError) || !Array.isArray(error.extra.problems)) return [];
  return error.extra.problems as Problem[];
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
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);

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
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      const { record, created } = await uploadTracks(form);
      setResult(created
        ? `Imported ${record.trajectory_count} ${purpose === "tubes" ? "tubes" : "tracks"} as run ${record.run} (${record.review.replace("_", "-")}).`
        : `Already imported as run ${record.run}.`);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const problems = problemsOf(error);
  return (
    <form className="import-tracks run-form" aria-label="Import tracks" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <fieldset className="inline-form" disabled={busy}>
        <legend>Import existing tracks or annotated tubes</legend>
        <label>
          Video
          <select aria-label="Video" value={video} onChange={(e) => setVideo(Number(e.target.value))} required>
            {videos.map((v) => <option key={v.id} value={v.id}>{v.name} ({v.split || "no split"})</option>)}
          </select>
        </label>
        <label>
          File
          <input aria-label="File" type="file" accept=".txt,.json,.csv" required onChange={(e) => {
            const f = e.target.files?.[0] ?? null;
            setFile(f);
            if (f) setFormat(formatOf(f.name));
          }} />
        </label>
        <label>
          Format
          <select aria-label="Format" value={format} onChange={(e) => setFormat(e.target.value as Format)}>
            <option value="mot">MOTChallenge (gt.txt or tracker output)</option>
            <option value="json">JSON tubes</option>
            <option value="csv">CSV</option>
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
        <button type="submit" className="primary" disabled={busy || file === null || video === "" || !source.trim()}>Import</button>
      </fieldset>
      {result && <p role="status" className="ok">{result}</p>}
      {error !== null && <ErrorState error={error} title="The file was not imported" details={problems.length === 0} />}
      {problems.length > 0 && (
        <ul className="problems" aria-label="Problems in the file">
          {problems.map((p, i) => <li key={i}>{p.line ? `line ${p.line}: ` : ""}{p.message}</li>)}
        </ul>
      )}
    </form>
  );
}
