// The benchmark's splits in the order the manager screens list them.

import type { Split } from "../api/types";

export const SPLITS = ["train", "dev", "test"] as const satisfies readonly Split[];
