// Description review (DESIGN 2.6): the trajectory in the player and the describer's proposal as
// a table of its two sentences and its facts, each fact with evidence links that move the
// playhead to the frames that show it. The reviewer votes `usable`, `usable after minor
// correction` (with the corrected content, edited inline), `unusable` or `uncertain`.
//
// Keyboard: ↑/↓ select a row, F shows the selected fact's next evidence frame, E edits the row
// (Enter keeps the edit, Esc undoes it), U marks a fact unknown, X removes it, Shift+X undoes the
// row; 1-4 vote, and 2 or Ctrl+Enter sends the correction. The editing rules are in
// correction.ts; the approval rules (exact versions, consolidation) stay on the server.

import { type KeyboardEvent, useEffect, useMemo, useRef, useState } from "react";
import type { DescriptionContent, DescriptionTarget as DescriptionPart, Fact } from "../../api/types";
import { ErrorState, Loading } from "../../components/states";
import { ariaKeys, useShortcutList } from "../../keyboard/useShortcut";
import type { PlayerController } from "../../player/controller";
import { playRange } from "../../player/model";
import { Player, type PlayerTrack } from "../../player/Player";
import { OwnVoteNote } from "../OwnVoteNote";
import type { StageScreenProps } from "../spec";
import {
  changes,
  type Correction,
  content,
  evidenceFrames,
  fact,
  isChanged,
  nextEvidence,
  problems,
  revertRow,
  type Row,
  rowChanged,
  rows,
  setFactValue,
  setText,
  startCorrection,
  toggleKnown,
  toggleRemoved,
} from "./correction";
import { COLORS, Signals, type TargetProps, toTrack, useTargetData } from "../targets";

export const MINOR = "usable_after_minor_correction";

const rowKey = (r: Row) => (r.kind === "text" ? `text:${r.field}` : `fact:${r.id}`);

/** The trajectory of a description item in the player, handing out its controller. */
function DescribedTrajectory({ video: videoId, trajectory, onFirstFrame, onController }: {
  video: number;
  trajectory: number;
  onFirstFrame?: (frame: number) => void;
  onController?: (c: PlayerController | null) => void;
}) {
  const { video, trajectories, error, retry } = useTargetData(videoId, [trajectory]);
  if (error) return <ErrorState error={error} onRetry={retry} title="The trajectory could not be loaded" />;
  if (!video || !trajectories) return <Loading what="the trajectory" />;
  const t = trajectories[0];
  const track = toTrack(t);
  const tracks: PlayerTrack[] = [{ track, style: { color: COLORS.single, label: `#${t.id}` } }];
  const range = playRange([track], video.frame_count, Math.round(video.fps / 2));
  return (
    <>
      <Player video={video} tracks={tracks} range={range} start={track.first} layout="single"
        label={`Trajectory ${t.id} in ${video.name}`} onFirstFrame={onFirstFrame} onController={onController} />
      <Signals t={t} label={`trajectory ${t.id}`} />
    </>
  );
}

function interval(f: Fact): string {
  return `${f.start_frame}–${f.end_frame - 1}`;
}

interface TableProps {
  original: DescriptionContent;
  correction: Correction;
  selected: number;
  editing: Row | null;
  onSelect?: (index: number) => void;
  onSeek: (frame: number, what: string) => void;
  onEdit?: (row: Row, value: string) => void;
  onLeaveEdit?: (keep: boolean) => void;
  caption: string;
}

/** The description as a table: the two sentences, then the facts with interval, evidence links
 *  and whether they are known. Edited rows are marked; removed facts are struck through. */
function DescriptionTable({ original, correction, selected, editing, onSelect, onSeek, onEdit, onLeaveEdit, caption }: TableProps) {
  const all = rows(correction);
  const field = (row: Row, value: string, label: string, multiline: boolean) => {
    const onKeyDown = (e: KeyboardEvent<HTMLInputElement | HTMLTextAreaElement>) => {
      if (e.key === "Enter" && !e.ctrlKey && !e.metaKey && !e.shiftKey) {
        e.preventDefault();
        onLeaveEdit?.(true);
      } else if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        onLeaveEdit?.(false);
      }
    };
    const common = {
      value, autoFocus: true, "aria-label": `Corrected ${label}`, onKeyDown,
      onChange: (e: { target: { value: string } }) => onEdit?.(row, e.target.value),
    };
    return multiline ? <textarea rows={2} maxLength={1000} {...common} /> : <input type="text" maxLength={100} {...common} />;
  };
  return (
    <table className="data facts">
      <caption>{caption}</caption>
      <thead>
        <tr><th scope="col">field</th><th scope="col">value</th><th scope="col">frames</th><th scope="col">evidence</th><th scope="col">known</th></tr>
      </thead>
      <tbody>
        {all.map((row, i) => {
          const isSelected = i === selected;
          const isEditing = editing !== null && rowKey(editing) === rowKey(row);
          const changed = rowChanged(correction, row);
          const cls = [isSelected ? "selected" : "", changed ? "changed" : ""].filter(Boolean).join(" ") || undefined;
          if (row.kind === "text") {
            const value = correction.texts[row.field];
            return (
              <tr key={rowKey(row)} className={cls} aria-current={isSelected ? "true" : undefined} onClick={() => onSelect?.(i)}>
                <th scope="row">{row.field}</th>
                <td>{isEditing ? field(row, value, row.field, true) : value || <span className="muted">(empty: unknown)</span>}
                  {changed && !isEditing && <span className="edit-note"> (was “{original[row.field]}”)</span>}</td>
                <td className="muted">whole</td>
                <td />
                <td />
              </tr>
            );
          }
          const f = fact(correction, row.id);
          const before = original.facts.find((x) => x.id === f.id) as Fact;
          const removed = correction.removed.has(f.id);
          return (
            <tr key={rowKey(row)} className={[cls, removed ? "removed" : ""].filter(Boolean).join(" ") || undefined}
              aria-current={isSelected ? "true" : undefined} onClick={() => onSelect?.(i)}>
              <th scope="row">
                {f.name} <span className="muted small">{f.kind} · {f.id}</span>
              </th>
              <td>
                {removed ? <span>removed <span className="muted">(was “{before.value}”)</span></span>
                  : isEditing ? field(row, f.value, `value of ${f.name} (${f.id})`, false)
                    : f.known ? f.value : <span className="muted">unknown</span>}
                {!removed && !isEditing && changed && f.known && <span className="edit-note"> (was “{before.known ? before.value : "unknown"}”)</span>}
              </td>
              <td>
                <button type="button" className="link" onClick={(e) => { e.stopPropagation(); onSeek(f.start_frame, `start of ${f.name} (${f.id})`); }}
                  aria-label={`Go to frame ${f.start_frame}, the start of ${f.name} (${f.id}), frames ${interval(f)}`}>
                  {interval(f)}
                </button>
                {f.scope === "interval" ? "" : <span className="muted small"> whole</span>}
              </td>
              <td className="evidence">
                {f.evidence_frames.length === 0 ? <span className="muted">–</span> : evidenceFrames(f).map((frame) => (
                  <button key={frame} type="button" className="link" onClick={(e) => { e.stopPropagation(); onSeek(frame, `evidence of ${f.name} (${f.id})`); }}
                    aria-label={`Go to frame ${frame}, evidence of ${f.name} (${f.id})`}>
                    {frame}
                  </button>
                ))}
              </td>
              <td>{removed ? "–" : f.known ? "yes" : "no"}</td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** A description read only: the trajectory in the player and the table, whose evidence links
 *  move the playhead (adjudication, audits). */
export function DescriptionReadOnly({ video, trajectory, content: described, caption, onFirstFrame }: {
  video: number;
  trajectory: number;
  content: DescriptionContent;
  caption: string;
  onFirstFrame?: (frame: number) => void;
}) {
  const [controller, setController] = useState<PlayerController | null>(null);
  const correction = useMemo(() => startCorrection(described), [described]);
  return (
    <div className="target">
      <DescribedTrajectory video={video} trajectory={trajectory} onFirstFrame={onFirstFrame} onController={setController} />
      <DescriptionTable original={described} correction={correction} selected={-1} editing={null}
        onSeek={(frame) => controller?.seek(frame)} caption={caption} />
    </div>
  );
}

/** The description part of a target read only (the adjudication screen). */
export function DescriptionTarget({ target, onFirstFrame }: TargetProps) {
  const part = target.description;
  if (!part || target.trajectory === null) return <ErrorState error={new Error("This item names no description version.")} />;
  return <DescriptionReadOnly video={target.video} trajectory={target.trajectory} content={part.content}
    caption={`Version ${part.number} (${part.origin}) of description ${part.description}`} onFirstFrame={onFirstFrame} />;
}

/** The annotator's description review (mounted per item by the review shell). */
export function DescriptionReview({ spec, seat, itemId, voted, busy, submit, say, onFirstFrame, footer }: StageScreenProps) {
  const part = seat.target.description ?? null;
  if (!part || seat.target.trajectory === null) {
    return <ErrorState error={new Error(`Item ${itemId} carries no description version to review.`)} />;
  }
  return <DescriptionEditor spec={spec} part={part} video={seat.target.video} trajectory={seat.target.trajectory} voted={voted}
    busy={busy} submit={submit} say={say} onFirstFrame={onFirstFrame} footer={footer} />;
}

function DescriptionEditor({ spec, part, video, trajectory, voted, busy, submit, say, onFirstFrame, footer }: Omit<StageScreenProps, "seat" | "itemId"> & {
  part: DescriptionPart;
  video: number;
  trajectory: number;
}) {
  const [correction, setCorrection] = useState<Correction>(() => startCorrection(part.content));
  const [selected, setSelected] = useState(2); // the first fact (rows 0 and 1 are the sentences)
  const [editing, setEditing] = useState<{ row: Row; before: Correction } | null>(null);
  const [reasons, setReasons] = useState<string[]>([]);
  const [controller, setController] = useState<PlayerController | null>(null);
  const lastSeek = useRef<{ key: string; frame: number } | null>(null);
  const tableBox = useRef<HTMLDivElement>(null);
  const all = rows(correction);
  const row = all[Math.min(selected, all.length - 1)];
  const open = !voted && !busy;
  const edits = changes(correction);
  const issues = problems(correction);

  useEffect(() => {
    if (selected >= all.length) setSelected(all.length - 1);
  }, [all.length, selected]);

  const seek = (frame: number, what: string) => {
    if (!controller) return;
    controller.pause();
    controller.seek(frame);
    say(`Frame ${frame}: ${what}.`);
  };
  const showEvidence = () => {
    if (row.kind !== "fact") {
      say("Select a fact (↓) to see its evidence frames.");
      return;
    }
    const f = fact(correction, row.id);
    const key = rowKey(row);
    const current = lastSeek.current?.key === key ? lastSeek.current.frame : null;
    const frame = nextEvidence(f, current);
    lastSeek.current = { key, frame };
    const frames = evidenceFrames(f);
    seek(frame, `evidence ${frames.indexOf(frame) + 1} of ${frames.length} of ${f.name} (${f.id})`);
  };
  const leaveEdit = (keep: boolean) => {
    if (editing && !keep) setCorrection(editing.before);
    setEditing(null);
    tableBox.current?.focus({ preventScroll: true });
  };
  const edit = () => {
    if (row.kind === "fact" && correction.removed.has(row.id)) {
      say("This fact is removed: press X to bring it back before editing it.");
      return;
    }
    setEditing({ row, before: correction });
  };
  const onEdit = (r: Row, value: string) =>
    setCorrection((c) => (r.kind === "text" ? setText(c, r.field, value) : setFactValue(c, r.id, value)));
  const onFact = (change: (c: Correction, id: string) => Correction, verb: string) => {
    if (row.kind !== "fact") {
      say(`Only facts can be ${verb}; select a fact (↓).`);
      return;
    }
    setCorrection((c) => change(c, row.id));
  };
  const toggleReason = (r: string) => setReasons((rs) => (rs.includes(r) ? rs.filter((x) => x !== r) : [...rs, r]));

  const vote = (label: string) => {
    if (!open) return;
    if (editing) leaveEdit(true);
    if (label === MINOR) {
      if (!isChanged(correction)) {
        say("Nothing is corrected yet: select a row and press E to edit it, U to mark a fact unknown or X to remove it. With nothing to correct, vote usable (1).");
        return;
      }
      if (issues.length > 0) {
        say(`The correction cannot be sent yet: ${issues.join(" ")}`);
        return;
      }
      void submit({ label, reasons, correction: content(correction) });
      return;
    }
    if (label === "usable" && isChanged(correction)) {
      say("You corrected the description: press 2 (or Ctrl+Enter) to vote for your corrected version, or undo your edits (Shift+X on each row) to approve it as shown.");
      return;
    }
    void submit({ label, reasons });
  };

  useShortcutList([
    ...spec.labels.map((c, i) => ({ id: `review.label${i + 1}`, handler: () => vote(c.value), detail: c.text, enabled: open })),
    ...spec.reasons.map((r, i) => ({ id: `review.reason${i + 1}`, handler: () => toggleReason(r), detail: r, enabled: open })),
    { id: "review.rowDown", handler: () => setSelected((s) => Math.min(all.length - 1, s + 1)) },
    { id: "review.rowUp", handler: () => setSelected((s) => Math.max(0, s - 1)) },
    { id: "review.evidence", handler: showEvidence },
    { id: "review.edit", handler: edit, enabled: open },
    { id: "review.toggleKnown", handler: () => onFact(toggleKnown, "marked unknown"), enabled: open },
    { id: "review.toggleRemoved", handler: () => onFact(toggleRemoved, "removed"), enabled: open },
    { id: "review.revertRow", handler: () => setCorrection((c) => revertRow(c, row)), enabled: open },
    { id: "review.submitCorrection", handler: () => vote(MINOR), enabled: open },
  ]);

  const rowName = row.kind === "text" ? row.field : `${fact(correction, row.id).name} (${row.id})`;
  return (
    <div className="review">
      <div className="review-main">
        <DescribedTrajectory video={video} trajectory={trajectory} onFirstFrame={onFirstFrame} onController={setController} />
        <div className="table-box" ref={tableBox} tabIndex={-1} aria-label="Description under review">
          <DescriptionTable original={part.content} correction={correction} selected={selected} editing={editing?.row ?? null}
            onSelect={setSelected} onSeek={seek} onEdit={onEdit} onLeaveEdit={leaveEdit}
            caption={`Version ${part.number} (${part.origin === "model" ? "the describer's proposal" : part.origin}). Selected: ${rowName}. ↑/↓ select · F evidence · E edit · U unknown · X remove`} />
        </div>
      </div>
      <aside className="vote-panel" aria-label="Your vote">
        <p className="question">Is this description of the trajectory right?</p>
        {voted ? (
          <OwnVoteNote vote={voted}>{voted.correction ? <p>Your corrected version is kept as version id {voted.correction}.</p> : null}</OwnVoteNote>
        ) : (
          <>
            <div className="labels" role="group" aria-label="Labels">
              {spec.labels.map((c, i) => (
                <button key={c.value} type="button" className={`vote label-${c.value}`} disabled={busy}
                  onClick={() => vote(c.value)} aria-keyshortcuts={ariaKeys(`review.label${i + 1}`)}>
                  <kbd>{i + 1}</kbd> {c.text}
                  {c.value === MINOR && edits.length > 0 && <span className="badge">{edits.length} edit{edits.length > 1 ? "s" : ""}</span>}
                </button>
              ))}
            </div>
            <section aria-label="Your correction" className="correction">
              <h2 className="small-heading">Your correction</h2>
              {edits.length === 0 ? (
                <p className="muted small">No edits. Select a row (↑/↓) and press <kbd>E</kbd> to edit it, <kbd>U</kbd> to mark a fact unknown, <kbd>X</kbd> to remove it.</p>
              ) : (
                <ul className="edits">
                  {edits.map((c) => (
                    <li key={rowKey(c.row)}>
                      <strong>{c.label}</strong>: {c.what === "removed" ? "removed" : c.what === "unknown" ? `“${c.from}” → unknown` : `“${c.from || "unknown"}” → “${c.to}”`}
                    </li>
                  ))}
                </ul>
              )}
              {issues.length > 0 && <ul className="error-inline small">{issues.map((p) => <li key={p}>{p}</li>)}</ul>}
            </section>
            <fieldset className="reasons">
              <legend>Reasons (optional)</legend>
              {spec.reasons.map((r, i) => (
                <label key={r}>
                  <input type="checkbox" checked={reasons.includes(r)} onChange={() => toggleReason(r)} />
                  <kbd>⇧{i + 1}</kbd> {r}
                </label>
              ))}
            </fieldset>
          </>
        )}
        {footer}
      </aside>
    </div>
  );
}
