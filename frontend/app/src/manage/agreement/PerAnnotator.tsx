// Per-annotator statistics of every review stage side by side: votes, adjudication votes,
// agreement with the majority and mean time per vote, one column group per stage. Each stage's
// figures come from its own agreement statistics (GET /api/review/agreement/?stage=…), so the
// rule of what agrees with what stays in the stage module on the server.

import { api } from "../../api/endpoints";
import type { Agreement } from "../../api/types";
import { count } from "../../components/plural";
import { useAsync } from "../../components/useAsync";
import { REVIEW_STAGES } from "../../review/stages";

type StageResult = { stage: string; title: string; agreement: Agreement | null; error: string | null };

const pct = (v: number | null | undefined) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(0)}%`);

/** Every annotator named by any stage, in name order. */
export function annotatorsOf(results: Pick<StageResult, "agreement">[]): string[] {
  const names = new Set<string>();
  for (const r of results) for (const name of Object.keys(r.agreement?.per_rater ?? {})) names.add(name);
  return [...names].sort((a, b) => a.localeCompare(b, undefined, { numeric: true }));
}

export function PerAnnotator({ split }: { split: string }) {
  const data = useAsync(async () => Promise.all(REVIEW_STAGES.map(async (s): Promise<StageResult> => {
    try {
      return { stage: s.stage, title: s.title, agreement: await api.agreement(s.stage, split || undefined), error: null };
    } catch (e) {
      return { stage: s.stage, title: s.title, agreement: null, error: e instanceof Error ? e.message : String(e) };
    }
  })), [split]);
  if (!data.data) return <p className="muted">Loading every stage's statistics…</p>;
  const results = data.data;
  const names = annotatorsOf(results);
  return (
    <section aria-labelledby="per-annotator-title">
      <h2 id="per-annotator-title">Per annotator, every stage{split ? ` (${split})` : ""}</h2>
      {results.filter((r) => r.error).map((r) => (
        <p key={r.stage} className="error-inline" role="alert">{r.title}: {r.error}</p>
      ))}
      {names.length === 0 ? <p className="muted">No votes in any stage yet.</p> : (
        <div className="table-scroll">
          <table className="data compact">
            <caption>{count(names.length, "annotator")}: votes (adjudication votes), agreement with the majority, mean time per vote</caption>
            <thead>
              <tr>
                <th scope="col" rowSpan={2}>annotator</th>
                {results.map((r) => <th key={r.stage} scope="colgroup" colSpan={3}>{r.title}</th>)}
              </tr>
              <tr>
                {results.map((r) => [
                  <th key={`${r.stage}-v`} scope="col" title={`${r.title}: panel votes (adjudication votes)`}>votes</th>,
                  <th key={`${r.stage}-a`} scope="col" title={`${r.title}: share of scored votes that agree with the item's majority`}>agree</th>,
                  <th key={`${r.stage}-t`} scope="col" title={`${r.title}: mean seconds per vote`}>time</th>,
                ])}
              </tr>
            </thead>
            <tbody>
              {names.map((name) => (
                <tr key={name}>
                  <th scope="row">{name}</th>
                  {results.map((r) => {
                    const s = r.agreement?.per_rater[name];
                    if (!s) return [<td key={`${r.stage}-v`}>–</td>, <td key={`${r.stage}-a`}>–</td>, <td key={`${r.stage}-t`}>–</td>];
                    return [
                      <td key={`${r.stage}-v`}>{s.n_panel_votes}{s.n_adjudication_votes ? ` (${s.n_adjudication_votes})` : ""}</td>,
                      <td key={`${r.stage}-a`} title={`${count(s.n_scored, "scored vote")}`}>{pct(s.agreement_with_majority)}</td>,
                      <td key={`${r.stage}-t`}>{s.mean_time === null ? "–" : `${s.mean_time.toFixed(1)} s`}</td>,
                    ];
                  })}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
