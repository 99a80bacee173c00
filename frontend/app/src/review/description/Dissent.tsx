// Recorded dissent (E.2): a reviewer's minor correction of a description that lost to the
// approvals of another version. Read-only; shown to adjudicators beside the item they decide and
// to auditors once their blind verdict is in. No names: what was corrected, and why.

import type { Dissent } from "../../api/types";

export function DissentList({ dissent, caption }: { dissent: readonly Dissent[]; caption: string }) {
  if (dissent.length === 0) return null;
  return (
    <section className="dissent" aria-label="Recorded dissent">
      <h3>{caption}</h3>
      <ul>
        {dissent.map((d) => (
          <li key={d.id}>
            <p>
              Trajectory #{d.trajectory}: a correction (version {d.correction}) lost to the approvals of version {d.approved_version}
              {d.reasons.length > 0 && <span className="muted"> · reasons: {d.reasons.join("; ")}</span>}
            </p>
            <table className="data small">
              <thead><tr><th scope="col">field</th><th scope="col">approved</th><th scope="col">the correction</th></tr></thead>
              <tbody>
                {d.differences.map((x) => (
                  <tr key={x.field}>
                    <td>{x.field}</td>
                    <td>{x.approved ?? <span className="muted">(not in it)</span>}</td>
                    <td>{x.corrected ?? <span className="muted">(removed)</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </li>
        ))}
      </ul>
    </section>
  );
}
