// Start a proposal run on a video: the tracker configuration is created or found
// (POST /api/proposal-configs/: identical settings return the existing version) and the run is
// queued (POST /api/proposal-runs/: the same configuration on the same video is never run twice).
// A refused configuration (a checkpoint outside the model folders or missing, an unknown category)
// shows the server's reason and queues nothing.

import { useState } from "react";
import { request } from "../../api/client";
import type { components } from "../../api/schema.gen";
import type { ProposalRun, Video } from "../../api/types";
import { ErrorState } from "../../components/states";

type Schemas = components["schemas"];
export type Backend = Schemas["ProposalConfigListInputBackendEnum"];
type ConfigInput = Schemas["ProposalConfigListInputRequest"];
type Config = Schemas["ProposalConfigOutput"];

interface BackendChoice {
  value: Backend;
  label: string;
  checkpoint: "none" | "optional" | "required";
  modelConfig: boolean;
  hint: string;
}

// Every backend the API accepts (the Record makes a new one a type error until it is listed here).
const CHOICES: Record<Backend, Omit<BackendChoice, "value">> = {
  "hog-bytetrack": {
    label: "HOG + ByteTrack (CPU)", checkpoint: "none", modelConfig: false,
    hint: "OpenCV's HOG people detector (or background subtraction) associated by ByteTrack; no model files.",
  },
  "dnn-bytetrack": {
    label: "COCO detector + ByteTrack (CPU)", checkpoint: "optional", modelConfig: true,
    hint: "OpenCV DNN detector; leave the files empty for the packaged SSD-MobileNet-v2 COCO model.",
  },
  sam2: {
    label: "SAM 2 from detector anchors (GPU)", checkpoint: "required", modelConfig: true,
    hint: "A local SAM 2 checkpoint and its model config; detector boxes on anchor frames are propagated both ways.",
  },
  sam3: {
    label: "SAM 3 concept prompts (GPU)", checkpoint: "required", modelConfig: false,
    hint: "A local sam3.pt (huggingface.co/facebook/sam3, SAM License); each category is a text prompt that finds and tracks every instance.",
  },
};
export const BACKEND_CHOICES: BackendChoice[] = (Object.keys(CHOICES) as Backend[]).map((value) => ({ value, ...CHOICES[value] }));

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
  const [backend, setBackend] = useState<Backend>("hog-bytetrack");
  const [categories, setCategories] = useState("person");
  const [checkpoint, setCheckpoint] = useState("");
  const [modelConfig, setModelConfig] = useState("");
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const choice = BACKEND_CHOICES.find((c) => c.value === backend)!;
  const prompts = parseCategories(categories);
  const ready = video !== "" && prompts.length > 0 && (choice.checkpoint !== "required" || checkpoint.trim() !== "");

  const submit = async () => {
    if (!ready) return;
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      const body: ConfigInput = {
        name: name.trim() || backend, backend, categories: prompts,
        checkpoint_path: choice.checkpoint === "none" ? "" : checkpoint.trim(),
        model_config_path: choice.modelConfig ? modelConfig.trim() : "",
      };
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
          <select aria-label="Tracker" value={backend} onChange={(e) => setBackend(e.target.value as Backend)}>
            {BACKEND_CHOICES.map((c) => <option key={c.value} value={c.value}>{c.label}</option>)}
          </select>
        </label>
        <label>
          Categories
          <input aria-label="Categories" type="text" value={categories} onChange={(e) => setCategories(e.target.value)} required placeholder="person, car" />
        </label>
        {choice.checkpoint !== "none" && (
          <label>
            Checkpoint{choice.checkpoint === "optional" ? " (optional)" : ""}
            <input aria-label="Checkpoint" type="text" value={checkpoint} onChange={(e) => setCheckpoint(e.target.value)}
              required={choice.checkpoint === "required"} placeholder="path on the server, under a model folder" />
          </label>
        )}
        {choice.modelConfig && (
          <label>
            Model config
            <input aria-label="Model config" type="text" value={modelConfig} onChange={(e) => setModelConfig(e.target.value)}
              placeholder={backend === "sam2" ? "configs/sam2.1/sam2.1_hiera_t.yaml" : "optional"} />
          </label>
        )}
        <label>
          Configuration name
          <input aria-label="Configuration name" type="text" value={name} maxLength={100} onChange={(e) => setName(e.target.value)} placeholder={backend} />
        </label>
        <button type="submit" className="primary" disabled={busy || !ready}>Queue run</button>
        <p className="small muted">{choice.hint}</p>
      </fieldset>
      {result && <p role="status" className="ok">{result}</p>}
      {error !== null && <ErrorState error={error} title="No run was queued" details />}
    </form>
  );
}
