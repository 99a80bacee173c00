// Experiments (DESIGN 4.5): declare a grid of training runs (a preset's variants × seeds) on a
// train snapshot, evaluated on a dev/test one, and list the experiments with how far their cells
// are. One experiment's cells and result table are on its own screen (Experiment.tsx).

import { api } from "../../api/endpoints";
import { Link } from "../../components/Link";
import { EmptyState, ErrorState, Loading } from "../../components/states";
import { StatusBadge } from "../../components/status";
import { useAsync } from "../../components/useAsync";
import { useShortcutList } from "../../keyboard/useShortcut";
import { navigate } from "../../router";
import { Stamps } from "../training/Training";
import { CreateForm } from "./CreateForm";

export const LIST_POLL_MS = 5000;

const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "–");

function NewExperiment() {
  const setup = useAsync(async () => {
    const [presets, snapshots] = await Promise.all([api.experimentPresets(), api.snapshots(200)]);
    return { presets: presets.presets, snapshots: snapshots.results.filter((s) => s.sealed_at) };
  }, []);
  if (setup.error && !setup.data) return <ErrorState error={setup.error} onRetry={setup.reload} title="The presets or snapshots could not be read" />;
  if (!setup.data) return <Loading what="presets and snapshots" />;
  return <CreateForm presets={setup.data.presets} snapshots={setup.data.snapshots}
    onCreated={(e) => navigate(`/manage/experiments/${e.id}`)} />;
}

export function ExperimentsScreen() {
  const list = useAsync(() => api.experiments(100), [], LIST_POLL_MS);
  useShortcutList([{ id: "manager.refresh", handler: list.reload }]);
  const experiments = list.data?.results;
  return (
    <>
      <section aria-labelledby="new-experiment">
        <h2 id="new-experiment">Run an experiment</h2>
        <NewExperiment />
      </section>
      {list.error && !list.data ? <ErrorState error={list.error} onRetry={list.reload} />
        : !experiments ? <Loading what="experiments" />
        : experiments.length === 0 ? (
          <EmptyState title="No experiments yet">
            <p>Run one above, or with <code>manage.py experiment --snapshot ID --eval-snapshot ID --preset vtrajembed-table3</code>.</p>
          </EmptyState>
        ) : (
          <table className="data">
            <caption>Experiments, newest first (refreshed every {LIST_POLL_MS / 1000} s)</caption>
            <thead>
              <tr><th scope="col">experiment</th><th scope="col">preset</th><th scope="col">status</th><th scope="col">cells done</th>
                <th scope="col">snapshots</th><th scope="col">created</th></tr>
            </thead>
            <tbody>
              {experiments.map((e) => (
                <tr key={e.id}>
                  <td><Link to={`/manage/experiments/${e.id}`}>Experiment {e.id}</Link>{e.name ? <span className="muted"> · {e.name}</span> : null}</td>
                  <td>{e.preset || <span className="muted">{e.model_kind} (own grid)</span>}</td>
                  <td><StatusBadge status={e.status} /><Stamps stamps={e.stamps} /></td>
                  <td>{e.cells_done} / {e.cells_total}</td>
                  <td>#{e.snapshot} → #{e.eval_snapshot}</td>
                  <td>{when(e.created_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </>
  );
}
