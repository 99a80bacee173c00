// The form that declares an experiment: a preset and which of its variants to run (the reference
// always), the seeds, the base steps, the train snapshot to train on and the dev/test snapshot to
// evaluate on. The server checks everything again and its refusal is shown by the button.

import { useState } from "react";
import { ApiError } from "../../api/client";
import { api } from "../../api/endpoints";
import type { ExperimentDetail, ExperimentPreset, Snapshot } from "../../api/types";
import { Link } from "../../components/Link";
import { defaultEvalSnapshot } from "../training/Training";
import { experimentGrid, parseSeeds } from "./table";
import { count } from "../../components/plural";

const label = (s: Snapshot) => `#${s.id} ${s.split}${s.name ? ` · ${s.name}` : ""}${s.complete ? "" : " (incomplete)"}`;

function Refusal({ error }: { error: unknown }) {
  const api = error instanceof ApiError ? error : null;
  return (
    <p className="error-inline form-error" role="alert">
      {api ? api.message : error instanceof Error ? error.message : String(error)}
      {api && <span className="muted small"> ({api.code}{api.status ? `, HTTP ${api.status}` : ""})</span>}
    </p>
  );
}

export function CreateForm({ presets, snapshots, onCreated }: {
  presets: ExperimentPreset[];
  snapshots: Snapshot[];
  onCreated: (experiment: ExperimentDetail) => void;
}) {
  const trainSnapshots = snapshots.filter((s) => s.split === "train");
  const [presetName, setPresetName] = useState(presets[0]?.name ?? "");
  const preset = presets.find((p) => p.name === presetName);
  const [chosen, setChosen] = useState<Set<string>>(() => new Set(Object.keys(presets[0]?.variants ?? {})));
  const [name, setName] = useState("");
  const [seeds, setSeeds] = useState("0, 1, 2");
  const [steps, setSteps] = useState("200");
  const [snapshot, setSnapshot] = useState<number | "">(trainSnapshots[0]?.id ?? "");
  const [evalSnapshot, setEvalSnapshot] = useState<number | "">(() => defaultEvalSnapshot(snapshots, snapshot) ?? "");
  const [allowTrainSplit, setAllowTrainSplit] = useState(false);
  const [allowIncomplete, setAllowIncomplete] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  if (presets.length === 0) return <p className="muted">The server offers no experiment preset.</p>;
  if (trainSnapshots.length === 0 || snapshots.length < 2) {
    return (
      <p className="muted">
        An experiment trains on a sealed snapshot of the train split and is evaluated on a dev or test one: take
        them first (<Link to="/manage/snapshots">Snapshots</Link>).
      </p>
    );
  }
  const parsed = parseSeeds(seeds);
  const nVariants = preset ? 1 + Object.keys(preset.variants).filter((v) => v !== preset.reference && chosen.has(v)).length : 0;
  const nRuns = "seeds" in parsed ? nVariants * parsed.seeds.length : 0;
  const evalRecord = snapshots.find((s) => s.id === evalSnapshot);
  const toggle = (v: string) => setChosen((xs) => {
    const next = new Set(xs);
    if (next.has(v)) next.delete(v);
    else next.add(v);
    return next;
  });
  const submit = async () => {
    if (!preset || "error" in parsed) return;
    setBusy(true);
    setError(null);
    try {
      const experiment = await api.createExperiment({
        snapshot: Number(snapshot), eval_snapshot: Number(evalSnapshot), name: name.trim(),
        grid: experimentGrid(preset, chosen, parsed.seeds, steps),
        allow_train_split: allowTrainSplit, allow_incomplete: allowIncomplete,
      });
      if (experiment) onCreated(experiment);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="experiment-form" aria-label="Run an experiment" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
      <div className="inline-form">
        <label>
          Preset
          <select value={presetName} onChange={(e) => {
            setPresetName(e.target.value);
            setChosen(new Set(Object.keys(presets.find((p) => p.name === e.target.value)?.variants ?? {})));
          }}>
            {presets.map((p) => <option key={p.name} value={p.name}>{p.name}</option>)}
          </select>
        </label>
        <label>
          Name
          <input type="text" value={name} onChange={(e) => setName(e.target.value)} placeholder={presetName} size={18} />
        </label>
        <label>
          Seeds
          <input type="text" value={seeds} onChange={(e) => setSeeds(e.target.value)} size={10} aria-describedby="seeds-hint" />
        </label>
        <label>
          Base steps
          <input type="text" inputMode="numeric" value={steps} onChange={(e) => setSteps(e.target.value)} size={6} />
        </label>
        <label>
          Train on
          <select value={snapshot} onChange={(e) => {
            const id = Number(e.target.value);
            setSnapshot(id);
            if (id === evalSnapshot) setEvalSnapshot(defaultEvalSnapshot(snapshots, id) ?? "");
          }}>
            {trainSnapshots.map((s) => <option key={s.id} value={s.id}>{label(s)}</option>)}
          </select>
        </label>
        <label>
          Evaluate on
          <select value={evalSnapshot} onChange={(e) => setEvalSnapshot(Number(e.target.value))}>
            {snapshots.filter((s) => s.id !== snapshot).map((s) => <option key={s.id} value={s.id}>{label(s)}</option>)}
          </select>
        </label>
      </div>
      {preset && <p className="hint small">{preset.description} · model {preset.model_kind}</p>}
      {preset && (
        <fieldset className="variants">
          <legend>Variants</legend>
          {Object.keys(preset.variants).map((v) => (
            <label key={v} className="check" title={JSON.stringify(preset.variants[v])}>
              <input type="checkbox" checked={v === preset.reference || chosen.has(v)} disabled={v === preset.reference}
                onChange={() => toggle(v)} />
              {v}{v === preset.reference ? " (reference)" : ""}
            </label>
          ))}
        </fieldset>
      )}
      <div className="checks">
        <label className="check">
          <input type="checkbox" checked={allowTrainSplit} onChange={(e) => setAllowTrainSplit(e.target.checked)} />
          {" "}Allow a train-split evaluation (figures stamped train-split)
        </label>
        <label className="check">
          <input type="checkbox" checked={allowIncomplete} onChange={(e) => setAllowIncomplete(e.target.checked)} />
          {" "}Allow an incomplete evaluation snapshot (figures stamped incomplete)
        </label>
      </div>
      {evalRecord?.split === "train" && !allowTrainSplit && (
        <p className="warning-text small">Snapshot #{evalRecord.id} is of the train split: its figures would measure fit, not retrieval.</p>
      )}
      {evalRecord && evalRecord.split !== "train" && !evalRecord.complete && !allowIncomplete && (
        <p className="warning-text small">Snapshot #{evalRecord.id} is incomplete: some relations its galleries need are not verified.</p>
      )}
      <div className="form-actions">
        <button type="submit" className="primary" disabled={busy || !preset || "error" in parsed || snapshot === "" || evalSnapshot === ""}>
          {busy ? "Queueing…" : `Run the experiment (${count(nRuns, "training run")})`}
        </button>
        {"error" in parsed ? <p id="seeds-hint" className="error-inline form-error" role="alert">{parsed.error}</p>
          : error !== null && <Refusal error={error} />}
      </div>
    </form>
  );
}
