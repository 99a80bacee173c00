// The landing screen: the work waiting for you, per task type, where to start, and every other
// screen of your menus.

import { api } from "../api/endpoints";
import type { Me, QueueCount } from "../api/types";
import { count } from "../components/plural";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { useAsync } from "../components/useAsync";
import { REVIEW_STAGES } from "../review/stages";
import { Link } from "../components/Link";
import { homeSections } from "../routes";

function queueCard(q: QueueCount) {
  const spec = REVIEW_STAGES.find((s) => s.stage === q.stage);
  const title = q.kind === "adjudication" ? `Adjudication · ${spec?.title ?? q.stage}` : spec?.title ?? q.stage;
  const to = q.kind === "adjudication" ? "/adjudication" : spec ? `/review/${spec.path}` : null;
  const shown = `${q.available}${q.more ? "+" : ""}`;
  return (
    <li key={`${q.kind}:${q.stage}`} className="queue-card">
      <h2>{title}</h2>
      <p className="count" aria-label={`${q.more ? `${q.available}+ items` : count(q.available, "item")} available`}>{shown}</p>
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
  const sections = homeSections(me); // every screen of the menus but the queues' own
  const queues = useAsync(() => (works ? api.queues() : Promise.resolve({ queues: [] })), [works], 15000);
  return (
    <>
      {works && (queues.error ? <ErrorState error={queues.error} onRetry={queues.reload} />
        : !queues.data ? <Loading what="your queues" />
        : queues.data.queues.length === 0 ? <EmptyState title="No queues for you" />
        : <ul className="queues" aria-label="Your queues">{queues.data.queues.filter(shown).map(queueCard)}</ul>)}
      {sections.length > 0 && (
        <section aria-labelledby="places-title" className="places">
          <h2 id="places-title">{me.roles.includes("manager") ? "Manage" : "More"}</h2>
          <div className="place-groups">
            {sections.map(({ section, routes }) => (
              <div key={section}>
                <h3>{section}</h3>
                <ul className="links">
                  {routes.map((r) => <li key={r.path}><Link to={r.path}>{r.title({})}</Link></li>)}
                </ul>
              </div>
            ))}
          </div>
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
