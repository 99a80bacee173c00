// The annotator's review screen, shared by every review stage: claim the next item, show its
// target, vote with one key, move on. Votes are blind (only your own is ever shown), and the
// previous / next keys walk back through the items you voted on in this session.

import { type ReactNode, useEffect, useRef, useState } from "react";
import { ApiError } from "../api/client";
import { api, requestId } from "../api/endpoints";
import type { Assignment, OwnVote } from "../api/types";
import { Link } from "../components/Link";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { ariaKeys, useShortcut, useShortcutList } from "../keyboard/useShortcut";
import { markFirstFrame, markItemOpen } from "../perf";
import { navigate } from "../router";
import { loadStageDeclarations, useReviewStage } from "./declarations";
import { OwnVoteNote } from "./OwnVoteNote";
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
        {history.length > 0 && <p>You voted on {history.length} items in this session (press P to look back).</p>}
        <p>
          <Link to="/">Back to your queues</Link>
        </p>
      </EmptyState>
    );
  }
  return <Loading what="your next item" />;
}

/** One item: the target, the vote controls, and your own vote once cast. Mounted afresh per
 *  item (keyed by its id), so nothing of the previous item lingers. Stages with a `Screen` lay
 *  out their own target and controls; the others get the target and the label buttons. */
export function ReviewItem({ spec, itemId }: { spec: StagePresentation; itemId: number }) {
  const openedAt = useRef(0);
  if (openedAt.current === 0) {
    markItemOpen(itemId); // as early as possible: the first-frame time starts here
    openedAt.current = performance.now();
  }
  const [seat, setSeat] = useState<Assignment | null>(() => claimed.get(itemId) ?? null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [voteError, setVoteError] = useState<unknown>(null);
  const [status, setStatus] = useState("");
  const rid = useRef(requestId()); // reused if the same vote is retried
  const declared = useReviewStage(spec); // labels and reasons: nothing is votable without them

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

  const submit = async (vote: VoteParts) => {
    if (!seat || voted || busy) return;
    setBusy(true);
    setVoteError(null);
    try {
      const cast = await api.vote(itemId, {
        ...vote, time_spent_ms: Math.round(performance.now() - openedAt.current), client_request_id: rid.current,
      });
      remember(spec.stage, itemId);
      setSeat({ ...seat, my_vote: cast });
      setStatus(`Voted ${vote.label.replaceAll("_", " ")}. Loading the next item…`);
      const next = await api.claimNext(spec.stage);
      if (next) {
        claimed.set(next.item, next);
        navigate(`/review/${spec.path}/${next.item}`);
      } else navigate(`/review/${spec.path}`);
    } catch (e) {
      setVoteError(e);
    } finally {
      setBusy(false);
    }
  };

  const previous = () => {
    const target = at > 0 ? history[at - 1] : at < 0 && history.length ? history[history.length - 1] : null;
    if (target === null) setStatus("This is the first item you voted on in this session.");
    else navigate(`/review/${spec.path}/${target}`);
  };
  const next = () => {
    if (at >= 0 && at < history.length - 1) navigate(`/review/${spec.path}/${history[at + 1]}`);
    else if (voted) navigate(`/review/${spec.path}`);
    else setStatus("Vote on this item first: items come one at a time.");
  };
  useShortcutList([
    { id: `${scope}.previous`, handler: previous },
    { id: `${scope}.next`, handler: next },
  ]);

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
      {voteError !== null && <ErrorState error={voteError} title="Your vote was not recorded" />}
      <div className="item-nav">
        <button type="button" onClick={previous} aria-keyshortcuts={ariaKeys(`${scope}.previous`)}>
          <kbd>P</kbd> Previous
        </button>
        <button type="button" onClick={next} aria-keyshortcuts={ariaKeys(`${scope}.next`)}>
          Next <kbd>N</kbd>
        </button>
      </div>
      <p className="muted small">
        Item {itemId} · {voted ? "voted" : `claimed until ${new Date(seat.lease_expires_at).toLocaleTimeString()}`} · press{" "}
        <kbd>?</kbd> for all keys
      </p>
      <p className="status" role="status" aria-live="polite">
        {status}
      </p>
    </>
  );
  const onFirstFrame = () => markFirstFrame(itemId);
  if (spec.Screen) {
    const Screen = spec.Screen;
    return <Screen spec={declared.spec} seat={seat} itemId={itemId} voted={voted} busy={busy} submit={submit} say={setStatus}
      onFirstFrame={onFirstFrame} footer={footer} />;
  }
  return <LabelReview spec={declared.spec} seat={seat} voted={voted} busy={busy} submit={submit} onFirstFrame={onFirstFrame}
    footer={footer} />;
}

/** The stages whose vote is one label (usability, duplicates, cross-video pairs): the target,
 *  the label buttons (1, 2, 3) and the optional reasons (Shift+1, …). */
function LabelReview({ spec, seat, voted, busy, submit, onFirstFrame, footer }: {
  spec: ReviewStageSpec;
  seat: Assignment;
  voted: OwnVote | null;
  busy: boolean;
  submit: (vote: VoteParts) => Promise<void>;
  onFirstFrame: () => void;
  footer: ReactNode;
}) {
  const [reasons, setReasons] = useState<string[]>([]);
  const [other, setOther] = useState("");
  const cast = (label: string) => {
    const all = other.trim() ? [...reasons, other.trim()] : reasons;
    void submit({ label, reasons: all });
  };
  const toggleReason = (r: string) => setReasons((rs) => (rs.includes(r) ? rs.filter((x) => x !== r) : [...rs, r]));
  const open = !voted;
  useShortcutList([
    ...spec.labels.map((l, i) => ({ id: `review.label${i + 1}`, handler: () => cast(l.value), detail: l.text, enabled: open })),
    ...spec.reasons.slice(0, 6).map((r, i) => ({ id: `review.reason${i + 1}`, handler: () => toggleReason(r), detail: r, enabled: open })),
  ]);
  const Target = spec.Target;
  return (
    <div className="review">
      <div className="review-main">
        <Target target={seat.target} onFirstFrame={onFirstFrame} />
      </div>
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
                Other reason
                <input type="text" value={other} maxLength={200} onChange={(e) => setOther(e.target.value)} />
              </label>
            </fieldset>
          </>
        )}
        {footer}
      </aside>
    </div>
  );
}
