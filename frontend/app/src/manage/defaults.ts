// The version of the defaults a run or experiment read (workers/defaults.py), named as the tables
// name it, and which runs of a list ran on older defaults than the newest of their model kind.

import type { DefaultsVersion } from "../api/types";

/** "vtrajembed v2, train v1", "... resumed over ..." when a run continued a checkpoint of other
 *  defaults, "unrecorded" for one from before versions were kept (models/training/defaults.py). */
export function defaultsLabel(record: DefaultsVersion | undefined | null): string {
  if (!record || record.model === undefined) return "unrecorded";
  const label = `${record.model_kind ?? "?"} v${record.model}, train v${record.train ?? "?"}`;
  return record.resumed_over ? `${label} resumed over ${defaultsLabel(record.resumed_over)}` : label;
}

/** The sort key of models/training/defaults.py defaults_order: unrecorded first, then by model and
 *  train version, a resumed run below a clean one of its version. */
export function defaultsRank(record: DefaultsVersion | undefined | null): [number, number, number] {
  if (!record || record.model === undefined) return [-1, -1, -1];
  return [record.model, record.train ?? 0, record.resumed_over ? 0 : 1];
}

const before = (a: number[], b: number[]) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];

/** The ids of the runs whose defaults are older than the newest among the listed runs of their
 *  model kind: the ones a list of figures must mark. */
export function olderDefaults<R extends { id: number; model_kind: string; defaults_version?: DefaultsVersion }>(
  runs: readonly R[]): Set<number> {
  const newest = new Map<string, [number, number, number]>();
  for (const r of runs) {
    const rank = defaultsRank(r.defaults_version);
    const best = newest.get(r.model_kind);
    if (!best || before(rank, best) > 0) newest.set(r.model_kind, rank);
  }
  return new Set(runs.filter((r) => before(defaultsRank(r.defaults_version), newest.get(r.model_kind)!) < 0).map((r) => r.id));
}
