// Importing a tracks file, apart from the form that shows it: the uploads (the check, which stores
// nothing, and the import, which queues a job), following the import's job, and the rules the form
// shows (what a refusal lists, what needs "Import anyway", the preview's geometry).

import { ApiError, csrfToken, errorFromResponse } from "../../api/client";
import type { components } from "../../api/schema.gen";

type Schemas = components["schemas"];
export type TrackImport = Schemas["TrackImportOutput"];
export type TrackFileCheck = Schemas["TrackFileCheckOutput"];
export type PreviewFrame = Schemas["PreviewFrame"];
export type Format = "mot" | "json" | "csv" | "cvat" | "labelstudio";

export interface Problem {
  line: number;
  message: string;
}

export interface Finding {
  code: string;
  message: string;
}

/** The import's job has ended (its run succeeded, failed or was cancelled). */
export const ENDED = new Set<TrackImport["run_status"]>(["succeeded", "failed", "cancelled"]);
export const FOLLOW_MS = 1000;

async function postForm<T>(url: string, form: FormData, signal?: AbortSignal): Promise<{ body: T; status: number }> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST", body: form, credentials: "same-origin", signal,
      headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, "network_error", "The server could not be reached. Check your connection and try again.");
  }
  if (!response.ok) throw await errorFromResponse(response);
  return { body: (await response.json()) as T, status: response.status };
}

/** Queue the import of one tracks file: the import and whether it is new (202: its job is queued)
 *  or the same file's import already there (200). */
export async function uploadTracks(form: FormData): Promise<{ record: TrackImport; created: boolean }> {
  const { body, status } = await postForm<TrackImport>("/api/track-imports/", form);
  return { record: body, created: status === 202 };
}

/** What importing the file onto the video would meet; nothing is stored. */
export async function checkTracks(form: FormData, signal?: AbortSignal): Promise<TrackFileCheck> {
  return (await postForm<TrackFileCheck>("/api/track-imports/check/", form, signal)).body;
}

export async function trackImport(id: number, signal?: AbortSignal): Promise<TrackImport> {
  const response = await fetch(`/api/track-imports/${id}/`, {
    credentials: "same-origin", signal, headers: { Accept: "application/json" },
  });
  if (!response.ok) throw await errorFromResponse(response);
  return (await response.json()) as TrackImport;
}

/** The format a file's name suggests (a Label Studio export is a .json file too: the form's
 *  format list picks it). */
export function formatOf(name: string): Format {
  const lower = name.toLowerCase();
  if (lower.endsWith(".xml")) return "cvat";
  return lower.endsWith(".json") ? "json" : lower.endsWith(".csv") ? "csv" : "mot";
}

/** The problems with their lines that a refusal (`invalid_track_file`) lists. */
export function problemsOf(error: unknown): Problem[] {
  if (!(error instanceof ApiError) || !Array.isArray(error.extra.problems)) return [];
  return error.extra.problems as Problem[];
}

/** The findings a refused import (`fit_unconfirmed`) names. */
export function findingsOf(error: unknown): Finding[] {
  if (!(error instanceof ApiError) || error.code !== "fit_unconfirmed" || !Array.isArray(error.extra.findings)) return [];
  return error.extra.findings as Finding[];
}

/** What the form says about an import it follows. */
export function importText(record: TrackImport, created: boolean): string {
  const what = record.purpose === "tubes" ? "tubes" : "tracks";
  if (record.run_status === "succeeded") {
    return created
      ? `Imported ${record.trajectory_count} ${what} as run ${record.run} (${record.review.replace("_", "-")}).`
      : `Already imported as run ${record.run}.`;
  }
  if (record.run_status === "failed") return `The import of ${record.file_name} failed: ${record.error || "no reason given"}.`;
  if (record.run_status === "cancelled") return `The import of ${record.file_name} was cancelled.`;
  const progress = record.progress == null ? 0 : Math.round(record.progress * 100);
  const doing = record.run_status === "queued" ? "waiting for a worker" : record.message || "running";
  return `Importing ${record.file_name} as run ${record.run}: ${progress}% (${doing}).`;
}

/** The preview's coordinates: the video's frame and every shown box, with a margin, so boxes that
 *  reach past the frame are drawn where they lie. */
export function previewViewBox(width: number, height: number, frame: PreviewFrame | undefined): [number, number, number, number] {
  let [x1, y1, x2, y2] = [0, 0, width, height];
  for (const b of frame?.boxes ?? []) {
    x1 = Math.min(x1, b.box[0]);
    y1 = Math.min(y1, b.box[1]);
    x2 = Math.max(x2, b.box[2]);
    y2 = Math.max(y2, b.box[3]);
  }
  const pad = 0.02 * Math.max(x2 - x1, y2 - y1);
  return [x1 - pad, y1 - pad, x2 - x1 + 2 * pad, y2 - y1 + 2 * pad];
}

/** Whether a box reaches past a `width` x `height` frame. */
export function pastFrame(box: number[], width: number, height: number): boolean {
  return box[0] < 0 || box[1] < 0 || box[2] > width || box[3] > height;
}
