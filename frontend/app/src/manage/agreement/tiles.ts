// The summary tiles of the agreement page: what a stage's figures say, as [title, value, note].
// Three-vote panels show their coefficients; single-review stages (relation rows, pairs) their
// dispute rate and their first labels' agreement with the blind audit, never a coefficient over
// the disputed units (the API gives none).

import type { Agreement } from "../../api/types";
import { count } from "../../components/plural";

export type Tile = [title: string, value: string, note: string];

export const pct = (v: number | null) => (v === null ? "–" : `${(v * 100).toFixed(1)}%`);
const num = (v: number | null) => (v === null ? "–" : v.toFixed(3));
const interval = (v: [number, number] | null | undefined) => (v ? `95% CI ${pct(v[0])}–${pct(v[1])}` : "no interval");

function singleReviewTiles(a: Agreement): Tile[] {
  const d = a.dispute;
  const audit = a.audit_agreement;
  return [
    ["units", String(d?.n_units ?? 0), count(a.n_votes, "label")],
    ["dispute rate", pct(d?.rate ?? null), `${d?.n_disputed ?? 0} second-reviewed; ${interval(d?.ci95)}`],
    ["first label = blind audit", pct(audit?.agreement ?? null),
      audit?.n_judged ? `${audit.n_agree} of ${count(audit.n_judged, "random sample")}; ${interval(audit.ci95)}`
        : "no audited random sample"],
    ["adjudication rate", pct(a.adjudication_rate), `${count(a.n_adjudicated_items, "unit")} adjudicated`],
  ];
}

function panelTiles(a: Agreement): Tile[] {
  return [
    ["items", String(a.n_items), count(a.n_votes, "vote")],
    ["raw agreement", pct(a.raw_agreement), "pairs of panel votes that agree"],
    ["Fleiss' κ", num(a.fleiss_kappa), count(a.fleiss_n_items, "full panel")],
    ["Krippendorff's α", num(a.krippendorff_alpha), `${count(a.alpha_n_items, "item")} with ≥2 votes`],
    ["adjudication rate", pct(a.adjudication_rate), `${count(a.n_adjudicated_items, "item")} adjudicated`],
  ];
}

/** The page's tiles for a stage's report, the median time per vote last. */
export function agreementTiles(a: Agreement): Tile[] {
  const tiles = a.review?.kind === "single_review" ? singleReviewTiles(a) : panelTiles(a);
  const median = a.time_per_vote?.median;
  return [...tiles, ["time per vote", median != null ? `${median.toFixed(1)} s` : "–", "median"]];
}
