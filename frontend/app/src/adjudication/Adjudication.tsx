// Adjudication: the items whose panel found no majority, every vote visible, and a decision
// with a reason (recorded as a further vote). A dev/test relation row whose reviews left
// candidates ⊥ is decided by labelling exactly those candidates (`BottomRowJudgments`). The
// recorded dissent on the descriptions the decision reads is shown beside the votes.
// Keyboard: 1/2/3 choose the label and put the focus in the reason; Y / X / U label a row's next
// ⊥ candidate; Ctrl+Enter submits; P / N move through the queue.

import { useEffect, useRef, useState } from "react";
import { api, requestId } from "../api/endpoints";
import type { AdjudicationItem, RelationLabel } from "../api/types";
import { Link } from "../components/Link";
import { count } from "../components/plural";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { useAsync } from "../components/useAsync";
import { ariaKeys, useShortcutList } from "../keyboard/useShortcut";
import { markFirstFrame, markItemOpen } from "../perf";
import { DissentList } from "../review/description/Dissent";
import { stageByName } from "../review/stages";
import { navigate } from "../router";
import { BottomRowJudgments } from "./BottomRowJudgments";
import { type BottomRow, initBottomRow, missing, setLabel as labelCandidate, toJudgments } from "./bottomRow";

function tally(item: AdjudicationItem): string {
  const counts = new Map<string, number>();
  for (const v of item.votes) counts.set(v.label, (counts.get(v.label) ?? 0) + 1);
  return [...counts].map(([l, n]) => `${n}× ${l}`).join(", ");
}

export function AdjudicationQueue() {
  const queue = useAsync(() => api.adjudicationQueue(), [], 10000);
  const items = queue.data ?? [];
  useShortcutList([{ id: "adjudication.next", handler: () => items[0] && navigate(`/adjudication/${items[0].item}`), enabled: items.length > 0 }]);
  if (queue.error) return <ErrorState error={queue.error} onRetry={queue.reload} />;
  if (!queue.data) return <Loading what="the adjudication queue" />;
  if (items.length === 0) {
    return (
      <EmptyState title="Nothing to adjudicate">
        <p>Items appear here when their panel of three finds no majority (or a majority of “uncertain”).</p>
      </EmptyState>
    );
  }
  return (
    <table className="data">
      <caption>{count(items.length, "item")} {items.length === 1 ? "waits" : "wait"} for a decision (press N to open the first)</caption>
      <thead>
        <tr><th scope="col">item</th><th scope="col">stage</th><th scope="col">video</th><th scope="col">votes</th><th scope="col" /></tr>
      </thead>
      <tbody>
        {items.map((it) => (
          <tr key={it.item}>
            <td>{it.item}</td>
            <td>{stageByName(it.stage)?.title ?? it.stage}</td>
            <td>{it.target.video}</td>
            <td>{tally(it)}</td>
            <td>
              <Link to={`/adjudication/${it.item}`}>Decide item {it.item}</Link>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** One item in adjudication (mounted per item). */
export function AdjudicationScreen({ itemId }: { itemId: number }) {
  const opened = useRef(false);
  if (!opened.current) {
    markItemOpen(itemId);
    opened.current = true;
  }
  const item = useAsync((signal) => api.adjudicationItem(itemId, signal), [itemId]);
  const queue = useAsync(() => api.adjudicationQueue(), []);
  const [label, setLabel] = useState<string | null>(null);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [done, setDone] = useState<string | null>(null);
  const reasonBox = useRef<HTMLTextAreaElement>(null);
  const rid = useRef(requestId());
  // A relation row in adjudication: the candidates its reviews left ⊥ (as a key, so a reload of
  // the same item keeps the labels given so far).
  const bottomKey = (item.data?.target.relation_row?.bottom ?? []).join(",");
  const [row, setRow] = useState<BottomRow>(() => initBottomRow([]));
  useEffect(() => {
    setRow(initBottomRow(bottomKey ? bottomKey.split(",").map(Number) : []));
  }, [bottomKey]);
  const needsRow = row.candidates.length > 0;
  const labelNext = (l: RelationLabel) => {
    const t = missing(row)[0];
    if (t !== undefined) setRow(labelCandidate(row, t, l));
  };

  const ids = (queue.data ?? []).map((i) => i.item);
  const at = ids.indexOf(itemId);
  const go = (delta: number) => {
    const target = ids[at + delta];
    if (target !== undefined) navigate(`/adjudication/${target}`);
  };
  const choose = (value: string) => {
    setLabel(value);
    reasonBox.current?.focus();
  };
  const submit = async () => {
    if (!label || busy || done) return;
    if (!reason.trim()) {
      setError(new Error("Write the reason for your decision: it is kept with the vote."));
      reasonBox.current?.focus();
      return;
    }
    const judgments = needsRow ? toJudgments(row) : null;
    if (needsRow && !judgments) {
      setError(new Error(`Label every candidate left ⊥ first: ${missing(row).map((t) => `#${t}`).join(", ")} have no label.`));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      await api.adjudicate(itemId, { label, reason: reason.trim(), client_request_id: rid.current, ...(judgments ? { judgments } : {}) });
      setDone(label);
      const rest = (await api.adjudicationQueue()).filter((i) => i.item !== itemId);
      navigate(rest.length ? `/adjudication/${rest[0].item}` : "/adjudication");
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const data = item.data;
  const spec = data ? stageByName(data.stage) : undefined;
  // An adjudicator decides usable, unusable or uncertain; corrections come from the panel.
  const labels = (data?.labels ?? []).filter((l) => l !== "usable_after_minor_correction");
  useShortcutList([
    ...labels.slice(0, 3).map((l, i) => ({ id: `adjudication.label${i + 1}`, handler: () => choose(l), detail: l, enabled: !done })),
    { id: "adjudication.submit", handler: () => void submit(), enabled: !!label && !done },
    { id: "adjudication.previous", handler: () => go(-1), enabled: at > 0 },
    { id: "adjudication.next", handler: () => go(1), enabled: at >= 0 && at < ids.length - 1 },
    { id: "adjudication.bottomMatch", handler: () => labelNext(1), enabled: needsRow && !done },
    { id: "adjudication.bottomMismatch", handler: () => labelNext(0), enabled: needsRow && !done },
    { id: "adjudication.bottomUnknown", handler: () => labelNext(-1), enabled: needsRow && !done },
  ]);

  useEffect(() => {
    rid.current = requestId();
  }, [label, row]);

  if (item.error) return <ErrorState error={item.error} onRetry={() => navigate("/adjudication")} />;
  if (!data) return <Loading what={`item ${itemId}`} />;
  const Target = spec?.Target;
  return (
    <div className="review">
      <div className="review-main">
        {Target ? <Target target={data.target} onFirstFrame={() => markFirstFrame(itemId)} />
          : <ErrorState error={new Error(`The UI cannot show ${data.stage} items yet.`)} />}
      </div>
      <aside className="vote-panel" aria-label="Decision">
        <p className="question">{spec?.question}</p>
        <table className="data votes">
          <caption>All votes on item {itemId}</caption>
          <thead><tr><th scope="col">annotator</th><th scope="col">label</th><th scope="col">reasons</th></tr></thead>
          <tbody>
            {data.votes.map((v) => (
              <tr key={v.id}>
                <td>{v.annotator}{v.is_adjudication ? " (adjudication)" : ""}</td>
                <td>
                  <span className={`label label-${v.label}`}>{v.label.replaceAll("_", " ")}</span>
                  {v.correction ? <span className="muted small"> (corrected version id {v.correction})</span> : null}
                </td>
                <td>{[...v.reasons, v.comment].filter(Boolean).join("; ") || "–"}</td>
              </tr>
            ))}
          </tbody>
        </table>
        <DissentList dissent={data.dissent} caption="Recorded dissent on the descriptions this decision reads" />
        <form className="decision" onSubmit={(e) => { e.preventDefault(); void submit(); }}>
          {needsRow && (
            <BottomRowJudgments row={row} votes={data.votes} disabled={!!done} onLabel={(t, l) => setRow(labelCandidate(row, t, l))} />
          )}
          <div className="labels" role="radiogroup" aria-label="Decision">
            {labels.map((l, i) => (
              <button key={l} type="button" role="radio" aria-checked={label === l} className={`vote label-${l}${label === l ? " chosen" : ""}`}
                onClick={() => choose(l)} aria-keyshortcuts={i < 3 ? ariaKeys(`adjudication.label${i + 1}`) : undefined}>
                {i < 3 && <kbd>{i + 1}</kbd>} {l}
              </button>
            ))}
          </div>
          <label className="reason">
            Reason (required)
            <textarea ref={reasonBox} value={reason} onChange={(e) => setReason(e.target.value)} rows={3} maxLength={2000} />
          </label>
          <button type="submit" className="primary" disabled={!label || busy || !!done || (needsRow && !toJudgments(row))}
            aria-keyshortcuts={ariaKeys("adjudication.submit")}>
            Decide {label ?? "…"} <kbd>Ctrl + Enter</kbd>
          </button>
        </form>
        {error !== null && <ErrorState error={error} title="The decision was not recorded" />}
        {done && <p role="status">Decided {done}.</p>}
        <div className="item-nav">
          <button type="button" onClick={() => go(-1)} disabled={at <= 0}><kbd>P</kbd> Previous</button>
          <span className="muted">{at >= 0 ? `${at + 1} of ${ids.length}` : ""}</span>
          <button type="button" onClick={() => go(1)} disabled={at < 0 || at >= ids.length - 1}>Next <kbd>N</kbd></button>
        </div>
      </aside>
    </div>
  );
}
