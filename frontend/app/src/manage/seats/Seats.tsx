// The seat board: open items with their seats, holders and lease ages, a page at a time; a manager
// releases a seat (its holder is away) or gives it to another annotator. Every change is recorded
// and listed. The filters and the page live in the address.

import { type KeyboardEvent, useState } from "react";
import { api } from "../../api/endpoints";
import type { Page, SeatItem } from "../../api/types";
import { Link } from "../../components/Link";
import { Pager } from "../../components/Pager";
import { pageSpan } from "../../components/paging";
import { count } from "../../components/plural";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { navigate, useSearchParams } from "../../router";
import { REVIEW_STAGES } from "../../review/stages";

const age = (s: number) => (s < 90 ? `${s} s` : s < 5400 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`);

const PAGE_SIZE = 100; // items a page of the board shows (?limit= in the address changes it)

export function SeatsScreen() {
  const params = useSearchParams();
  const filters = {
    stage: params.get("stage") ?? undefined,
    state: params.get("state") ?? undefined,
    item: params.get("item") ? Number(params.get("item")) : undefined,
    run: params.get("run") ? Number(params.get("run")) : undefined,
    holder: params.get("holder") ?? undefined,
    limit: Math.min(1000, Math.max(1, Number(params.get("limit")) || PAGE_SIZE)),
    offset: Math.max(0, Number(params.get("offset")) || 0),
  };
  const key = params.toString();
  const data = useAsync(() => api.seats(filters), [key], 10000);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  /** Change a filter (back to the first page) or, with `offset`, the page. */
  const set = (k: string, v: string) => {
    const next = new URLSearchParams(params);
    if (v) next.set(k, v);
    else next.delete(k);
    if (k !== "offset") next.delete("offset");
    navigate(`/manage/seats?${next.toString()}`, { replace: k !== "offset" });
  };
  const holderKeys = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key !== "Enter") return;
    e.preventDefault();
    set("holder", e.currentTarget.value.trim());
  };
  const span = (page: Page<SeatItem>) => pageSpan(page.count, filters.limit, filters.offset, page.results.length);
  return (
    <>
      <form className="filters" aria-label="Seat filters" onSubmit={(e) => e.preventDefault()}>
        <label title="Only items of this review stage">
          Stage{" "}
          <select value={filters.stage ?? ""} onChange={(e) => set("stage", e.target.value)}>
            <option value="">all stages</option>
            {REVIEW_STAGES.map((s) => <option key={s.stage} value={s.stage}>{s.title}</option>)}
          </select>
        </label>
        <label title="Open items take votes; items in adjudication wait for an adjudicator">
          State{" "}
          <select value={filters.state ?? ""} onChange={(e) => set("state", e.target.value)}>
            <option value="">open</option>
            <option value="adjudicate">in adjudication</option>
          </select>
        </label>
        <label title="Only items on which this annotator holds a seat">
          Holder <input type="text" name="holder" defaultValue={filters.holder ?? ""} onKeyDown={holderKeys}
            onBlur={(e) => e.target.value.trim() !== (filters.holder ?? "") && set("holder", e.target.value.trim())} />
        </label>
        {(filters.item || filters.run) && (
          <span>
            {filters.item ? `item ${filters.item}` : `run ${filters.run}`} ·{" "}
            <button type="button" className="link" onClick={() => navigate("/manage/seats", { replace: true })}>show all open items</button>
          </span>
        )}
      </form>
      {data.error ? <ErrorState error={data.error} onRetry={data.reload} /> : !data.data ? <Loading what="the seats" /> :
        data.data.results.length === 0 ? (
          <EmptyState title="No items here"><p>No item matches: every item of this view is decided or waits for no one.</p></EmptyState>
        ) : (
          <>
          <table className="data seats">
            <caption>{count(data.data.count, "item")}{span(data.data).next !== null || span(data.data).previous !== null
              ? ` · ${span(data.data).from}–${span(data.data).to} shown` : ""}</caption>
            <thead>
              <tr><th scope="col">item</th><th scope="col">stage</th><th scope="col">state</th><th scope="col">seats</th><th scope="col">history</th></tr>
            </thead>
            <tbody>
              {data.data.results.map((item) => <SeatRow key={item.item} item={item} onChange={data.reload} />)}
            </tbody>
          </table>
          <Pager span={span(data.data)} noun="item" onPage={(offset) => set("offset", String(offset))} />
          </>
        )}
    </>
  );
}

function SeatRow({ item, onChange }: { item: SeatItem; onChange: () => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [target, setTarget] = useState<Record<number, string>>({});
  const [reason, setReason] = useState("");
  const act = async (what: () => Promise<unknown>) => {
    setBusy(true);
    setError(null);
    try {
      await what();
      setTarget({});
      onChange();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const free = item.panel_size - item.seats.length;
  return (
    <tr id={`item-${item.item}`} aria-label={`Item ${item.item}`}>
      <td>{item.item}</td>
      <td>{item.stage}</td>
      <td>{item.state}</td>
      <td>
        <ul className="seat-list">
          {item.seats.map((s) => (
            <li key={s.seat} aria-label={`Seat ${s.seat + 1}`}>
              <strong>seat {s.seat + 1}</strong>: {s.holder} · {s.voted ? "voted" : s.expired ? `lease ran out (held ${age(s.lease_age_s)})`
                : `claimed ${age(s.lease_age_s)} ago`}
              {!s.voted && item.state === "open" && (
                <span className="seat-actions">
                  {" "}
                  <button type="button" disabled={busy} title="Free this seat: the next claim may take it (recorded)"
                    onClick={() => void act(() => api.seatRelease(item.item, s.seat, reason))}>Release</button>{" "}
                  <input type="text" aria-label={`Give seat ${s.seat + 1} to`} placeholder="annotator" size={10}
                    value={target[s.seat] ?? ""} onChange={(e) => setTarget({ ...target, [s.seat]: e.target.value })} />
                  <button type="button" disabled={busy || !(target[s.seat] ?? "").trim()}
                    title="Give this seat to that annotator under a fresh lease (recorded)"
                    onClick={() => void act(() => api.seatReassign(item.item, s.seat, (target[s.seat] ?? "").trim(), reason))}>Reassign</button>
                </span>
              )}
            </li>
          ))}
          {free > 0 && <li className="muted">{count(free, "free seat")}</li>}
        </ul>
        {item.state === "open" && item.seats.some((s) => !s.voted) && (
          <label className="small">Reason (kept with the change) <input type="text" value={reason} maxLength={200}
            onChange={(e) => setReason(e.target.value)} /></label>
        )}
        {error !== null && <ErrorState error={error} title="The seat was not changed" />}
      </td>
      <td>
        {item.events.length === 0 ? <span className="muted">–</span> : (
          <ul className="seat-events">
            {item.events.slice(0, 6).map((e) => (
              <li key={e.id}>
                {new Date(e.at).toLocaleString()}: seat {e.seat + 1} of {e.holder} {e.kind}
                {e.by ? ` by ${e.by}` : ""}{e.to ? ` to ${e.to}` : ""}{e.reason ? ` (${e.reason})` : ""}
              </li>
            ))}
          </ul>
        )}
      </td>
    </tr>
  );
}

/** Links to the seat board for the open items a refused freeze names. */
export function OpenItemLinks({ run, items }: { run: number; items: { id: number; stage: string; state: string }[] }) {
  return (
    <p className="open-items">
      Still open: {items.map((i, k) => (
        <span key={i.id}>{k > 0 && ", "}<Link to={`/manage/seats?item=${i.id}`}>item {i.id}</Link> ({i.stage}, {i.state})</span>
      ))}
      {" · "}<Link to={`/manage/seats?run=${run}`}>all of run {run} on the seat board</Link>
    </p>
  );
}
