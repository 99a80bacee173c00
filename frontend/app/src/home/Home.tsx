// The landing screen: the work waiting for you, per task type, and where to start.

import { api } from "../api/endpoints";
import type { Me, QueueCount } from "../api/types";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { useAsync } from "../components/useAsync";
import { REVIEW_STAGES } from "../review/stages";
import { Link } from "../components/Link";

function queueCard(q: QueueCount) {
  const spec = REVIEW_STAGES.find((s) => s.stage === q.stage);
  const title = q.kind === "adjudication" ? `Adjudication · ${spec?.title ?? q.stage}` : spec?.title ?? q.stage;
  const to = q.kind === "adjudication" ? "/adjudication" : spec ? `/review/${spec.path}` : null;
  const count = `${q.available}${q.more ? "+" : ""}`;
  return (
    <li key={`${q.kind}:${q.stage}`} className="queue-card">
      <h2>{title}</h2>
      <p className="count" aria-label={`${count} items available`}>{count}</p>
      <p className="muted">
        {q.kind === "adjudication" ? "items without a majority" : "items you can take"}
        {q.done > 0 && ` · ${q.done} done by you`}
        {q.in_progress !== null && ` · item ${q.in_progress} in progress`}
      </p>
      {!spec ? (
        <p className="muted">This stage is reviewed through the API for now.</p>
      ) : to && (q.available > 0 || q.in_progress !== null) ? (
        <Link to={to} className="button primary">{q.in_progress !== null ? "Continue" : "Start"}</Link>
      ) : (
        <p className="muted">Nothing to do here now.</p>
      )}
    </li>
  );
}

/** Stages the UI reviews always have a card; others (reviewed through the API until their
 *  screens exist) only when they hold work for this person. */
function shown(q: QueueCount): boolean {
  return REVIEW_STAGES.some((s) => s.stage === q.stage) || q.available > 0 || q.in_progress !== null;
}

export function Home({ me }: { me: Me }) {
  const works = me.roles.includes("annotator") || me.roles.includes("adjudicator");
  const queues = useAsync(() => (works ? api.queues() : Promise.resolve({ queues: [] })), [works], 15000);
  return (
    <>
      {works && (queues.error ? <ErrorState error={queues.error} onRetry={queues.reload} />
        : !queues.data ? <Loading what="your queues" />
        : queues.data.queues.length === 0 ? <EmptyState title="No queues for you" />
        : <ul className="queues" aria-label="Your queues">{queues.data.queues.filter(shown).map(queueCard)}</ul>)}
      {me.roles.includes("manager") && (
        <section aria-labelledby="manage-title">
          <h2 id="manage-title">Manage</h2>
          <ul className="links">
            <li><Link to="/manage/progress">Pipeline progress</Link></li>
            <li><Link to="/manage/agreement">Agreement</Link></li>
            <li><Link to="/manage/jobs">Jobs</Link></li>
            <li><Link to="/manage/runs">Proposal runs and pool freezing</Link></li>
            <li><Link to="/manage/pools">Frozen pools</Link></li>
            <li><Link to="/manage/model-runs">Describer, query-writer and mining runs</Link></li>
            <li><Link to="/manage/snapshots">Completeness and snapshots</Link></li>
            <li><Link to="/manage/training">Training runs</Link></li>
            <li><Link to="/manage/audits">Audits</Link></li>
            <li><Link to="/manage/releases">Releases</Link></li>
          </ul>
        </section>
      )}
      {me.roles.includes("auditor") && (
        <section aria-labelledby="audit-title">
          <h2 id="audit-title">Audit</h2>
          <p>Re-check accepted records of a split, blind to votes and model suggestions: <Link to="/audit">audits to do</Link>.</p>
        </section>
      )}
      {!works && !me.roles.includes("manager") && !me.roles.includes("auditor") && (
        <EmptyState title="Nothing here for your role yet">
          <p>Your roles: {me.roles.join(", ") || "none"}. Ask a manager to add you to a role.</p>
        </EmptyState>
      )}
    </>
  );
}
