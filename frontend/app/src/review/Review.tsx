// The annotator's review screen, shared by every review stage: claim the next item, show its
// target, vote with one key, move on. Votes are blind (only your own is ever shown), and the
// previous / next keys walk back through the items you voted on in this session.

import { type KeyboardEvent, type ReactNode, useEffect, useRef, useState } from "react";
import { ApiError, holdSignedOutRedirect, isSignedOut } from "../api/client";
import { api, requestId } from "../api/endpoints";
import type { Assignment, OwnVote, VoteAnswer, VoteInput } from "../api/types";
import { Link } from "../components/Link";
import { count } from "../components/plural";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { ariaKeys, useShortcut, useShortcutList } from "../keyboard/useShortcut";
import { markFirstFrame, markItemOpen, markVoteSent, voteRoundTrips } from "../perf";
import { navigate } from "../router";
import { loadStageDeclarations, useReviewStage } from "./declarations";
import { OwnVoteNote } from "./OwnVoteNote";
import { prefetchUpcoming } from "./prefetch";
import type { ReviewStageSpec, StagePresentation, VoteParts } from "./spec";

// Claimed items handed from the claim to the item screen, so it need not fetch them again.
const claimed = new Map<number, Assignment>();

const historyKey = (stage: string) => `trajlab.voted.${stage}`;

/** Items voted on in this browser session, oldest first. */
export function votedHistory(stage: string): number[] {
  try {
    return JSON.parse(sessionStorage.getItem(historyKey(stage)) ?? "[]") as number[];
  } catch {
    return [];
  }
}

function remember(stage: string, item: number): void {
  const h = votedHistory(stage).filter((i) => i !== item);
  h.push(item);
  sessionStorage.setItem(historyKey(stage), JSON.stringify(h.slice(-200)));
}

/** Claim the next item of a stage and open it; says so plainly when there is no work left. */
export function ReviewClaim({ spec }: { spec: StagePresentation }) {
  const [state, setState] = useState<{ empty?: boolean; error?: unknown }>({});
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let live = true;
    setState({});
    loadStageDeclarations().catch(() => undefined); // the item screen needs them: fetch alongside the claim
    api.claimNext(spec.stage).then(
      (seat) => {
        if (!live) return;
        if (seat === null) setState({ empty: true });
        else {
          claimed.set(seat.item, seat);
          navigate(`/review/${spec.path}/${seat.item}`, { replace: true });
        }
      },
      (error: unknown) => live && setState({ error }),
    );
    return () => {
      live = false;
    };
  }, [spec, attempt]);
  const history = votedHistory(spec.stage);
  useShortcut(`${spec.keyScope ?? "review"}.previous`, () => history.length && navigate(`/review/${spec.path}/${history[history.length - 1]}`), {
    enabled: history.length > 0,
  });
  if (state.error) return <ErrorState error={state.error} onRetry={() => setAttempt((a) => a + 1)} />;
  if (state.empty) {
    return (
      <EmptyState title={`No items left in ${spec.title.toLowerCase()}`}>
        <p>Every item is decided or has its full panel. New items appear when a proposal run finishes.</p>
        {history.length > 0 && <p>You voted on {count(history.length, "item")} in this session (press P to look back).</p>}
        <p>
          <Link to="/">Back to your queues</Link>
        </p>
      </EmptyState>
    );
  }
  return <Loading what="your next item" />;
}

/** A vote, then a claim of the next item: two requests where `api.voteAndNext` makes one (for
 *  measuring the two against each other, `perf.voteRoundTrips`). */
async function voteThenClaim(itemId: number, stage: string, body: VoteInput): Promise<VoteAnswer> {
  const { prefer, ...vote } = body;
  const mine = await api.vote(itemId, vote);
  if (!mine) throw new Error("The server answered the vote without a body.");
  return { ...mine, next: await api.claimNext(stage, prefer) };
}

/** How long a vote waits before it is sent, so a stray key can be taken back (Ctrl+Z). */
export const UNDO_MS = 4000;

/** One item: the target, the vote controls, and your own vote once cast. Mounted afresh per
 *  item (keyed by its id), so nothing of the previous item lingers. Stages with a `Screen` lay
 *  out their own target and controls; the others get the target and the label buttons.
 *
 *  Nothing is voted before the item's first frame is on screen (keys and buttons are inert
 *  until then). A vote waits `UNDO_MS` with a countdown, during which Ctrl+Z withdraws it and
 *  Enter sends it at once; then it is sent together with the claim of the next item (one
 *  request), and it is final. */
export function ReviewItem({ spec, itemId }: { spec: StagePresentation; itemId: number }) {
  const openedAt = useRef(0);
  if (openedAt.current === 0) {
    markItemOpen(itemId); // as early as possible: the first-frame time starts here
    openedAt.current = performance.now();
  }
  const [seat, setSeat] = useState<Assignment | null>(() => claimed.get(itemId) ?? null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [ready, setReady] = useState(false); // the first frame is on screen
  const [pending, setPending] = useState<{ vote: VoteParts; sendAt: number; spentMs: number } | null>(null);
  const [now, setNow] = useState(() => performance.now());
  const [voteError, setVoteError] = useState<unknown>(null);
  const [skipping, setSkipping] = useState(false);
  const [status, setStatus] = useState("");
  const rid = useRef(requestId()); // reused if the same vote is retried
  const declared = useReviewStage(spec); // labels and reasons: nothing is votable without them

  // An ended session is explained next to the vote (with a way back here), not by leaving the item.
  useEffect(() => holdSignedOutRedirect(), []);
  useEffect(() => {
    claimed.delete(itemId);
    if (seat) return undefined;
    const ctrl = new AbortController();
    api.item(itemId, ctrl.signal).then(
      (s) => !ctrl.signal.aborted && setSeat(s),
      (e: unknown) => !ctrl.signal.aborted && setLoadError(e),
    );
    return () => ctrl.abort();
  }, [itemId]); // mounted per item: runs once

  const voted = seat?.my_vote ?? null;
  const history = votedHistory(spec.stage);
  const at = history.indexOf(itemId);
  const scope = spec.keyScope ?? "review";
  const open = (to: Assignment | null) => {
    if (to) {
      claimed.set(to.item, to);
      navigate(`/review/${spec.path}/${to.item}`);
    } else navigate(`/review/${spec.path}`);
  };

  const send = async (vote: VoteParts, spentMs: number) => {
    if (!seat) return;
    setPending(null);
    setBusy(true);
    setVoteError(null);
    try {
      markVoteSent(itemId);
      // `prefer`: the item fetched ahead comes next while it is still ours to take.
      const body = { ...vote, time_spent_ms: spentMs, client_request_id: rid.current, prefer: seat.upcoming?.token };
      const cast = voteRoundTrips() === 2 ? await voteThenClaim(itemId, spec.stage, body) : await api.voteAndNext(itemId, body);
      if (!cast) throw new Error("The server answered the vote without a body.");
      const { next: following, ...mine } = cast;
      remember(spec.stage, itemId);
      setSeat({ ...seat, my_vote: mine });
      setStatus(`Voted ${vote.label.replaceAll("_", " ")}.`);
      open(following);
    } catch (e) {
      setVoteError(e);
    } finally {
      setBusy(false);
    }
  };

  const submit = async (vote: VoteParts) => {
    if (!seat || voted || busy || pending) return;
    if (!ready) {
      setStatus("The first frame is still loading: nothing is voted before you can see the item.");
      return;
    }
    const t = performance.now();
    setNow(t);
    setPending({ vote, sendAt: t + UNDO_MS, spentMs: Math.round(t - openedAt.current) });
  };

  // The undo window: a countdown, then the vote goes out.
  useEffect(() => {
    if (!pending) return undefined;
    const tick = window.setInterval(() => setNow(performance.now()), 200);
    const timer = window.setTimeout(() => void send(pending.vote, pending.spentMs), Math.max(0, pending.sendAt - performance.now()));
    return () => {
      window.clearInterval(tick);
      window.clearTimeout(timer);
    };
  }, [pending]);
  const undo = () => {
    if (!pending) return;
    setPending(null);
    setStatus(`Vote ${pending.vote.label.replaceAll("_", " ")} withdrawn: nothing was sent.`);
  };
  const sendNow = () => pending && void send(pending.vote, pending.spentMs);

  const skip = async (reason: string) => {
    setSkipping(false);
    setBusy(true);
    setVoteError(null);
    try {
      const answer = await api.skip(itemId, reason, seat?.upcoming?.token);
      open(answer?.next ?? null);
    } catch (e) {
      setVoteError(e);
    } finally {
      setBusy(false);
    }
  };

  const previous = () => {
    if (pending) return setStatus("Your vote is waiting to be sent: Ctrl+Z withdraws it, Enter sends it now.");
    const target = at > 0 ? history[at - 1] : at < 0 && history.length ? history[history.length - 1] : null;
    if (target === null) setStatus("This is the first item you voted on in this session.");
    else navigate(`/review/${spec.path}/${target}`);
  };
  const next = () => {
    if (pending) return setStatus("Your vote is waiting to be sent: Ctrl+Z withdraws it, Enter sends it now.");
    if (at >= 0 && at < history.length - 1) navigate(`/review/${spec.path}/${history[at + 1]}`);
    else if (voted) navigate(`/review/${spec.path}`);
    else setStatus("Vote on this item first (or skip it with S): items come one at a time.");
  };
  const canSkip = !!seat && !voted && !busy && !pending;
  useShortcutList([
    { id: `${scope}.previous`, handler: previous },
    { id: `${scope}.next`, handler: next },
    { id: `${scope}.undo`, handler: undo, enabled: pending !== null },
    { id: `${scope}.sendNow`, handler: sendNow, enabled: pending !== null },
    { id: `${scope}.skip`, handler: () => setSkipping(true), enabled: canSkip && !skipping },
  ]);

  // Fetch ahead: once this item's first frame is on screen, the likely next item's first frame.
  useEffect(() => {
    if (ready && seat?.upcoming) prefetchUpcoming(seat.upcoming);
  }, [ready, seat?.upcoming?.item]);

  if (loadError) {
    const gone = loadError instanceof ApiError && loadError.status === 404;
    return <ErrorState error={loadError} title={gone ? "This item is not yours" : undefined}
      onRetry={() => navigate(`/review/${spec.path}`, { replace: true })} />;
  }
  if (!seat) return <Loading what={`item ${itemId}`} />;
  if (declared.error) return <ErrorState error={declared.error} title="The review stages could not be loaded" onRetry={declared.retry} />;
  if (!declared.spec) return <Loading what="the stage's labels" />;
  if (seat.stage !== spec.stage) {
    return <ErrorState error={new Error(`Item ${itemId} belongs to the ${seat.stage} stage, not ${spec.stage}.`)} />;
  }
  const footer = (
    <>
      {pending && <UndoBar label={pending.vote.label} secondsLeft={Math.max(0, Math.ceil((pending.sendAt - now) / 1000))}
        onUndo={undo} onSendNow={sendNow} />}
      {voteError !== null && <VoteError error={voteError} returnTo={`/review/${spec.path}/${itemId}`}
        onRetry={() => setVoteError(null)} />}
      {skipping && <SkipForm onSkip={(reason) => void skip(reason)} onCancel={() => setSkipping(false)} />}
      <div className="item-nav">
        <button type="button" onClick={previous} aria-keyshortcuts={ariaKeys(`${scope}.previous`)}
          title="Previous item: your earlier votes in this session (P)">
          <kbd>P</kbd> Previous
        </button>
        {!voted && (
          <button type="button" onClick={() => setSkipping(true)} disabled={!canSkip} aria-keyshortcuts={ariaKeys(`${scope}.skip`)}
            title="Skip this item with a reason; it is not offered to you again for a while (S)">
            <kbd>S</kbd> Skip
          </button>
        )}
        <button type="button" onClick={next} aria-keyshortcuts={ariaKeys(`${scope}.next`)}
          title="Next item (N)">
          Next <kbd>N</kbd>
        </button>
      </div>
      <SessionProgress stage={spec.stage} done={history.length} position={at >= 0 ? at + 1 : history.length + 1}
        voted={voted !== null} load={ready} />
      <p className="muted small">
        Item {itemId} · {voted ? "voted" : ready ? `claimed until ${new Date(seat.lease_expires_at).toLocaleTimeString()}`
          : "voting opens when the first frame is on screen"} · press <kbd>?</kbd> for all keys
      </p>
      <p className="status" role="status" aria-live="polite">
        {status}
      </p>
    </>
  );
  const onFirstFrame = () => {
    markFirstFrame(itemId);
    setReady(true);
  };
  const inert = busy || !ready || pending !== null;
  if (spec.Screen) {
    const Screen = spec.Screen;
    return <Screen spec={declared.spec} seat={seat} itemId={itemId} voted={voted} busy={inert} submit={submit} say={setStatus}
      onFirstFrame={onFirstFrame} footer={footer} />;
  }
  return <LabelReview spec={declared.spec} seat={seat} voted={voted} busy={inert} submit={submit} say={setStatus}
    onFirstFrame={onFirstFrame} footer={footer} />;
}

function UndoBar({ label, secondsLeft, onUndo, onSendNow }: { label: string; secondsLeft: number; onUndo: () => void; onSendNow: () => void }) {
  return (
    <div className="undo-bar" role="status" aria-live="polite">
      <span>
        Sending <strong>{label.replaceAll("_", " ")}</strong> in <span className="countdown">{secondsLeft}</span> s
      </span>
      <button type="button" onClick={onUndo} title="Withdraw this vote before it is sent (Ctrl+Z)">
        Undo <kbd>Ctrl+Z</kbd>
      </button>
      <button type="button" onClick={onSendNow} title="Send it now (Enter)">
        Send now <kbd>Enter</kbd>
      </button>
    </div>
  );
}

/** A failed vote, next to the vote controls; an ended session says the vote was not saved and
 *  signs in again back to this item. It shows itself: the side panel scrolls it into view, and
 *  its way out (try again, sign in again) takes the focus, so Enter is the next step. */
function VoteError({ error, returnTo, onRetry }: { error: unknown; returnTo: string; onRetry: () => void }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    box.current?.scrollIntoView({ block: "nearest" });
    box.current?.querySelector<HTMLElement>("button, a[href]")?.focus();
  }, []);
  if (isSignedOut(error)) {
    return (
      <div className="error vote-error" role="alert" ref={box}>
        <h2>Your vote was not saved — sign in again</h2>
        <p>Your session ended before the vote reached the server. Sign in and you come back to this item to vote again.</p>
        <a className="button" href={`/accounts/login/?next=${encodeURIComponent(returnTo)}`}>Sign in again</a>
      </div>
    );
  }
  return <div className="vote-error" ref={box}><ErrorState error={error} title="Your vote was not recorded" onRetry={onRetry} /></div>;
}

function SkipForm({ onSkip, onCancel }: { onSkip: (reason: string) => void; onCancel: () => void }) {
  const [reason, setReason] = useState("");
  return (
    <form className="skip-form" onSubmit={(e) => {
      e.preventDefault();
      onSkip(reason.trim());
    }}>
      <label>
        Why skip this item?
        <input type="text" value={reason} maxLength={200} autoFocus placeholder="e.g. the video does not load"
          onChange={(e) => setReason(e.target.value)} onKeyDown={(e) => e.key === "Escape" && onCancel()} />
      </label>
      <button type="submit" title="Give the item back and take the next one">Skip</button>
      <button type="button" onClick={onCancel}>Cancel</button>
    </form>
  );
}

// The stage's queue as the server counts it (your votes, the items still open to you), read at
// most every QUEUE_REFRESH_MS: what "n of N" counts against.
const QUEUE_REFRESH_MS = 30_000;
type QueueCounts = { done: number; available: number; more: boolean; votedHere: number };
const queueRead = new Map<string, { at: number; counts: Promise<QueueCounts | null> }>();

function stageQueue(stage: string) {
  const known = queueRead.get(stage);
  if (known && performance.now() - known.at < QUEUE_REFRESH_MS) return known.counts;
  const votedHere = votedHistory(stage).length; // votes of this session the read already counts
  const counts = api.queues().then(
    (q) => {
      const mine = q.queues.find((x) => x.kind === "review" && x.stage === stage);
      return mine ? { done: mine.done, available: mine.available, more: mine.more, votedHere } : null;
    },
    () => null,
  );
  queueRead.set(stage, { at: performance.now(), counts });
  return counts;
}

/** "n of N" on the stage (n: this item among your votes on it, N: your votes and the items still
 *  open to you), and this session's own progress: the items voted here and where this one is. */
function SessionProgress({ stage, done, position, voted, load }: { stage: string; done: number; position: number; voted: boolean; load: boolean }) {
  const [queue, setQueue] = useState<QueueCounts | null>(null);
  useEffect(() => {
    let live = true;
    if (load) void stageQueue(stage).then((q) => live && q && setQueue(q));
    return () => {
      live = false;
    };
  }, [stage, load]);
  const sessionTotal = Math.max(done, position);
  // Two lines, both always there: the stage's count arrives later and moves nothing.
  return (
    <p className="session-progress" aria-label="Progress">
      <span className="stage-count" title="Your votes on this stage, this item, and the items still open to you">
        {queue && !voted ? (
          <>Item <strong>{queue.done + (done - queue.votedHere) + 1}</strong> of {queue.done + 1 + queue.available}{queue.more ? "+" : ""} on this stage</>
        ) : "\u00a0"}
      </span>
      <span>This session: item {position} of {sessionTotal}, {count(done, "vote")}</span>
    </p>
  );
}

/** The stages whose vote is one label (usability, duplicates, cross-video pairs): the target,
 *  the label buttons (1, 2, 3), the optional reasons (Shift+1, …) and another reason in words (O).
 *
 *  The vote panel comes first in the tab order (it sits beside the target): the labels, the
 *  reasons, then the "Other reason" field. While the field has the focus, keys type text and
 *  never vote; Enter keeps the reason and Esc leaves the field, and the label keys vote again. */
function LabelReview({ spec, seat, voted, busy, submit, say, onFirstFrame, footer }: {
  spec: ReviewStageSpec;
  seat: Assignment;
  voted: OwnVote | null;
  busy: boolean;
  submit: (vote: VoteParts) => Promise<void>;
  say: (status: string) => void;
  onFirstFrame: () => void;
  footer: ReactNode;
}) {
  const [reasons, setReasons] = useState<string[]>([]);
  const [other, setOther] = useState("");
  const [typing, setTyping] = useState(false);
  const otherField = useRef<HTMLInputElement>(null);
  const cast = (label: string) => {
    const all = other.trim() ? [...reasons, other.trim()] : reasons;
    void submit({ label, reasons: all });
  };
  const toggleReason = (r: string) => setReasons((rs) => (rs.includes(r) ? rs.filter((x) => x !== r) : [...rs, r]));
  const open = !voted;
  const keys = `1–${spec.labels.length}`;
  useShortcutList([
    ...spec.labels.map((l, i) => ({ id: `review.label${i + 1}`, handler: () => cast(l.value), detail: l.text, enabled: open })),
    ...spec.reasons.slice(0, 6).map((r, i) => ({ id: `review.reason${i + 1}`, handler: () => toggleReason(r), detail: r, enabled: open })),
    { id: "review.otherReason", handler: () => otherField.current?.focus(), enabled: open },
  ]);
  const onOtherKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (e.key !== "Enter" || e.ctrlKey || e.metaKey || e.altKey || e.shiftKey || e.nativeEvent.isComposing) return;
    e.preventDefault(); // Enter keeps the reason: nothing is sent, the label keys vote again
    e.currentTarget.blur();
    say(other.trim() ? `Reason kept: “${other.trim()}”. Vote with ${keys}.` : `Vote with ${keys}.`);
  };
  const Target = spec.Target;
  return (
    <div className="review">
      <aside className="vote-panel" aria-label="Your vote">
        <p className="question">{spec.question}</p>
        {voted ? (
          <OwnVoteNote vote={voted} />
        ) : (
          <>
            <div className="labels" role="group" aria-label="Labels">
              {spec.labels.map((l, i) => (
                <button key={l.value} type="button" className={`vote label-${l.value}`} disabled={busy}
                  onClick={() => cast(l.value)} aria-keyshortcuts={ariaKeys(`review.label${i + 1}`)}>
                  <kbd>{i + 1}</kbd> {l.text}
                </button>
              ))}
            </div>
            <fieldset className="reasons">
              <legend>Reasons (optional)</legend>
              {spec.reasons.map((r, i) => (
                <label key={r}>
                  <input type="checkbox" checked={reasons.includes(r)}
                    onChange={() => toggleReason(r)} />
                  {i < 6 && <kbd>⇧{i + 1}</kbd>} {r}
                </label>
              ))}
              <label className="other">
                <span><kbd>O</kbd> Other reason</span>
                <input ref={otherField} type="text" value={other} maxLength={200} aria-keyshortcuts={ariaKeys("review.otherReason")}
                  aria-describedby="other-reason-keys" onChange={(e) => setOther(e.target.value)} onKeyDown={onOtherKey}
                  onFocus={() => setTyping(true)} onBlur={() => setTyping(false)} />
              </label>
              <p id="other-reason-keys" className={`small ${typing ? "typing-hint" : "muted"}`}>
                {typing ? <>Typing: keys are text here. <kbd>Enter</kbd> keeps the reason, <kbd>Esc</kbd> leaves the field; then vote with {keys}.</>
                  : <>Enter keeps it, Esc leaves the field.</>}
              </p>
            </fieldset>
          </>
        )}
        {footer}
      </aside>
      <div className="review-main">
        <Target target={seat.target} onFirstFrame={onFirstFrame} />
      </div>
    </div>
  );
}
