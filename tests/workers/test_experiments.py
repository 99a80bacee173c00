"""Experiments (DESIGN 4.5) on the tiny rendered benchmark: the Table 3 preset over three seeds end to
end, refusals that queue nothing, cancelling and resuming, and the REST API."""
from __future__ import annotations

import csv
import io
import json
import shutil

import pytest
from django.core.management import CommandError, call_command

from models.training.snapshot import RelationSnapshotData
from tests.workers.factories import TINY_SCOUT, finished_run, register_snapshot, tiny_config
from tests.workers.test_training_api import queued_tasks, staff  # noqa: F401 (fixtures)
from workers.execute import evaluation_run_execute, training_run_execute
from workers.experiments import (
    experiment_cancel,
    experiment_create,
    experiment_refresh,
    experiment_resume,
)
from workers.models import EvaluationRun, Experiment, TrainingRun

pytestmark = pytest.mark.django_db

SMALL = tiny_config(steps=2, checkpoint_every=2)       # the CI size: two steps per cell


def _grid(**overrides) -> dict:
    return {"preset": "vtrajembed-table3", "base": SMALL, "n_resamples": 500, **overrides}


def _run_all(experiment: Experiment) -> Experiment:
    for run in experiment.runs.order_by("id"):
        run = training_run_execute(run=run)
        assert run.status == "succeeded", (run.variant, run.error)
    return Experiment.objects.get(pk=experiment.pk)


def test_the_table3_preset_over_three_seeds(snapshots, var_dir):
    experiment = experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], grid=_grid(),
                                   queue=False)
    assert experiment.cells_total == 18 and experiment.runs.count() == 18 and experiment.status == "running"
    assert {r.job.queue for r in experiment.runs.select_related("job")} == {"gpu"}
    assert experiment.snapshot_sha256 == snapshots["train"].content_sha256
    assert experiment.eval_snapshot_sha256 == snapshots["dev"].content_sha256
    assert "trajlab_commit" in experiment.code_version and "torch" in experiment.code_version
    cells = {(r.variant, r.config["seed"]): r.config for r in experiment.runs.all()}
    assert cells[("without_fast", 1)]["model"]["use_fast"] is False
    assert cells[("obs16", 0)]["model"]["features"]["n_fast_max"] == 4         # half the base's 8
    assert cells[("without_lbi", 2)]["model"]["lambda_bi"] == 0.0 and "lambda_bi" not in cells[("full", 2)]["model"]
    experiment = _run_all(experiment)
    assert experiment.status == "succeeded" and experiment.cells_done == 18 and experiment.finished_at
    result = experiment.result
    assert result["variants"] == ["full", "without_slow", "without_fast", "obs16", "without_lbi", "without_lgroup"]
    assert sorted(result["evaluations"]) == sorted(
        EvaluationRun.objects.filter(training_run__experiment=experiment).values_list("id", flat=True))
    assert result["pipelines"] == {v: {} for v in result["variants"]} and result["requests"] == {}
    blocks = {(b["task"], b["metric"], b["stratum"]): b["rows"] for b in result["tables"]}
    for task in ("t2traj", "traj2t", "ocvr"):
        for metric in ("R@1", "R@3", "mAP"):
            rows = {r["variant"]: r for r in blocks[(task, metric, "all")]}
            assert rows["full"]["reference"] and rows["full"]["delta"] is None and rows["full"]["n_seeds"] == 3
            for variant, row in rows.items():
                assert row["n_seeds"] == 3 and len(row["values"]) == 3 and row["std"] >= 0
                if variant != "full":
                    assert row["low"] <= row["high"] and 0 <= row["p_value"] <= 1 and row["n_queries"] > 0
                    assert row["paired_seeds"] == 3
    # the figures of each seed are its evaluation run's figures
    run = experiment.runs.get(variant="without_slow", config__seed=1)
    t2 = {r["variant"]: r for r in blocks[("t2traj", "R@1", "all")]}
    assert t2["without_slow"]["values"][1] == pytest.approx(run.metrics["t2traj"]["R@1"])
    evaluation = EvaluationRun.objects.get(training_run=run)
    assert set(evaluation.per_query) == {"t2traj", "traj2t", "ocvr"}
    assert len(evaluation.per_query["t2traj"]["id"]) == run.metrics["t2traj"]["n_queries"]
    assert any(b["stratum"] != "all" for b in result["tables"])
    # written as JSON and CSV
    folder = var_dir / "experiments" / str(experiment.pk)
    assert json.loads((folder / "table.json").read_text()) == result
    lines = list(csv.reader(io.StringIO((folder / "table.csv").read_text())))
    assert lines[0][:4] == ["task", "metric", "stratum", "variant"] and len(lines) == 1 + 6 * len(result["tables"])


@pytest.mark.parametrize(("grid", "which", "code", "words"), [
    (_grid(variants=["without_slwo"]), None, "invalid_experiment", "unknown variant(s) 'without_slwo'"),
    (_grid(preset="table9"), None, "invalid_experiment", "unknown preset"),
    (_grid(base={**SMALL, "stpes": 3}), None, "invalid_config", "unknown key(s) stpes"),
    (_grid(variants={"odd": {"model": {"colour": 1}}}), None, "invalid_config", "variant 'odd'"),
    (_grid(), ("dev", "train"), "experiment_wrong_splits", "of the dev split"),
    (_grid(), ("train", "train"), "experiment_wrong_splits", "both the training and the evaluation"),
    ("not an object", None, "invalid_experiment", "grid must be an object"),
])
def test_bad_experiments_are_refused_and_queue_nothing(snapshots, var_dir, queued_tasks, grid, which, code,  # noqa: F811
                                                       words):
    from common.errors import ApplicationError

    train, evaluated = (snapshots[which[0]], snapshots[which[1]]) if which else (snapshots["train"], snapshots["dev"])
    with pytest.raises(ApplicationError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
        experiment_create(snapshot=train, eval_snapshot=evaluated, grid=grid)
    assert caught.value.status_code == 400 and caught.value.code == code
    assert not Experiment.objects.exists() and not TrainingRun.objects.exists() and queued_tasks == []


def test_a_sealed_but_changed_snapshot_folder_is_refused(snapshots, tiny_benchmark_dir, tmp_path, queued_tasks):  # noqa: F811
    from common.errors import ApplicationError

    copy = tmp_path / "train"
    shutil.copytree(tiny_benchmark_dir / "snapshots" / "train", copy)
    changed = register_snapshot(copy)
    # a relation label flipped in the folder, its own recorded hash brought up to date
    body = json.loads((copy / "snapshot.json").read_text())
    relation = next(r for r in body["relations"] if r["label"] in (0, 1))
    relation["label"] = 1 - relation["label"]
    (copy / "snapshot.json").write_text(json.dumps(body))
    body["content_sha256"] = RelationSnapshotData.load(copy, verify=False).content_sha256()
    (copy / "snapshot.json").write_text(json.dumps(body))
    with pytest.raises(ApplicationError) as caught:
        experiment_create(snapshot=changed, eval_snapshot=snapshots["dev"], grid=_grid())
    assert caught.value.status_code == 400 and caught.value.code == "snapshot_tampered"
    assert "nothing was queued" in caught.value.message
    assert not Experiment.objects.exists() and not TrainingRun.objects.exists() and queued_tasks == []


def test_an_experiment_is_cancelled_then_resumed_where_it_stopped(snapshots, var_dir):
    experiment = experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"],
                                   grid=_grid(variants=["without_lgroup"], seeds=[0]), queue=False)
    first, second = experiment.runs.order_by("id")
    assert (first.variant, second.variant) == ("full", "without_lgroup")
    assert training_run_execute(run=first).status == "succeeded"
    experiment = experiment_cancel(experiment=experiment)
    second.refresh_from_db()
    assert second.status == "cancelled" and experiment.status == "cancelled" and experiment.cells_done == 1
    assert experiment_refresh(experiment_id=experiment.pk).status == "cancelled"      # it stays cancelled
    rows = {r["variant"]: r for r in experiment.result["tables"][0]["rows"]}
    assert rows["full"]["n_seeds"] == 1 and rows["without_lgroup"]["n_seeds"] == 0
    again = experiment_resume(experiment=experiment, queue=False)
    assert [r.pk for r in again] == [second.pk] and again[0].status == "queued"
    assert experiment_refresh(experiment_id=experiment.pk).status == "running"
    assert training_run_execute(run=again[0]).status == "succeeded"
    experiment.refresh_from_db()
    assert experiment.status == "succeeded" and experiment.cells_done == 2
    first.refresh_from_db()
    assert first.retries == 0                                      # the finished cell was not redone
    rows = {r["variant"]: r for r in experiment.result["tables"][0]["rows"]}
    assert rows["without_lgroup"]["n_seeds"] == 1 and rows["without_lgroup"]["delta"] is not None
    from common.errors import ConflictError

    with pytest.raises(ConflictError, match="no failed or cancelled cell"):
        experiment_resume(experiment=experiment)


ACTPAIR = {"steps": 2, "batch_size": 4, "checkpoint_every": 2, "lr": 1e-3, "device": "cpu",
           "batching": {"noisy_gt": False},
           "model": {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
                     "features": {"n_fast_max": 6}}}


def test_pipeline_variants_share_their_training_and_count_their_requests(snapshots, var_dir, capsys, queued_tasks,  # noqa: F811
                                                                          django_capture_on_commit_callbacks):
    """ActPair's reranking preset (Table 5): one training per seed (the dual encoder, then its
    pairwise head), three pipelines evaluated on it; the pointwise reranker asks one absolute score
    per shortlisted candidate, the pairwise one what Algorithm 1 needs (at most M(M-1)/2
    comparisons of a shortlist of M), and the table reports both as requests per query."""
    with django_capture_on_commit_callbacks(execute=True):
        call_command("experiment", "--snapshot", str(snapshots["train"].pk), "--eval-snapshot",
                     str(snapshots["dev"].pk), "--preset", "actpair-rerank", "--seeds", "0", "--config",
                     json.dumps(ACTPAIR), "--resamples", "200")
    out = capsys.readouterr().out
    assert "succeeded: 3/3 cells" in out
    assert queued_tasks == []                                      # an inline experiment sends nothing
    experiment = Experiment.objects.get()
    assert experiment.runs.count() == 1                            # the three variants share their training
    run = experiment.runs.get()
    assert run.result["after_training"]["pairwise_head"]["pairs"] > 0
    cells = {c.variant: c for c in experiment.cells.select_related("evaluation")}
    assert {c.training_run_id for c in cells.values()} == {run.pk}
    # the reference too runs through the pipeline executor (one code path for every variant)
    assert cells["dual_view"].evaluation.pipeline_sha256 and cells["dual_view"].evaluation.pipeline["reranker"] == "none"
    assert cells["pairwise"].evaluation.pipeline["reranker"] == "pairwise"
    assert cells["pairwise"].evaluation.pipeline["comparator"]["kind"] == "pairwise-head"
    assert cells["dual_view"].evaluation.pipeline["fusion"] == "dual_view"
    requests = experiment.result["requests"]
    pointwise = cells["pointwise"].evaluation.metrics["pipeline"]
    m = pointwise["shortlist"]
    assert m == min(10, len(RelationSnapshotData.load(snapshots["dev"].path).tracks))
    assert pointwise["model_requests"]["per_query"] == [m] * pointwise["queries"]        # exactly M each
    assert requests["pointwise"]["model_requests"] == {"per_query_mean": m, "per_query_max": m,
                                                       "total": m * pointwise["queries"]}
    assert requests["pointwise"]["comparator_requests"]["total"] == requests["pointwise"]["scorer_requests"]["total"] == 0
    pairwise = requests["pairwise"]["comparator_requests"]
    assert 0 < pairwise["per_query_mean"] and pairwise["per_query_max"] <= m * (m - 1) // 2
    assert requests["pairwise"]["model_requests"] == pairwise
    assert requests["dual_view"]["model_requests"]["total"] == 0
    assert f"pointwise {m:.2f}" in out and f"pairwise {pairwise['per_query_mean']:.2f}" in out
    rows = {r["variant"]: r for r in experiment.result["tables"][0]["rows"]}
    assert rows["pointwise"]["reference"] and rows["pairwise"]["low"] is not None
    assert rows["dual_view"]["n_seeds"] == 1


def test_the_command_runs_a_grid_and_refuses_bad_input(snapshots, var_dir, tmp_path, capsys):
    out = tmp_path / "tables"
    call_command("experiment", "--snapshot", str(snapshots["train"].pk), "--eval-snapshot", str(snapshots["dev"].pk),
                 "--preset", "vtrajembed-table3", "--variants", "without_lbi", "--seeds", "0",
                 "--config", json.dumps(SMALL), "--resamples", "200", "--out", str(out))
    text = capsys.readouterr().out
    assert "succeeded: 2/2 cells" in text and "without_lbi" in text and "t2traj" in text
    assert (out / "table.json").is_file() and (out / "table.csv").is_file()
    with pytest.raises(CommandError, match="unknown variant"):
        call_command("experiment", "--snapshot", str(snapshots["train"].pk), "--eval-snapshot",
                     str(snapshots["dev"].pk), "--preset", "vtrajembed-table3", "--variants", "nope")
    with pytest.raises(CommandError, match="required"):
        call_command("experiment", "--preset", "vtrajembed-table3")
    assert Experiment.objects.count() == 1
    call_command("experiment", "--list-presets")
    assert "vtrajembed-table3" in capsys.readouterr().out


def test_experiments_over_the_api(snapshots, staff, queued_tasks, django_capture_on_commit_callbacks):  # noqa: F811
    body = {"snapshot": snapshots["train"].pk, "eval_snapshot": snapshots["dev"].pk,
            "grid": _grid(variants=["without_slow"], seeds=[0, 1])}
    with django_capture_on_commit_callbacks(execute=True):
        r = staff["manager"].post("/api/experiments/", body, format="json")
    assert r.status_code == 202, r.content
    data = r.json()
    assert data["cells_total"] == 4 and data["status"] == "running" and len(data["cells"]) == 4
    assert [c["variant"] for c in data["cells"]].count("without_slow") == 2
    assert sorted(t[1][0] for t in queued_tasks) == sorted(c["training_run"] for c in data["cells"])
    assert {t[2]["queue"] for t in queued_tasks} == {"gpu"}
    for role in ("annotator", "auditor"):
        assert staff[role].post("/api/experiments/", body, format="json").status_code == 403
        assert staff[role].get(f"/api/experiments/{data['id']}/").status_code == 200
    bad = staff["manager"].post("/api/experiments/", {**body, "grid": _grid(variants=["nope"])}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_experiment" and "nope" in bad.json()["message"]
    assert Experiment.objects.count() == 1
    presets = staff["auditor"].get("/api/experiments/presets/").json()["presets"]
    assert presets[0]["name"] == "vtrajembed-table3" and "without_fast" in presets[0]["variants"]
    assert staff["manager"].get("/api/experiments/").json()["count"] == 1
    cancelled = staff["manager"].post(f"/api/experiments/{data['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert staff["manager"].post(f"/api/experiments/{data['id']}/cancel/").status_code == 409
    csv_response = staff["manager"].get(f"/api/experiments/{data['id']}/table.csv")
    assert csv_response.status_code == 200 and csv_response["Content-Type"].startswith("text/csv")
    assert csv_response.content.decode().startswith("task,metric,stratum,variant")
    with django_capture_on_commit_callbacks(execute=True):
        resumed = staff["manager"].post(f"/api/experiments/{data['id']}/resume/")
    assert resumed.status_code == 202 and resumed.json()["status"] == "running"
    assert len(queued_tasks) == 8
    assert staff["manager"].get("/api/experiments/999999/").status_code == 404


def test_scout_reranking_preset_blends_vlm_and_itm_on_one_training(snapshots, var_dir, trained_dirs):
    """SCOUT's second stage: one training (with ScoutITM on identity-hard and mined negatives) per
    seed, CombSUM and RRF with another retriever's run; the VLM variants ask one score per
    shortlisted candidate, the ITM variant none; the fused first stage reports its members'
    per-query decorrelation."""
    member = finished_run(snapshots, trained_dirs["vtrajembed"])
    base = {"steps": 2, "batch_size": 4, "checkpoint_every": 2, "lr": 1e-3, "device": "cpu",
            "model": {**TINY_SCOUT, "itm": {"enabled": True, "steps": 4, "batch_size": 8, "n_negatives": 2,
                                            "model": {"d_model": 16, "n_layers": 1, "n_heads": 2, "ff_mult": 2}}}}
    experiment = experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], queue=False,
                                   grid={"preset": "scout-rerank", "seeds": [0], "base": base, "n_resamples": 200,
                                         "fuse_runs": [member.pk]})
    assert experiment.runs.count() == 1 and experiment.cells.count() == 6
    assert training_run_execute(run=experiment.runs.get()).status == "succeeded"
    experiment = experiment_refresh(experiment_id=experiment.pk)
    for cell in experiment.cells.select_related("evaluation"):
        assert evaluation_run_execute(run=cell.evaluation).status == "succeeded", cell.evaluation.error
    experiment = experiment_refresh(experiment_id=experiment.pk)
    assert experiment.status == "succeeded" and experiment.cells_done == 6
    combsum = experiment.cells.get(variant="combsum").evaluation
    assert combsum.pipeline["fuse_runs"] == [member.pk] and combsum.pipeline["fusion"] == "combsum"
    rrf = experiment.cells.get(variant="rrf").evaluation
    assert rrf.pipeline["fuse_runs"] == [member.pk] and (rrf.pipeline["fusion"], rrf.pipeline["rrf_k"]) == ("rrf", 60)
    rho = combsum.metrics["pipeline"]["decorrelation"][f"dense|run {member.pk}"]
    assert rho["n_queries"] + rho["n_undefined"] == combsum.metrics["pipeline"]["queries"] and -1 <= rho["mean"] <= 1
    requests = experiment.result["requests"]
    m = min(20, len(RelationSnapshotData.load(snapshots["dev"].path).tracks))
    assert requests["vlm"]["scorer_requests"]["per_query_mean"] == m == requests["full_blend"]["scorer_requests"][
        "per_query_max"]
    assert requests["itm"]["scorer_requests"]["total"] == 0
    figures = {c.variant: c.evaluation.metrics["t2traj"]["mAP"] for c in experiment.cells.select_related("evaluation")}
    assert len(figures) == 6 and all(0 <= v <= 100 for v in figures.values())
    rows = {r["variant"]: r for r in experiment.result["tables"][0]["rows"]}
    assert rows["first_stage"]["reference"] and all(rows[v]["n_seeds"] == 1 for v in rows)


def test_a_fused_run_trained_on_the_evaluated_split_is_refused(snapshots, var_dir, trained_dirs, tiny_benchmark_dir):
    from common.errors import ApplicationError

    dev_trained = finished_run(snapshots, trained_dirs["vtrajembed"])
    dev_trained.snapshot = register_snapshot(tiny_benchmark_dir / "snapshots" / "dev")
    dev_trained.save(update_fields=["snapshot"])
    with pytest.raises(ApplicationError) as caught:
        experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], queue=False,
                          grid={"preset": "scout-rerank", "seeds": [0], "fuse_runs": [dev_trained.pk],
                                "base": {"steps": 2, "batch_size": 4, "model": TINY_SCOUT}})
    assert caught.value.code == "evaluation_on_training_data" and f"run {dev_trained.pk}" in caught.value.message
    assert not Experiment.objects.exists()
