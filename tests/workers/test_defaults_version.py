"""Runs and experiments record the version of the defaults they read (``workers.defaults``), and an
experiment whose cells ran on different versions says so in its table, its CLI text and its API."""
from __future__ import annotations

import pytest

from models.retrievers.vtrajembed.model import VTrajEmbedConfig
from models.training.defaults import defaults_version
from tests.workers.factories import tiny_config
from tests.workers.test_training_api import queued_tasks, staff  # noqa: F401 (fixtures)
from workers.defaults import attempt_defaults, defaults_record
from workers.execute import training_run_execute
from workers.experiments import experiment_create
from workers.management.commands.experiment import format_table
from workers.models import EvaluationRun, Experiment

pytestmark = pytest.mark.django_db

GRID = {"model_kind": "vtrajembed", "reference": "full", "variants": {"full": {}, "slower": {"lr": 5e-4}},
        "seeds": [0, 1], "base": tiny_config(steps=2, checkpoint_every=2), "n_resamples": 200}


def test_an_attempt_records_the_defaults_it_reads():
    v1 = defaults_record("scout", commit="abc")
    assert v1 == {"model_kind": "scout", "model": 1, "train": 1, "commit": "abc"} == defaults_version("scout") | {
        "commit": "abc"}
    assert attempt_defaults(model_kind="scout", recorded=v1, steps_done=4) == v1         # same defaults: kept
    older = {**v1, "model": 0}
    fresh = attempt_defaults(model_kind="scout", recorded=older, steps_done=0)         # nothing trained yet
    assert fresh["model"] == 1 and "resumed_over" not in fresh
    resumed = attempt_defaults(model_kind="scout", recorded=older, steps_done=4)        # continues a checkpoint
    assert resumed["model"] == 1 and resumed["resumed_over"] == older
    assert attempt_defaults(model_kind="scout", recorded={}, steps_done=4)["model"] == 1   # an old run: no record


def test_a_default_changed_between_seeds_is_marked_in_the_table(snapshots, var_dir, staff, monkeypatch):  # noqa: F811
    experiment = experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], grid=GRID,
                                   queue=False)
    created = experiment.defaults_version
    assert {k: created[k] for k in ("model_kind", "model", "train")} == defaults_version("vtrajembed")
    assert created["commit"] == experiment.code_version["trajlab_commit"]
    assert all(r.defaults_version == created for r in experiment.runs.all())
    # seed 0 trains on version 1; a fix to a default (version 2) lands before seed 1 trains
    for run in experiment.runs.filter(config__seed=0).order_by("id"):
        assert training_run_execute(run=run).status == "succeeded"
    monkeypatch.setattr(VTrajEmbedConfig, "DEFAULTS_VERSION", 2)
    for run in experiment.runs.filter(config__seed=1).order_by("id"):
        assert training_run_execute(run=run).status == "succeeded"
    runs = {r.config["seed"]: r for r in experiment.runs.filter(variant="slower")}
    assert runs[0].defaults_version["model"] == 1 and runs[1].defaults_version["model"] == 2
    evaluation = EvaluationRun.objects.get(training_run=runs[1])
    assert evaluation.defaults_version == runs[1].defaults_version
    result = Experiment.objects.get(pk=experiment.pk).result
    assert result["defaults"]["mixed"] and result["defaults"]["versions"] == ["vtrajembed v1, train v1",
                                                                             "vtrajembed v2, train v1"]
    assert "this table mixes versions" in result["defaults"]["note"]
    for block in result["tables"]:
        for row in block["rows"]:
            assert row["older_defaults"] and row["defaults"] == ["vtrajembed v1, train v1", "vtrajembed v2, train v1"]
    text = format_table(result)
    assert "warning: defaults of versions vtrajembed v1, train v1; vtrajembed v2, train v1: this table mixes" in text
    assert "  slower†" in text and "  full†" in text
    # the API carries the records and the table's summary
    detail = staff["auditor"].get(f"/api/experiments/{experiment.pk}/").json()
    assert detail["defaults_version"] == created and detail["result"]["defaults"]["mixed"] is True
    run = staff["auditor"].get(f"/api/training-runs/{runs[1].pk}/").json()
    assert run["defaults_version"]["model"] == 2
    listed = staff["auditor"].get("/api/evaluation-runs/").json()["results"]
    assert {e["defaults_version"].get("model") for e in listed} >= {1, 2}


def test_one_version_is_named_without_a_warning(snapshots, var_dir):
    experiment = experiment_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"],
                                   grid={**GRID, "variants": {"full": {}}, "reference": "full"}, queue=False)
    for run in experiment.runs.order_by("id"):
        training_run_execute(run=run)
    result = Experiment.objects.get(pk=experiment.pk).result
    assert result["defaults"] == {**result["defaults"], "mixed": False,
                                  "note": "defaults of version vtrajembed v1, train v1"}
    text = format_table(result)
    assert "defaults of version vtrajembed v1, train v1" in text and "warning" not in text and "†" not in text
