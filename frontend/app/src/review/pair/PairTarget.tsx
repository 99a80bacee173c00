// Cross-video pair review (DESIGN 2.9): a query written for a trajectory of one video, and a
// candidate trajectory of another video of the same split. The reviewer sees the query with its
// predicates, where it comes from (the source video and the crops of the trajectory it was
// written for), the candidate in the player, and the writer's proposal as a hint; they vote
// match, mismatch or uncertain with one key.

import { useEffect, useState } from "react";
import { api } from "../../api/endpoints";
import type { Crop, PairTarget, Query, Video } from "../../api/types";
import { Link } from "../../components/Link";
import { MediaImage } from "../../components/MediaImage";
import { ErrorState } from "../../components/states";
import { Hint, Predicates } from "../relation/RelationReview";
import { type TargetProps, TrajectoryTarget, trajectoryOnly, videoOnce } from "../targets";

function SourceContext({ pair }: { pair: PairTarget }) {
  const [state, setState] = useState<{ query?: Query; video?: Video; crops?: Crop[]; error?: unknown }>({});
  useEffect(() => {
    const ctrl = new AbortController();
    Promise.all([api.query(pair.query, ctrl.signal), videoOnce(pair.query_video)]).then(
      async ([query, video]) => {
        const crops = await api.crops(query.target, 6, ctrl.signal);
        if (!ctrl.signal.aborted) setState({ query, video, crops });
      },
      (error: unknown) => !ctrl.signal.aborted && setState({ error }),
    ).catch((error: unknown) => !ctrl.signal.aborted && setState({ error }));
    return () => ctrl.abort();
  }, [pair.query, pair.query_video]);
  if (state.error) return <p className="muted small">The query's source could not be loaded.</p>;
  if (!state.query || !state.video) return <div className="crops crops-loading" aria-hidden="true" />;
  const { query, video } = state;
  return (
    <div className="source-context">
      <p className="small">
        Written for <Link to={`/videos/${video.id}/${query.target}`}>trajectory #{query.target}</Link> of{" "}
        <strong>{video.name}</strong> ({video.split || "no split"}):
      </p>
      <ol className="crops light" aria-label={`Crops of the query's own trajectory #${query.target}`}>
        {(state.crops ?? []).map((c) => (
          <li key={c.frame_index}><MediaImage src={`${c.crop_url}?max_size=120`} alt={`#${query.target} at frame ${c.frame_index}`} /></li>
        ))}
      </ol>
    </div>
  );
}

export function CrossPairTarget({ target, onFirstFrame }: TargetProps) {
  const pair = target.pair;
  if (!pair) return <ErrorState error={new Error("This item names no cross-video pair.")} />;
  return (
    <div className="target">
      <section className="query-panel" aria-label="Query">
        <p className="query-text">“{pair.text}”</p>
        <Predicates predicates={pair.predicates} />
        <SourceContext pair={pair} />
        <Hint proposal={pair.proposal} who="Writer's proposal" />
      </section>
      <h2 className="small-heading">Candidate: trajectory #{pair.trajectory} of another video</h2>
      <TrajectoryTarget target={trajectoryOnly(pair.trajectory_video, pair.trajectory)}
        onFirstFrame={onFirstFrame} />
    </div>
  );
}
