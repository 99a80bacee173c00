// Relation verification (DESIGN 2.8): one query against the candidates of its video's frozen
// pool, every member on the first review (candidates without an approved description
// included), only the disputed ones on the independent second review. Each candidate has a
// mini player (a view that follows its box, driven by the one shared playhead of the overview
// above, so every frame is downloaded once) and its three labels 1 | 0 | ⊥; the writer's
// pre-label is shown as a hint and never decides. The first review also rates the query:
// faithful to its target (yes / no) and natural (1-5).
//
// Keyboard: 1 / 0 / U label the selected candidate and move on to the next one without a label;
// ↑ / ↓ select; V plays the selected candidate; F / Shift+F faithful or not; Shift+1..5
// naturalness; Ctrl+Enter sends. The row's state lives in relationGrid.ts.
//
// Layout: nothing moves once shown. The query, the side panel and a place for every candidate are
// drawn at once (the player and each candidate's view fill places of their final size), the page
// scrolls only when the person moves the selection, and the query stays in view in the side
// panel (sticky), where it covers nothing.

import { useEffect, useMemo, useRef, useState } from "react";
import { api } from "../../api/endpoints";
import type { ModelProposal, PoolDetail, Predicate, RelationLabel, RelationRowTarget, Video } from "../../api/types";
import { count } from "../../components/plural";
import { ErrorState, Loading } from "../../components/states";
import { ariaKeys, useShortcutList } from "../../keyboard/useShortcut";
import type { PlayerController } from "../../player/controller";
import { playRange, Track } from "../../player/model";
import { Player, type PlayerTrack, TrackView } from "../../player/Player";
import { OwnVoteNote } from "../OwnVoteNote";
import type { StageScreenProps } from "../spec";
import {
  type GridState,
  initGrid,
  labelMeaning,
  labelSelected,
  labelText,
  labelTrajectory,
  missing,
  move,
  NATURAL_MAX,
  NATURAL_MIN,
  select,
  selected,
  setFaithful,
  setNatural,
  tally,
  toVote,
} from "./relationGrid";
import { type TargetProps, videoOnce } from "../targets";

/** Width of each candidate's own view (canvas pixels; it is drawn at the card's width). */
const TRACK_VIEW_WIDTH = 280;

/** The place of a candidate's view while the player starts: the size the view will take (its
 *  frame at 4:3 and its timeline), so nothing below moves when it comes. */
function TrackViewSlot({ width }: { width: number }) {
  return (
    <figure className="track-view track-view-slot" aria-hidden="true">
      <div style={{ aspectRatio: `${width} / ${Math.round(width * 0.75)}` }} />
      <div className="timeline" style={{ aspectRatio: `${width} / 24` }} />
    </figure>
  );
}

/** Distinct box colours for a row's candidates (cycled when a pool is larger). */
export const CANDIDATE_COLORS = ["#ffd166", "#2ec4b6", "#ff6b6b", "#9b8cff", "#4cc9f0", "#f4a261", "#80ed99", "#f72585"];

/** A query's required predicates, each with the facts that support it. */
export function Predicates({ predicates }: { predicates: Predicate[] }) {
  return (
    <ul className="predicates" aria-label="Required predicates">
      {predicates.map((p, i) => (
        <li key={`${p.name}:${p.value}:${i}`}>
          <code>{p.name}</code> = <strong>{p.value}</strong>
          <span className="muted small"> (facts {p.fact_ids.join(", ")})</span>
        </li>
      ))}
    </ul>
  );
}

/** A model's suggestion written as a hint: its label, decisive predicates and evidence. */
export function Hint({ proposal, who = "Writer's hint" }: { proposal: ModelProposal | null; who?: string }) {
  if (!proposal) return <p className="hint muted small">{who}: none</p>;
  const decisive = proposal.predicates
    .map((p) => (p && typeof p === "object" && "name" in p ? `${(p as Predicate).name} = ${(p as Predicate).value}` : String(p)))
    .join(", ");
  return (
    <p className="hint small">
      {who}: <strong className={`rel rel-${proposal.label}`}>{labelText(proposal.label)}</strong> ({labelMeaning(proposal.label)})
      {decisive && <> · decisive: {decisive}</>}
      {proposal.evidence.length > 0 && <> · evidence: {proposal.evidence.map(String).join(", ")}</>}
    </p>
  );
}

interface RowData {
  video: Video;
  pool: PoolDetail;
  tracks: Map<number, Track>;
}

function useRowData(videoId: number, poolId: number, candidates: number[]) {
  const [state, setState] = useState<{ data?: RowData; error?: unknown }>({});
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    const ctrl = new AbortController();
    setState({});
    Promise.all([videoOnce(videoId), api.pool(poolId, ctrl.signal)]).then(
      ([video, pool]) => {
        if (ctrl.signal.aborted) return;
        const members = new Map(pool.members.map((m) => [m.trajectory, m]));
        const lost = candidates.filter((t) => !members.has(t));
        if (lost.length) {
          setState({ error: new Error(`Candidates ${lost.join(", ")} are not members of pool ${poolId}.`) });
          return;
        }
        const tracks = new Map(candidates.map((t) => {
          const m = members.get(t)!;
          return [t, new Track(t, m.frames, m.boxes)] as const;
        }));
        setState({ data: { video, pool, tracks } });
      },
      (error: unknown) => !ctrl.signal.aborted && setState({ error }),
    );
    return () => ctrl.abort();
  }, [videoId, poolId, candidates.join(","), attempt]);
  return { ...state, retry: () => setAttempt((a) => a + 1) };
}

/** The candidates whose identity with ``tid`` stayed unresolved (flagged, kept apart). */
function sameAs(row: RelationRowTarget, tid: number): number[] {
  return row.unresolved_identity.flatMap(([a, b]) => (a === tid ? [b] : b === tid ? [a] : []));
}

function QueryPanel({ row }: { row: RelationRowTarget }) {
  return (
    <section className="query-panel" aria-label="Query">
      <p className="query-text">“{row.text}”</p>
      <Predicates predicates={row.predicates} />
      <p className="muted small">
        {row.review_round === 1
          ? `First review: label every candidate of pool ${row.pool} (${row.candidates.length}) and rate the query.`
          : row.candidates.length === 1
            ? `Second review: only the disputed candidate of pool ${row.pool} is shown; label it independently.`
            : `Second review: only the ${row.candidates.length} disputed candidates of pool ${row.pool} are shown; label them independently.`}
      </p>
      {row.unresolved_identity.length > 0 && (
        <p className="warning small" role="note" aria-label="Unresolved identity pairs">
          Identity review could not tell whether these candidates are one object:{" "}
          {row.unresolved_identity.map(([a, b]) => `#${a} and #${b}`).join("; ")}. They stay separate; a query
          that matches both is ambiguous.
        </p>
      )}
    </section>
  );
}

/** The relation part of a target read only (adjudication): the query and its candidates. */
export function RelationRowSummary({ target }: TargetProps) {
  const row = target.relation_row;
  if (!row) return <ErrorState error={new Error("This item names no relation row.")} />;
  return (
    <div className="target">
      <QueryPanel row={row} />
      <ul>{row.candidates.map((c) => <li key={c.trajectory}>#{c.trajectory} <Hint proposal={c.prelabel} /></li>)}</ul>
    </div>
  );
}

/** The annotator's relation row review (mounted per item by the review shell). */
export function RelationReview(props: StageScreenProps) {
  const row = props.seat.target.relation_row ?? null;
  if (!row || row.candidates.length === 0) {
    return <ErrorState error={new Error(`Item ${props.itemId} carries no relation row to review.`)} />;
  }
  return <RelationGrid {...props} row={row} />;
}

function RelationGrid({ seat, row, voted, busy, submit, say, onFirstFrame, footer }: StageScreenProps & { row: RelationRowTarget }) {
  const ids = useMemo(() => row.candidates.map((c) => c.trajectory), [row]);
  const { data, error, retry } = useRowData(seat.target.video, row.pool, ids);
  const [grid, setGrid] = useState<GridState>(() => initGrid(ids, row.rate_query));
  const [controller, setController] = useState<PlayerController | null>(null);
  const cards = useRef(new Map<number, HTMLElement>());
  const open = !voted && !busy;
  const current = selected(grid);

  const colorOf = (t: number) => CANDIDATE_COLORS[ids.indexOf(t) % CANDIDATE_COLORS.length];
  const playerTracks: PlayerTrack[] = useMemo(() => (data ? ids.map((t) => ({
    track: data.tracks.get(t)!, style: { color: colorOf(t), label: `#${t}` },
  })) : []), [data, ids]);

  // Show the selected candidate: its card in view once the person moves the selection (never on
  // open: the page stays where it opened), the shared playhead on its first frame unless it is
  // already seen there.
  const scrolledTo = useRef(current);
  useEffect(() => {
    if (scrolledTo.current !== current) {
      scrolledTo.current = current;
      cards.current.get(current)?.scrollIntoView({ block: "nearest" });
    }
    const track = data?.tracks.get(current);
    if (controller && track && track.indexAt(controller.state.frame) < 0) {
      controller.pause();
      controller.seek(track.first);
    }
  }, [current, controller, data]);

  const label = (value: RelationLabel) => {
    if (!open) return;
    setGrid((g) => labelSelected(g, value));
    say(`#${current}: ${labelText(value)} (${labelMeaning(value)}).`);
  };
  const play = (t: number) => {
    const track = data?.tracks.get(t);
    if (!controller || !track) return;
    setGrid((g) => select(g, ids.indexOf(t)));
    controller.pause();
    controller.seek(track.first);
    controller.play();
  };
  const send = () => {
    if (!open) return;
    const gaps = missing(grid);
    if (gaps.length > 0) {
      say(gaps.join(" "));
      return;
    }
    void submit(toVote(grid));
  };
  const rate = (change: (g: GridState) => GridState, what: string) => {
    if (!open || !row.rate_query) return;
    setGrid(change);
    say(what);
  };

  useShortcutList([
    { id: "relation.match", handler: () => label(1), detail: `#${current}`, enabled: open },
    { id: "relation.mismatch", handler: () => label(0), detail: `#${current}`, enabled: open },
    { id: "relation.unknown", handler: () => label(-1), detail: `#${current}`, enabled: open },
    { id: "relation.nextCandidate", handler: () => setGrid((g) => move(g, 1)) },
    { id: "relation.previousCandidate", handler: () => setGrid((g) => move(g, -1)) },
    { id: "relation.play", handler: () => play(current) },
    { id: "relation.faithful", handler: () => rate((g) => setFaithful(g, true), "Faithful: yes."), enabled: open && row.rate_query },
    { id: "relation.unfaithful", handler: () => rate((g) => setFaithful(g, false), "Faithful: no."), enabled: open && row.rate_query },
    ...[1, 2, 3, 4, 5].map((n) => ({
      id: `relation.natural${n}`, handler: () => rate((g) => setNatural(g, n), `Natural: ${n} of 5.`), enabled: open && row.rate_query,
    })),
    { id: "relation.submit", handler: send, enabled: open },
  ]);

  if (error) return <ErrorState error={error} onRetry={retry} title="The candidates could not be loaded" />;
  const range = data ? playRange(playerTracks.map((p) => p.track), data.video.frame_count, Math.round(data.video.fps / 2)) : null;
  const t = tally(grid);
  const gaps = missing(grid);
  const hints = new Map(row.candidates.map((c) => [c.trajectory, c.prelabel]));

  return (
    <div className="review relation-review">
      <div className="review-main">
        <QueryPanel row={row} />
        {!data || !range ? (
          // Only this place changes when the candidates arrive: nothing is drawn below it yet.
          <div className="player player-overview player-slot" aria-busy="true"><Loading what={`the ${count(ids.length, "candidate")}`} /></div>
        ) : (
          <>
            <Player video={data.video} tracks={playerTracks} range={range} start={playerTracks[0].track.first} layout="overview"
              crops={false} label={`Pool ${row.pool} of ${data.video.name}: ${count(ids.length, "candidate")}`} onFirstFrame={onFirstFrame}
              onController={setController} />
            <ol className="candidates" aria-label={`Candidates (${ids.length})`}>
              {ids.map((tid, i) => {
                const track = data.tracks.get(tid)!;
                const value = grid.labels.get(tid);
                const isSelected = tid === current;
                const own = voted?.judgments?.[String(tid)];
                return (
                  <li key={tid} ref={(el) => { if (el) cards.current.set(tid, el); else cards.current.delete(tid); }}
                    className={`candidate${isSelected ? " selected" : ""}`} style={{ borderColor: colorOf(tid) }}
                    aria-current={isSelected ? "true" : undefined} aria-label={`Candidate #${tid}`}
                    onClick={() => setGrid((g) => select(g, i))}>
                    <div className="candidate-head">
                      <strong><span className="swatch" style={{ background: colorOf(tid) }} /> #{tid}</strong>
                      <span className="muted small">frames {track.first}–{track.last} · {track.length} obs.</span>
                      {sameAs(row, tid).length > 0 && (
                        <span className="small warning-text" title="identity review left this pair unresolved">
                          maybe the same object as {sameAs(row, tid).map((o) => `#${o}`).join(", ")}
                        </span>
                      )}
                      <span className={`rel rel-${value ?? own ?? "none"}`} aria-label={`label ${labelText(value ?? own)}`}>{labelText(value ?? own)}</span>
                    </div>
                    {controller ? <TrackView controller={controller} video={data.video} track={track}
                      style={playerTracks[i].style} range={range} label={`Candidate #${tid}`} width={TRACK_VIEW_WIDTH} />
                      : <TrackViewSlot width={TRACK_VIEW_WIDTH} />}
                    <Hint proposal={hints.get(tid) ?? null} />
                    {!voted && (
                      <div className="rel-buttons" role="group" aria-label={`Label of candidate #${tid}`}>
                        {([1, 0, -1] as RelationLabel[]).map((v) => (
                          <button key={v} type="button" className={`rel-button rel-${v}`} aria-pressed={value === v} disabled={busy}
                            onClick={(e) => { e.stopPropagation(); if (open) setGrid((g) => labelTrajectory(g, tid, v)); }}>
                            {labelText(v)} <span className="small">{labelMeaning(v)}</span>
                          </button>
                        ))}
                        <button type="button" className="icon" onClick={(e) => { e.stopPropagation(); play(tid); }}
                          aria-label={`Play candidate #${tid} from its first frame`}>▶</button>
                      </div>
                    )}
                  </li>
                );
              })}
            </ol>
          </>
        )}
      </div>
      <aside className="vote-panel" aria-label="Your labels">
        <p className="question">
          Does each candidate satisfy every predicate of <q className="query-in-view" aria-label="The query">{row.text}</q> at once?
        </p>
        <p className="small muted">
          <kbd>1</kbd> match: all predicates jointly supported · <kbd>0</kbd> mismatch: a necessary condition visibly
          violated · <kbd>U</kbd> ⊥: cannot tell (absence needs the interval covered)
        </p>
        {voted ? (
          <OwnVoteNote vote={voted}>
            <p>{Object.entries(voted.judgments ?? {}).map(([k, v]) => `#${k}: ${labelText(v)}`).join(" · ")}</p>
          </OwnVoteNote>
        ) : (
          <>
            <p className="tally" aria-label="Labels so far">
              {t.match} × 1 · {t.mismatch} × 0 · {t.unknown} × ⊥ · <strong>{t.unlabelled} without a label</strong>
            </p>
            {row.rate_query && (
              <fieldset className="ratings">
                <legend>The query</legend>
                <div className="labels-row" role="radiogroup" aria-label="Faithful to its target">
                  <span>Faithful:</span>
                  <button type="button" role="radio" aria-checked={grid.faithful === true} className={grid.faithful === true ? "chosen" : undefined}
                    onClick={() => rate((g) => setFaithful(g, true), "Faithful: yes.")} aria-keyshortcuts={ariaKeys("relation.faithful")}><kbd>F</kbd> yes</button>
                  <button type="button" role="radio" aria-checked={grid.faithful === false} className={grid.faithful === false ? "chosen" : undefined}
                    onClick={() => rate((g) => setFaithful(g, false), "Faithful: no.")} aria-keyshortcuts={ariaKeys("relation.unfaithful")}><kbd>⇧F</kbd> no</button>
                </div>
                <div className="labels-row" role="radiogroup" aria-label="Naturalness">
                  <span>Natural:</span>
                  {Array.from({ length: NATURAL_MAX - NATURAL_MIN + 1 }, (_, k) => NATURAL_MIN + k).map((n) => (
                    <button key={n} type="button" role="radio" aria-checked={grid.natural === n} className={grid.natural === n ? "chosen" : undefined}
                      onClick={() => rate((g) => setNatural(g, n), `Natural: ${n} of 5.`)} aria-keyshortcuts={ariaKeys(`relation.natural${n}`)}
                      aria-label={`${n} of 5`}>{n}</button>
                  ))}
                </div>
                <p className="muted small"><kbd>⇧1</kbd>–<kbd>⇧5</kbd>: 1 unnatural … 5 reads like a person wrote it</p>
              </fieldset>
            )}
            {gaps.length > 0 && <ul className="missing small">{gaps.map((g) => <li key={g}>{g}</li>)}</ul>}
            <button type="button" className="primary" disabled={busy || gaps.length > 0} onClick={send}
              aria-keyshortcuts={ariaKeys("relation.submit")}>
              Send the labels <kbd>Ctrl + Enter</kbd>
            </button>
          </>
        )}
        {footer}
      </aside>
    </div>
  );
}
