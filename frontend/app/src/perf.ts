// Performance marks read back by the browser tests: how long from opening an item until its
// first frame is on screen. `item-open:<id>` is set when the item screen starts, `first-frame:<id>`
// when the player has drawn a real frame; the measure of the same name spans the two.
// `vote-sent:<id>` is set when a vote on the item leaves for the server, so the time from a vote
// to the next item's first frame is `first-frame:<next>` minus `vote-sent:<id>`.

export function markItemOpen(item: number): void {
  performance.clearMarks(`item-open:${item}`);
  performance.clearMarks(`first-frame:${item}`);
  performance.clearMeasures(`first-frame:${item}`);
  performance.mark(`item-open:${item}`);
}

export function markFirstFrame(item: number): void {
  const name = `first-frame:${item}`;
  if (performance.getEntriesByName(name, "measure").length > 0) return;
  if (performance.getEntriesByName(`item-open:${item}`, "mark").length === 0) return;
  performance.mark(name);
  performance.measure(name, `item-open:${item}`, name);
}

export function markVoteSent(item: number): void {
  performance.clearMarks(`vote-sent:${item}`);
  performance.mark(`vote-sent:${item}`);
}

/** Requests a vote takes to reach the next item: 1 (the vote answers with the next claimed item),
 *  or 2 when `localStorage["trajlab.perf.voteRoundTrips"]` is "2": a vote, then a claim, the path
 *  the browser benchmark measures the one-request path against. */
export function voteRoundTrips(): 1 | 2 {
  try {
    return localStorage.getItem("trajlab.perf.voteRoundTrips") === "2" ? 2 : 1;
  } catch {
    return 1;
  }
}
