// Where a proposal run's review stands, in words: how many of its usability and duplicate items
// are decided, open or in adjudication, and whether its pool may be frozen (the server's
// `ready`, the rule its freeze applies).

import type { RunReadiness } from "../../api/types";

export type ReadinessState = "none" | "open" | "ready" | "frozen";

export function readiness(r: RunReadiness | undefined, frozen: boolean): { state: ReadinessState; text: string } {
  if (!r || r.items === 0) return frozen ? { state: "frozen", text: "pool frozen" } : { state: "none", text: "review not opened" };
  const decided = `${r.decided + r.unresolved} of ${r.items} decided`;
  if (frozen) return { state: "frozen", text: `pool frozen · ${decided}` };
  if (r.ready) return { state: "ready", text: `ready to freeze · ${decided}` };
  const waiting = [r.open > 0 ? `${r.open} open` : "", r.adjudicate > 0 ? `${r.adjudicate} in adjudication` : ""].filter(Boolean);
  return { state: "open", text: [decided, ...waiting].join(" · ") };
}
