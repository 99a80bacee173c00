// Frozen candidate pools: immutable and versioned; a new version names the defect it fixes.

import { api } from "../../api/endpoints";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";

export function PoolsScreen() {
  const pools = useAsync(() => api.pools(500), [], 10000);
  useShortcutList([{ id: "manager.refresh", handler: pools.reload }]);
  if (pools.error) return <ErrorState error={pools.error} onRetry={pools.reload} />;
  if (!pools.data) return <Loading what="pools" />;
  if (pools.data.results.length === 0) {
    return <EmptyState title="No frozen pools yet"><p>Freeze a video's pool from the proposal runs screen once its review is done.</p></EmptyState>;
  }
  return (
    <table className="data">
      <caption>{pools.data.count} frozen pools</caption>
      <thead>
        <tr><th scope="col">pool</th><th scope="col">video</th><th scope="col">version</th><th scope="col">run</th><th scope="col">members</th><th scope="col">frozen</th><th scope="col">content</th><th scope="col">reason</th></tr>
      </thead>
      <tbody>
        {pools.data.results.map((p) => (
          <tr key={p.id}>
            <td>{p.id}</td>
            <td>{p.video}</td>
            <td>v{p.version}{p.supersedes ? ` (replaces pool ${p.supersedes})` : ""}</td>
            <td>{p.run}</td>
            <td>{p.n_members}</td>
            <td>{p.frozen_at ? new Date(p.frozen_at).toLocaleString() : "–"}</td>
            <td><code title={p.content_sha256}>{p.content_sha256.slice(0, 12)}</code></td>
            <td>{p.reason || "–"}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
