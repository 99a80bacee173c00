// Start a proposal run on a video: the tracker configuration is created or found
// (POST /api/proposal-configs/: identical settings return the existing version) and the run is
// queued (POST /api/proposal-runs/: the same configuration on the same video is never run twice).
// The tracker is one that needs no files or one the operator registered with its checkpoint
// (GET /api/backends/); the form never sends a path. A refused configuration (a registered
// checkpoint that is missing, an unknown category) shows the server's reason and queues nothing.

import { useState } from "react";
import { get, request } from "../../api/client";
import type { components } from "../../api/schema.gen";
import type { ProposalRun, Video } from "../../api/types";
import { ErrorState } from "../../components/states";
import { useAsync } from "../../components/useAsync";

type Schemas = components["schemas"];
type ConfigInput = Schemas["ProposalConfigListInputRequest"];
type Config = Schemas["ProposalConfigOutput"];
type Backends = Schemas["BackendListOutput"];
export type Tracker = "hog-bytetrack" | "dnn-bytetrack" | "sam2" | "sam3";

export interface BackendChoice {
  value: string;
  label: string;
  hint: string;
}

// The trackers that need no files (SAM 2 and SAM 3 without a checkpoint run random weights: a
// smoke test of the path, not proposals to review).
const EMBEDDED: Record<Tracker, Omit<BackendChoice, "value">> = {
  "hog-bytetrack": {
    label: "HOG + ByteTrack (CPU)",
    hint: "OpenCV's HOG people detector (or background subtraction) associated by ByteTrack; no model files.",
  },
  "dnn-bytetrack": {
    label: "COCO detector + ByteTrack (CPU)",
    hint: "OpenCV DNN with the packaged SSD-MobileNet-v2 COCO model, associated by ByteTrack.",
  },
  sam2: {
    label: "SAM 2, random weights (smoke test)",
    hint: "SAM 2 without a checkpoint: random weights. For real proposals pick a registered SAM 2 tracker.",
  },
  sam3: {
    label: "SAM 3, random weights (smoke test)",
    hint: "SAM 3 without a checkpoint: random weights. For real proposals pick a registered SAM 3 tracker.",
  },
};
export const BACKEND_CHOICES: BackendChoice[] = (Object.keys(EMBEDDED) as Tracker[]).map((value) => ({ value, ...EMBEDDED[value] }));

/** The tracker choices: the registered trackers (their checkpoints set by the operator) first,
 * then the embedded ones the server accepts. */
export function trackerChoices(backends: Backends | undefined): BackendChoice[] {
  const registered = (backends?.registered ?? []).filter((b) => b.uses.includes("tracker")).map((b) => ({
    value: b.name,
    label: `${b.label || b.name} (registered ${b.backend})`,
    hint: `Registered by the operator: ${b.backend} with its own checkpoint and settings.`,
  }));
  const embedded = backends ? new Set(backends.embedded.tracker ?? []) : null;
  return [...registered, ...BACKEND_CHOICES.filter((c) => embedded === null || embedded.has(c.value))];
}

/** "person, Car ,, person" -> ["person", "Car"] (the server canonicalises and checks them). */
export function parseCategories(text: string): string[] {
  const out: string[] = [];
  for (const part of text.split(",")) {
    const c = part.trim();
    if (c && !out.includes(c)) out.push(c);
  }
  return out;
}

export function ProposalRunForm({ videos, onDone }: { videos: Video[]; onDone: () => void }) {
  const [video, setVideo] = useState<number | "">(videos[0]?.id ?? "");
  const [backend, setBackend] = useState("hog-bytetrack");
  const [categories, setCategories] = useState("person");
  const [name, setName] = useState("");
  const backends = useAsync((signal) => get<Backends>("/api/backends/", signal), []);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const choices = trackerChoices(backends.data);
  const choice = choices.find((c) => c.value === backend) ?? choices[0];
  const prompts = parseCategories(categories);
  const ready = video !== "" && prompts.length > 0 && choice !== undefined;

  const submit = async () => {
    if (!ready) return;
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      const body: ConfigInput = { name: name.trim() || choice.value, backend: choice.value, categories: prompts };
      const config = (await request<Config>("/api/proposal-configs/", { method: "POST", body }))!;
      const run = (await request<ProposalRun>("/api/proposal-runs/", { method: "POST", body: { video, config: config.id } }))!;
      const label = `${config.name} v${config.version}`;
      setResult(run.status === "queued"
        ? `Queued run ${run.id} with ${label} (${prompts.join(", ")}).`
        : `Run ${run.id} with ${label} already exists on this video (${run.status}).`);
      onDone();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="proposal-run run-form" aria-label="New proposal run" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <fieldset className="inline-form" disabled={busy}>
        <legend>Propose trajectories with a tracker</legend>
        <label>
          Video
          <select aria-label="Video" value={video} onChange={(e) => setVideo(Number(e.target.value))} required>
            {videos.map((v) => <option key={v.id} value={v.id}>{v.name} ({v.split || "no split"})</option>)}
          </select>
        </label>
        <label>
          Tracker
          <select aria-label="Tracker" value={choice?.value ?? ""} onChange={(e) => setBackend(e.target.value)}>
            {choices.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
          </select>
        </label>
        <label>
          Categories
          <input aria-label="Categories" type="text" value={categories} onChange={(e) => setCategories(e.target.value)} required placeholder="person, car" />
        </label>
        <label>
          Configuration name
          <input aria-label="Configuration name" type="text" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} placeholder={choice?.value ?? ""} />
        </label>
        <button type="submit" className="primary" disabled={busy || !ready}>Queue run</button>
        {choice && <p className="small muted">{choice.hint}</p>}
      </fieldset>
      {result && <p role="status" className="ok">{result}</p>}
      {error !== null && <ErrorState error={error} title="No run was queued" details />}
    </form>
  );
}
