// One review item opened from Find: where it stands (stage, state, decision, how many votes of
// its panel, never whose or which), what it shows its reviewers (the stage's own target view,
// read only), and links to its seats and its video.

import { api } from "../../api/endpoints";
import { Link } from "../../components/Link";
import { count } from "../../components/plural";
import { ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { stageByName } from "../../review/stages";

export function FoundItemScreen({ itemId }: { itemId: number }) {
  const data = useAsync((signal) => api.itemOverview(itemId, signal), [itemId]);
  useShortcutList([{ id: "manager.refresh", handler: data.reload }]);
  if (data.error) return <ErrorState error={data.error} onRetry={data.reload} />;
  if (!data.data) return <Loading what={`item ${itemId}`} />;
  const item = data.data;
  const spec = stageByName(item.stage);
  const Target = spec?.Target;
  const shown = item.trajectory ?? item.target.trajectory_a ?? null;
  return (
    <div className="found-item">
      <dl className="provenance" aria-label="Where the item stands">
        <div><dt>stage</dt><dd>{spec?.title ?? item.stage}</dd></div>
        <div><dt>state</dt><dd><span className={`badge status-${item.state}`}>{item.state}</span></dd></div>
        <div><dt>decision</dt><dd>{item.decision || "–"}</dd></div>
        <div><dt>votes</dt><dd>{item.n_votes} of {count(item.panel_size, "seat")}</dd></div>
        <div><dt>video</dt><dd>{item.video_name} ({item.split || "no split"})</dd></div>
        {item.text && <div><dt>query</dt><dd>“{item.text}”</dd></div>}
      </dl>
      <p className="download-links">
        <Link to={`/manage/seats?item=${item.id}`}>Seats and leases of item {item.id}</Link>
        <Link to={shown ? `/videos/${item.video}/${shown}` : `/videos/${item.video}`}>Its video</Link>
        <Link to={`/manage/find?kind=items&video=${item.video}`}>Other items of the video</Link>
      </p>
      {Target ? <Target target={item.target} />
        : <p className="muted">The UI does not show {item.stage} items yet; the API has them at /api/review/items/{item.id}/overview/.</p>}
    </div>
  );
}
