// Your own vote on an item, as every review screen shows it once cast.

import type { ReactNode } from "react";
import type { OwnVote } from "../api/types";

/** Your own vote on an item (the only vote anybody sees before adjudication). */
export function OwnVoteNote({ vote, children }: { vote: OwnVote; children?: ReactNode }) {
  return (
    <div className="my-vote" role="status">
      <p>
        You voted <strong className={`label label-${vote.label}`}>{vote.label.replaceAll("_", " ")}</strong>
        {vote.reasons.length > 0 && <> because {vote.reasons.join("; ")}</>}.
      </p>
      {children}
      <p className="muted">Votes are final; an adjudicator resolves disagreements.</p>
    </div>
  );
}
