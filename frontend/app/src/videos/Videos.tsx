// Browsing the imported videos and their trajectories (any role): the list of videos, and per
// video its trajectories with their quality signals; choosing one plays it in the player.

import { api } from "../api/endpoints";
import type { TrajectorySummary } from "../api/types";
import { Link } from "../components/Link";
import { EmptyState, ErrorState, Loading } from "../components/states";
import { useAsync } from "../components/useAsync";
import { TrajectoryTarget, trajectoryOnly } from "../review/targets";
import { count } from "../components/plural";

export function VideosScreen() {
  const videos = useAsync(() => api.videos(500), []);
  if (videos.error) return <ErrorState error={videos.error} onRetry={videos.reload} />;
  if (!videos.data) return <Loading what="videos" />;
  if (videos.data.results.length === 0) {
    return <EmptyState title="No videos yet"><p>Import some with <code>manage.py import_videos</code> or upload them through <code>POST /api/videos/</code>.</p></EmptyState>;
  }
  return (
    <table className="data">
      <caption>{count(videos.data.count, "video")}</caption>
      <thead><tr><th scope="col">video</th><th scope="col">split</th><th scope="col">frames</th><th scope="col">size</th><th scope="col">fps</th></tr></thead>
      <tbody>
        {videos.data.results.map((v) => (
          <tr key={v.id}>
            <td><Link to={`/videos/${v.id}`}>{v.name}</Link></td>
            <td>{v.split || "–"}</td>
            <td>{v.frame_count}</td>
            <td>{v.width}×{v.height}</td>
            <td>{v.fps}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function VideoScreen({ videoId, trajectoryId }: { videoId: number; trajectoryId?: number }) {
  const list = useAsync(() => api.trajectories(videoId), [videoId]);
  if (list.error) return <ErrorState error={list.error} onRetry={list.reload} />;
  if (!list.data) return <Loading what="trajectories" />;
  const rows: TrajectorySummary[] = list.data.results;
  return (
    <div className="video-browser">
      {trajectoryId !== undefined ? (
        <TrajectoryTarget key={trajectoryId} target={trajectoryOnly(videoId, trajectoryId)} />
      ) : (
        <p className="muted">Choose a trajectory to play it.</p>
      )}
      {rows.length === 0 ? (
        <EmptyState title="No trajectories yet"><p>They appear when a proposal run of this video finishes.</p></EmptyState>
      ) : (
        <table className="data">
          <caption>{count(list.data.count, "trajectory")}</caption>
          <thead>
            <tr><th scope="col">trajectory</th><th scope="col">run</th><th scope="col">category</th><th scope="col">frames</th><th scope="col">observations</th><th scope="col">coverage</th><th scope="col">longest run</th><th scope="col">abrupt changes</th></tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.id} className={t.id === trajectoryId ? "selected" : undefined}>
                <td><Link to={`/videos/${videoId}/${t.id}`} current={t.id === trajectoryId}>#{t.id}</Link></td>
                <td>{t.run}</td>
                <td>{t.category}</td>
                <td>{t.first_frame}–{t.last_frame}</td>
                <td>{t.n_obs}</td>
                <td>{Math.round(t.temporal_coverage * 100)}%</td>
                <td>{t.longest_run}</td>
                <td>{t.abrupt_changes}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
