import { describe, expect, it } from "vitest";

import type { Agreement } from "../../api/types";
import { agreementTiles } from "./tiles";

const base: Agreement = {
  stage: "usability", split: "all", n_items: 4, n_votes: 12, n_panel_votes: 12, n_adjudication_votes: 0,
  labels: ["usable", "unusable", "uncertain"], label_counts: { usable: 10, unusable: 2, uncertain: 0 },
  vote_distributions: { panel: 3, n_items: 4, patterns: { "3-0": 2, "2-1": 2 }, detail: {} },
  raw_agreement: 0.666, fleiss_kappa: 0.25, fleiss_n_items: 4, krippendorff_alpha: 0.3, alpha_n_items: 4,
  n_adjudicated_items: 0, adjudication_rate: 0, time_per_vote: { n: 12, mean: 2, median: 1.5 },
  time_per_item: null, per_rater: {},
  review: { kind: "panel", unit: "each item", people_per_unit: 3, measured: "every full panel" },
};

describe("agreement tiles", () => {
  it("show a three-vote panel's coefficients", () => {
    const titles = agreementTiles(base).map(([title]) => title);
    expect(titles).toEqual(["items", "raw agreement", "Fleiss' κ", "Krippendorff's α", "adjudication rate",
      "time per vote"]);
    expect(agreementTiles(base)[2][1]).toBe("0.250");
  });

  it("show a single-review stage's dispute rate and audit agreement, and no coefficient", () => {
    const single: Agreement = {
      ...base, stage: "relation", raw_agreement: null, fleiss_kappa: null, krippendorff_alpha: null,
      review: { kind: "single_review", unit: "each candidate", people_per_unit: "1, or 2", measured: "disputes" },
      dispute: { n_units: 8, n_disputed: 2, rate: 0.25, ci95: [0.0319, 0.6509], first_labels: {},
        second_review_labels: {} },
      audit_agreement: { n_judged: 4, n_agree: 2, agreement: 0.5, ci95: [0.0676, 0.9324], table: {} },
    };
    const tiles = agreementTiles(single);
    expect(tiles.map(([title]) => title)).toEqual(["units", "dispute rate", "first label = blind audit",
      "adjudication rate", "time per vote"]);
    expect(tiles[1].slice(1)).toEqual(["25.0%", "2 second-reviewed; 95% CI 3.2%–65.1%"]);
    expect(tiles[2].slice(1)).toEqual(["50.0%", "2 of 4 random samples; 95% CI 6.8%–93.2%"]);
    expect(tiles.some(([title]) => title.includes("κ"))).toBe(false);
    const unaudited = agreementTiles({ ...single, audit_agreement: { ...single.audit_agreement!, n_judged: 0,
      n_agree: 0, agreement: null, ci95: null } });
    expect(unaudited[2].slice(1)).toEqual(["–", "no audited random sample"]);
  });
});
