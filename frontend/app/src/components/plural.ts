// Counts in words: "1 item", "2 items", "1 query", "3 queries". One helper, so no screen writes
// "1 items" again.

const IRREGULAR: Record<string, string> = { query: "queries", trajectory: "trajectories", entry: "entries", person: "people" };

/** The plural of an English noun as the UI uses them (irregular ones listed, then -s/-es). */
export function pluralOf(noun: string): string {
  if (IRREGULAR[noun]) return IRREGULAR[noun];
  if (/(s|x|z|ch|sh)$/.test(noun)) return `${noun}es`;
  if (/[^aeiou]y$/.test(noun)) return `${noun.slice(0, -1)}ies`;
  return `${noun}s`;
}

/** `n` and the noun, singular for exactly one: count(1, "item") → "1 item", count(0, "item") → "0 items". */
export function count(n: number, noun: string, plural?: string): string {
  return `${n} ${n === 1 ? noun : plural ?? pluralOf(noun)}`;
}
