// Agreement statistics of a review stage (optionally one split): who saw each unit and what is
// measured; for three-vote panels the patterns, label counts, each annotator's agreement with the
// majority and the summary coefficients; for single-review stages (relation rows, pairs) the
// dispute rate and the first labels' agreement with the blind audit, never a coefficient over the
// disputed units.

import { api } from "../../api/endpoints";
import type { Agreement } from "../../api/types";
import { BarChart } from "../../components/charts";
import { count } from "../../components/plural";
import { PerAnnotator } from "./PerAnnotator";
import { agreementTiles, pct } from "./tiles";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { REVIEW_STAGES } from "../../review/stages";
import { navigate, useSearchParams } from "../../router";

function Tiles({ a }: { a: Agreement }) {
  const tiles = agreementTiles(a);
  return (
    <dl className="tiles">
      {tiles.map(([k, v, note]) => (
        <div key={k}>
          <dt>{k}</dt>
          <dd>{v}</dd>
          <dd className="muted small">{note}</dd>
        </div>
      ))}
    </dl>
  );
}

export function AgreementScreen() {
  const params = useSearchParams();
  const stage = params.get("stage") ?? "usability";
  const split = params.get("split") ?? "";
  const data = useAsync(() => api.agreement(stage, split || undefined), [stage, split]);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    navigate(`/manage/agreement?${next.toString()}`, { replace: true });
  };
  const a = data.data;
  return (
    <>
      <form className="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Stage{" "}
          <select value={stage} onChange={(e) => set("stage", e.target.value)}>
            {REVIEW_STAGES.map((s) => <option key={s.stage} value={s.stage}>{s.title}</option>)}
          </select>
        </label>
        <label>
          Split{" "}
          <select value={split} onChange={(e) => set("split", e.target.value)}>
            <option value="">all</option>
            <option value="train">train</option>
            <option value="dev">dev</option>
            <option value="test">test</option>
          </select>
        </label>
      </form>
      {data.error ? <ErrorState error={data.error} onRetry={data.reload} />
        : !a ? <Loading what="agreement statistics" />
        : a.n_items === 0 ? (
          <EmptyState title="No votes yet">
            <p>Agreement appears once annotators have voted in this stage{split ? ` on ${split} videos` : ""}.</p>
          </EmptyState>
        ) : (
          <div className="agreement">
            {a.review && (
              <p className="muted small">
                Unit: {a.review.unit}; people per unit: {a.review.people_per_unit}. Measured: {a.review.measured}.
              </p>
            )}
            <Tiles a={a} />
            {a.review?.kind === "single_review" ? (
              <div className="charts">
                <BarChart title="First labels" color="#8e7dff"
                  bars={Object.entries(a.dispute?.first_labels ?? {}).map(([label, value]) => ({ label, value }))} />
                <BarChart title={`Second reviews (${count(a.dispute?.n_disputed ?? 0, "disputed unit")})`}
                  bars={Object.entries(a.dispute?.second_review_labels ?? {}).map(([label, value]) => ({ label, value }))} />
              </div>
            ) : (
              <div className="charts">
                <BarChart title={`Three-vote patterns (${count(a.vote_distributions.n_items, "full panel")})`}
                  bars={Object.entries(a.vote_distributions.patterns).map(([label, value]) => ({ label, value }))} />
                <BarChart title="Panel votes per label" color="#8e7dff"
                  bars={a.labels.map((l) => ({ label: l, value: a.label_counts[l] ?? 0 }))} />
                <BarChart title="Agreement with the majority, per annotator" color="#3ccf91" max={1}
                  format={(v) => `${(v * 100).toFixed(0)}%`}
                  bars={Object.entries(a.per_rater).map(([name, r]) => ({
                    label: name, value: r.agreement_with_majority ?? 0, note: `(${r.n_scored} scored)`,
                    text: r.agreement_with_majority === null ? "–" : undefined,
                  }))} />
              </div>
            )}
            <table className="data">
              <caption>Per annotator</caption>
              <thead>
                <tr><th scope="col">annotator</th><th scope="col">votes</th><th scope="col">adjudications</th><th scope="col">agreement with majority</th><th scope="col">mean time</th></tr>
              </thead>
              <tbody>
                {Object.entries(a.per_rater).map(([name, r]) => (
                  <tr key={name}>
                    <td>{name}</td>
                    <td>{r.n_panel_votes}</td>
                    <td>{r.n_adjudication_votes}</td>
                    <td>{pct(r.agreement_with_majority)}</td>
                    <td>{r.mean_time === null ? "–" : `${r.mean_time.toFixed(1)} s`}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      <PerAnnotator split={split} />
    </>
  );
}
