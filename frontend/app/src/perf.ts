// Performance marks read back by the browser tests: how long from opening an item until its
// first frame is on screen. `item-open:<id>` is set when the item screen starts, `first-frame:<id>`
// when the player has drawn a real frame; the measure of the same name spans the two.

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
