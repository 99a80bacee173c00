// What the training form warns about before a run starts.

import type { Snapshot } from "../../api/types";

/** The split of the training snapshot when it is held out (dev or test): a retriever trained on
 *  it has seen the queries those splits score it with. Null for a train snapshot or none. */
export function heldOutSplit(snapshots: Pick<Snapshot, "id" | "split">[], train: number | ""): "dev" | "test" | null {
  const split = snapshots.find((s) => s.id === train)?.split;
  return split === "dev" || split === "test" ? split : null;
}
