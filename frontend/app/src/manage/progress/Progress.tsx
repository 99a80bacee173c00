// Pipeline progress per stage and split: videos, proposal runs, the two review stages and the
// frozen pools. Polls while open.

import { api } from "../../api/endpoints";
import type { Progress } from "../../api/types";
import { StackedBar } from "../../components/charts";
import { ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { REVIEW_STAGES } from "../../review/stages";
import { count } from "../../components/plural";

const sum = (o: Record<string, number> | undefined) => Object.values(o ?? {}).reduce((a, b) => a + b, 0);

function RunsCell({ runs }: { runs: Record<string, number> | undefined }) {
  const r = runs ?? {};
  const total = sum(r);
  return (
    <>
      <StackedBar label="Proposal runs" parts={[
        { name: "succeeded", value: r.succeeded ?? 0, className: "part-done" },
        { name: "running", value: r.running ?? 0, className: "part-active" },
        { name: "queued", value: r.queued ?? 0, className: "part-open" },
        { name: "failed", value: r.failed ?? 0, className: "part-bad" },
      ]} />
      <span className="cell-text">{total ? `${r.succeeded ?? 0} of ${total} finished${r.failed ? `, ${r.failed} failed` : ""}` : "none"}</span>
    </>
  );
}

function ReviewCell({ states, title }: { states: Record<string, number> | undefined; title: string }) {
  const s = states ?? {};
  const total = sum(s);
  const done = (s.decided ?? 0) + (s.unresolved ?? 0);
  return (
    <>
      <StackedBar label={title} parts={[
        { name: "decided", value: s.decided ?? 0, className: "part-done" },
        { name: "unresolved", value: s.unresolved ?? 0, className: "part-muted" },
        { name: "in adjudication", value: s.adjudicate ?? 0, className: "part-active" },
        { name: "open", value: s.open ?? 0, className: "part-open" },
      ]} />
      <span className="cell-text">
        {total ? `${done} of ${total} done${s.adjudicate ? `, ${s.adjudicate} in adjudication` : ""}` : "no items"}
      </span>
    </>
  );
}

/** Review stages in pipeline order: those the UI knows first, then any other stage the API
 *  reports (reviewed through the API until its screen exists). */
function stageRows(d: Progress): { stage: string; title: string }[] {
  const known = REVIEW_STAGES.map((s) => ({ stage: s.stage, title: s.title }));
  const other = Object.keys(d.review).filter((s) => !known.some((k) => k.stage === s)).map((s) => ({ stage: s, title: `${s} review` }));
  return [...known, ...other];
}

export function ProgressScreen() {
  const p = useAsync(() => api.progress(), [], 5000);
  useShortcutList([{ id: "manager.refresh", handler: p.reload }]);
  if (p.error) return <ErrorState error={p.error} onRetry={p.reload} />;
  if (!p.data) return <Loading what="pipeline progress" />;
  const d: Progress = p.data;
  return (
    <table className="data progress-table">
      <caption>Pipeline progress by split (refreshes every 5 s; Shift+R now)</caption>
      <thead>
        <tr>
          <th scope="col">stage</th>
          {d.splits.map((s) => <th key={s} scope="col">{s}</th>)}
        </tr>
      </thead>
      <tbody>
        <tr>
          <th scope="row">Videos</th>
          {d.splits.map((s) => <td key={s}>{d.videos[s] ?? 0}</td>)}
        </tr>
        <tr>
          <th scope="row">Proposal runs</th>
          {d.splits.map((s) => <td key={s}><RunsCell runs={d.proposal_runs[s]} /></td>)}
        </tr>
        {stageRows(d).map(({ stage, title }) => (
          <tr key={stage}>
            <th scope="row">{title}</th>
            {d.splits.map((s) => <td key={s}><ReviewCell title={`${title}, ${s}`} states={d.review[stage]?.[s]} /></td>)}
          </tr>
        ))}
        <tr>
          <th scope="row">Frozen pools</th>
          {d.splits.map((s) => {
            const pool = d.pools[s] ?? { videos: 0, videos_with_pool: 0, pools: 0 };
            return (
              <td key={s}>
                <StackedBar label={`Frozen pools, ${s}`} parts={[
                  { name: "videos with a pool", value: pool.videos_with_pool, className: "part-done" },
                  { name: "videos without", value: Math.max(0, pool.videos - pool.videos_with_pool), className: "part-open" },
                ]} />
                <span className="cell-text">{pool.videos_with_pool} of {count(pool.videos, "video")}{pool.pools > pool.videos_with_pool ? ` (${pool.pools} versions)` : ""}</span>
              </td>
            );
          })}
        </tr>
      </tbody>
    </table>
  );
}
