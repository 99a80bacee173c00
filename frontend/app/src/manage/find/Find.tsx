// Find review items, queries and relations: one filter form per kind (video, split, state or
// status, annotator, label, text), the matches in a table with links to where each is worked on.
// The filters live in the address, so a search can be shared and the back button returns to it.

import { api } from "../../api/endpoints";
import { Link } from "../../components/Link";
import { count } from "../../components/plural";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { navigate, useSearchParams } from "../../router";
import { SPLITS } from "../splits";

const KINDS = ["items", "queries", "relations"] as const;
type Kind = (typeof KINDS)[number];
const STAGES = ["usability", "identity", "description", "relation", "pair"];
const STATES = ["open", "adjudicate", "decided", "unresolved"];
const QUERY_STATUSES = ["in_review", "accepted", "rejected", "superseded", "needs_reverification"];
const LABELS: Record<string, string> = { "1": "1 (match)", "0": "0 (mismatch)", "-1": "⊥ (unknown)" };

/** The filters each kind takes, in form order (the API's parameter names). */
export const FILTERS: Record<Kind, string[]> = {
  items: ["q", "stage", "state", "video", "split", "annotator", "label"],
  queries: ["q", "status", "video", "split"],
  relations: ["query", "video", "split", "label"],
};

/** The API parameters of `kind` that are set in `params` (others are dropped). */
export function filtersOf(kind: Kind, params: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FILTERS[kind]) {
    const v = params.get(name)?.trim();
    if (v) out[name] = v;
  }
  return out;
}

function Choice({ name, label, value, options, set }: { name: string; label: string; value: string; options: string[] | Record<string, string>; set: (k: string, v: string) => void }) {
  const entries = Array.isArray(options) ? options.map((o) => [o, o.replaceAll("_", " ")]) : Object.entries(options);
  return (
    <label>
      {label}{" "}
      <select name={name} value={value} onChange={(e) => set(name, e.target.value)}>
        <option value="">any</option>
        {entries.map(([v, text]) => <option key={v} value={v}>{text}</option>)}
      </select>
    </label>
  );
}

export function FindScreen() {
  const params = useSearchParams();
  const kind = (KINDS as readonly string[]).includes(params.get("kind") ?? "") ? (params.get("kind") as Kind) : "items";
  const filters = filtersOf(kind, params);
  const key = JSON.stringify([kind, filters]);
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    navigate(`/manage/find?${next.toString()}`, { replace: true });
  };
  const value = (k: string) => params.get(k) ?? "";
  const text = (name: string, label: string, size = 12) => (
    <label>
      {label}{" "}
      <input type="text" name={name} defaultValue={value(name)} size={size}
        onKeyDown={(e) => { if (e.key === "Enter") { e.preventDefault(); set(name, e.currentTarget.value); } }}
        onBlur={(e) => { if (e.currentTarget.value !== value(name)) set(name, e.currentTarget.value); }} />
    </label>
  );
  return (
    <>
      <form className="filters" aria-label="Search filters" key={kind} onSubmit={(e) => e.preventDefault()}>
        <Choice name="kind" label="Find" value={kind} options={{ items: "review items", queries: "queries", relations: "relations" }}
          set={(_, v) => navigate(`/manage/find?kind=${v || "items"}`, { replace: true })} />
        {kind !== "relations" && text("q", kind === "items" ? "Text or item id" : "Text", 18)}
        {kind === "relations" && text("query", "Query id", 6)}
        {kind === "items" && <Choice name="stage" label="Stage" value={value("stage")} options={STAGES} set={set} />}
        {kind === "items" && <Choice name="state" label="State" value={value("state")} options={STATES} set={set} />}
        {kind === "queries" && <Choice name="status" label="Status" value={value("status")} options={QUERY_STATUSES} set={set} />}
        {text("video", "Video id", 6)}
        <Choice name="split" label="Split" value={value("split")} options={[...SPLITS]} set={set} />
        {kind === "items" && text("annotator", "Annotator", 10)}
        {kind === "items" && text("label", "Decision", 8)}
        {kind === "relations" && <Choice name="label" label="Label" value={value("label")} options={LABELS} set={set} />}
      </form>
      <Results key={key} kind={kind} filters={filters} />
    </>
  );
}

function Results({ kind, filters }: { kind: Kind; filters: Record<string, string> }) {
  const data = useAsync(async (signal) => {
    if (kind === "items") return { kind, page: await api.findItems(filters, signal) } as const;
    if (kind === "queries") return { kind, page: await api.findQueries(filters, signal) } as const;
    return { kind, page: await api.findRelations(filters, signal) } as const;
  }, []);
  if (data.error) return <ErrorState error={data.error} title="The search was refused" />;
  if (!data.data) return <Loading what={`the matching ${kind}`} />;
  const d = data.data;
  if (d.page.count === 0) return <EmptyState title={`No ${kind} match`}><p>Loosen a filter.</p></EmptyState>;
  const shown = d.page.results.length;
  const caption = `${count(d.page.count, d.kind === "items" ? "review item" : d.kind === "queries" ? "query" : "relation")}${shown < d.page.count ? ` (the first ${shown})` : ""}`;
  if (d.kind === "items") {
    return (
      <table className="data">
        <caption>{caption}</caption>
        <thead><tr><th scope="col">item</th><th scope="col">stage</th><th scope="col">state</th><th scope="col">decision</th><th scope="col">votes</th><th scope="col">video</th><th scope="col">query</th><th scope="col">seats</th></tr></thead>
        <tbody>
          {d.page.results.map((i) => (
            <tr key={i.id}>
              <td><Link to={`/manage/items/${i.id}`}>{i.id}</Link></td>
              <td>{i.stage}</td>
              <td><span className={`badge status-${i.state}`}>{i.state}</span></td>
              <td>{i.decision || "–"}</td>
              <td>{i.n_votes} of {i.panel_size}</td>
              <td>{i.video_name} <span className="muted small">({i.split || "no split"})</span></td>
              <td className="small">{i.text || "–"}</td>
              <td><Link to={`/manage/seats?item=${i.id}`}>seats</Link></td>
            </tr>
          ))}
        </tbody>
      </table>
    );
  }
  if (d.kind === "queries") {
    return (
      <table className="data">
        <caption>{caption}</caption>
        <thead><tr><th scope="col">query</th><th scope="col">text</th><th scope="col">status</th><th scope="col">video</th><th scope="col">target</th><th scope="col">relations</th></tr></thead>
        <tbody>
          {d.page.results.map((x) => (
            <tr key={x.id}>
              <td>{x.id}</td>
              <td>{x.text}</td>
              <td>{x.status.replaceAll("_", " ")}</td>
              <td>{x.video}</td>
              <td>{x.target}</td>
              <td><Link to={`/manage/find?kind=relations&query=${x.id}`}>relations</Link></td>
            </tr>
          ))}
        </tbody>
      </table>
    );
  }
  return (
    <table className="data">
      <caption>{caption}</caption>
      <thead><tr><th scope="col">query</th><th scope="col">trajectory</th><th scope="col">label</th><th scope="col">stratum</th><th scope="col">source</th><th scope="col">pseudo</th></tr></thead>
      <tbody>
        {d.page.results.map((r) => (
          <tr key={r.id}>
            <td>{r.query}</td>
            <td>{r.trajectory}</td>
            <td>{LABELS[String(r.label)] ?? r.label}</td>
            <td>{r.stratum ?? "–"}</td>
            <td>{r.source ?? "–"}</td>
            <td>{r.pseudo ? "yes" : "no"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
