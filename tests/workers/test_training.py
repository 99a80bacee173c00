"""Training and evaluation run services on a tiny rendered benchmark: validation, a run end to end
with its evaluation, resuming after a lost attempt, cancelling, evaluation runs and torchrun."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from django.db import IntegrityError, transaction

from common.errors import ApplicationError, ConflictError
from common.models import Job
from common.storage import store
from models.training.evaluation import random_baseline
from models.training.snapshot import RelationSnapshotData
from tests.workers.factories import TINY_VTRAJEMBED, register_snapshot, tiny_config
from workers import training as training_services
from workers.artefacts import checkpoint_local
from workers.evaluation import evaluation_run_create
from workers.execute import evaluation_run_execute, training_run_execute
from workers.models import EvaluationRun, TrainingRun, TrainingStep
from workers.selectors import training_step_series
from workers.train_entry import command
from workers.training import training_run_cancel, training_run_create

pytestmark = pytest.mark.django_db


def _create(snapshots, user=None, **config):
    return training_run_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind="vtrajembed",
                               config=tiny_config(**config), created_by=user, queue=False)


# -- validation -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "config", "code", "words"), [
    ("clip", {}, "invalid_model_kind", "known: actpair, scout, vtrajembed"),
    ("vtrajembed", {"stpes": 5}, "invalid_config", "unknown key(s) stpes"),
    ("vtrajembed", {"lr": -1.0}, "invalid_config", "lr must be a positive number"),
    ("vtrajembed", {"model": {"d_model": 30}}, "invalid_config", "d_model (30) must be a multiple of heads"),
    ("vtrajembed", {"model": {"features": {"n_slow_budget": 9}}}, "invalid_config", "n_slow_budget must be in 1..4"),
    ("scout", {"model": {"predictor": {"d_in": 3}}}, "invalid_config", "follow from the encoders"),
    ("vtrajembed", {"batching": {"drop_probability": 2}}, "invalid_config", "drop_probability"),
    ("vtrajembed", {"eval_at_end": False}, "invalid_config", "always ends with an evaluation run"),
    ("vtrajembed", {"precision": "fp16"}, "invalid_config", "precision must be one of fp32, bf16, got 'fp16'"),
    ("vtrajembed", {"nproc_per_node": 3, "batch_size": 4}, "invalid_config", "multiple of nproc_per_node"),
    ("vtrajembed", {"nproc_per_node": 2, "launcher": "inline"}, "invalid_config", "need the torchrun launcher"),
    ("vtrajembed", {"nproc_per_node": 0}, "invalid_config", "nproc_per_node must be an integer"),
    ("vtrajembed", [1, 2], "invalid_config", "JSON object"),
])
def test_bad_requests_are_refused_up_front_and_write_nothing(snapshots, kind, config, code, words):
    with pytest.raises(ApplicationError) as err:
        training_run_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind=kind,
                            config=config, queue=False)
    assert err.value.code == code and err.value.status_code == 400 and words in err.value.message
    assert not TrainingRun.objects.exists() and not Job.objects.exists()


def test_a_precision_is_a_setting_of_the_run(snapshots):
    assert _create(snapshots).config["precision"] == "fp32"
    assert _create(snapshots, precision="bf16").config["precision"] == "bf16"


def test_only_sealed_snapshots_are_used(tiny_benchmark_dir, snapshots):
    unsealed = register_snapshot(tiny_benchmark_dir / "snapshots" / "dev", sealed=False)
    for kwargs in ({"snapshot": unsealed, "eval_snapshot": snapshots["dev"]},
                   {"snapshot": snapshots["train"], "eval_snapshot": unsealed}):
        with pytest.raises(ConflictError) as err:
            training_run_create(model_kind="vtrajembed", config={}, queue=False, **kwargs)
        assert err.value.code == "snapshot_not_sealed" and err.value.status_code == 409
    with pytest.raises(ConflictError):
        evaluation_run_create(snapshot=unsealed, kind="random")
    assert not TrainingRun.objects.exists()


def test_the_database_holds_the_run_invariants(snapshots):
    run = _create(snapshots)
    with pytest.raises(IntegrityError), transaction.atomic():
        TrainingRun.objects.filter(pk=run.pk).update(steps_done=run.steps_total + 1)
    TrainingStep.objects.create(run=run, step=1, attempt=1, record={})
    with pytest.raises(IntegrityError), transaction.atomic():
        TrainingStep.objects.create(run=run, step=1, attempt=2, record={})
    with pytest.raises(IntegrityError), transaction.atomic():
        EvaluationRun.objects.create(kind="trained", snapshot=snapshots["dev"])           # no training run
    with pytest.raises(IntegrityError), transaction.atomic():
        EvaluationRun.objects.create(kind="random", snapshot=snapshots["dev"], model_kind="scout")
    EvaluationRun.objects.create(kind="trained", training_run=run, snapshot=snapshots["dev"])
    with pytest.raises(IntegrityError), transaction.atomic():
        EvaluationRun.objects.create(kind="trained", training_run=run, snapshot=snapshots["dev"])


# -- a run end to end -----------------------------------------------------------------------------------
def test_a_run_trains_records_every_step_and_ends_with_its_evaluation(snapshots, var_dir, manager):
    run = _create(snapshots, manager)
    assert run.status == "queued" and run.job.queue == "gpu" and run.steps_total == 6
    assert run.config["model"]["d_model"] == TINY_VTRAJEMBED["d_model"] and run.config["lr"] == 1e-3
    seen = []
    run = training_run_execute(run=run, echo=lambda fraction, message: seen.append((fraction, message)))
    assert run.status == "succeeded", run.error
    assert run.steps_done == 6 and run.resumes == [] and run.out_dir == f"training/{run.pk}"   # a storage key
    # the final checkpoint is stored, named on the row with its checksum; the older ones are gone
    assert run.checkpoint_key == f"training/{run.pk}/checkpoint-00000006.pt" and run.checkpoint_step == 6
    assert store().list(run.out_dir) == [run.checkpoint_key, f"training/{run.pk}/result.json",
                                         f"training/{run.pk}/steps.jsonl"]
    assert run.result["checkpoint"] == run.checkpoint_key
    # every step is a row with the loss parts and the realized counts DESIGN 2.10 asks for
    rows = list(TrainingStep.objects.filter(run=run).order_by("step"))
    assert [r.step for r in rows] == [1, 2, 3, 4, 5, 6] and {r.attempt for r in rows} == {1}
    for r in rows:
        for key in ("loss", "group", "t2v", "v2t", "positives", "negatives", "cross_video_positives",
                    "cross_video_negatives", "zero_neg_row_rate", "zero_neg_col_rate", "lr"):
            assert key in r.record, key
        assert r.loss == pytest.approx(r.record["loss"]) and r.loss > 0
    steps_file = [json.loads(line) for line in (var_dir / "training" / str(run.pk) / "steps.jsonl").read_text().splitlines()]
    assert [s["loss"] for s in steps_file] == pytest.approx([r.loss for r in rows])
    assert run.result["totals"]["negatives"] == sum(r.record["negatives"] for r in rows)
    # the final evaluation: on the run and as its evaluation run, with the random baseline
    dev = RelationSnapshotData.load(snapshots["dev"].path)
    for protocol in ("t2traj", "traj2t", "ocvr"):
        assert run.metrics[protocol]["n_queries"] > 0 and set(run.metrics[protocol]["strata"]) >= {"2", "3-5"}
    assert run.metrics["random"]["R@1"] == pytest.approx(random_baseline(dev)["R@1"])
    evaluation = EvaluationRun.objects.get(training_run=run)
    assert evaluation.kind == "trained" and evaluation.snapshot_id == snapshots["dev"].pk
    assert evaluation.status == "succeeded" and evaluation.metrics == run.metrics
    # the job followed it; the progress callback saw every step
    run.job.refresh_from_db()
    assert run.job.status == "succeeded" and run.job.progress == 1.0 and run.job.attempts == 1
    assert [f for f, _ in seen] == pytest.approx([i / 6 for i in range(1, 7)])
    assert seen[-1][1].startswith("step 6/6 · loss")
    # the search index of the evaluated snapshot is ready
    assert (var_dir / "search" / f"run-{run.pk}" / f"{snapshots['dev'].content_sha256}.npz").is_file()
    # a second delivery of a finished run changes nothing
    again = training_run_execute(run=run)
    again.job.refresh_from_db()
    assert again.status == "succeeded" and again.job.attempts == 1 and TrainingStep.objects.filter(run=run).count() == 6
    series = training_step_series(run=run, after=4)
    assert series["step"] == [5, 6] and series["loss"] == pytest.approx([rows[4].loss, rows[5].loss])


class _Killed(BaseException):
    """Stands for the worker process dying: nothing in the service catches it."""


def test_a_lost_attempt_resumes_from_its_checkpoint_with_the_same_steps(snapshots, var_dir, monkeypatch):
    reference = training_run_execute(run=_create(snapshots))
    reference_losses = [r.loss for r in TrainingStep.objects.filter(run=reference).order_by("step")]
    original = training_services._StepRecorder.__call__

    def dies_after_step_3(self, record):
        original(self, record)
        if self.attempt == 1 and record["step"] == 3:
            raise _Killed

    monkeypatch.setattr(training_services._StepRecorder, "__call__", dies_after_step_3)
    run = _create(snapshots)
    with pytest.raises(_Killed):
        training_run_execute(run=run)
    run.refresh_from_db()
    assert run.status == "running" and run.steps_done >= 2            # rows up to the checkpoint at step 2 exist
    # when the task is delivered again
    run = training_run_execute(run=run)
    # then the trainer resumed at the checkpoint, and the series has each step once, without a gap
    assert run.status == "succeeded" and run.steps_done == 6
    assert run.resumes == [{"attempt": 2, "from_step": 2}] and run.result["resumed_from"] == 2
    rows = list(TrainingStep.objects.filter(run=run).order_by("step").values_list("step", "attempt", "loss"))
    assert [(s, a) for s, a, _ in rows] == [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 2)]
    # the resumed run did the same updates as one that never stopped (CPU, fixed seed)
    assert [loss for _, _, loss in rows] == pytest.approx(reference_losses, rel=1e-5)
    run.job.refresh_from_db()
    assert run.job.attempts == 2 and "resumed from the checkpoint at step 2" in run.job.log_tail


def test_cancelling(snapshots, var_dir, monkeypatch, manager):
    # a queued run is cancelled at once and never trains
    queued = _create(snapshots)
    queued = training_run_cancel(run=queued, user=manager)
    assert queued.status == "cancelled" and queued.cancel_requested
    assert training_run_execute(run=queued).status == "cancelled" and not TrainingStep.objects.filter(run=queued).exists()
    queued.job.refresh_from_db()
    assert queued.job.status == "failed" and "cancelled by" in queued.job.error
    with pytest.raises(ConflictError):
        training_run_cancel(run=queued)
    # a running run stops at its next step, after a checkpoint, without an evaluation
    monkeypatch.setattr(training_services, "CANCEL_POLL_SECONDS", 0.0)
    original = training_services._StepRecorder.__call__

    def cancel_at_step_2(self, record):
        original(self, record)
        if record["step"] == 2:
            training_run_cancel(run=TrainingRun.objects.get(pk=self.run.pk))

    monkeypatch.setattr(training_services._StepRecorder, "__call__", cancel_at_step_2)
    run = training_run_execute(run=_create(snapshots, steps=20, checkpoint_every=10))
    assert run.status == "cancelled" and run.steps_done == 2 and run.result["status"] == "stopped"
    assert TrainingStep.objects.filter(run=run).count() == 2 and not EvaluationRun.objects.filter(training_run=run).exists()
    import torch

    assert torch.load(checkpoint_local(run), weights_only=False)["step"] == 2 and run.checkpoint_step == 2
    run.job.refresh_from_db()
    assert run.job.status == "failed" and "cancelled at step 2/20" in run.job.error


def test_a_failing_run_is_recorded_not_raised(snapshots, var_dir, settings):
    # a registered model folder that is not there: the worker resolves the name and fails with it
    settings.TRAJLAB_BACKENDS = {"missing-clip": {"path": "/nonexistent"}}
    run = training_run_create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"], model_kind="vtrajembed",
                              queue=False, config=tiny_config(model={**TINY_VTRAJEMBED, "text": {"kind": "clip",
                                                                                     "path": "missing-clip"}}))
    assert run.config["model"]["text"]["path"] == "missing-clip"
    run = training_run_execute(run=run)
    assert run.status == "failed" and "nonexistent" in run.error
    run.job.refresh_from_db()
    assert run.job.status == "failed" and "Traceback" in run.job.error


# -- evaluation runs ------------------------------------------------------------------------------------
def test_evaluation_runs(snapshots, var_dir, manager):
    dev = RelationSnapshotData.load(snapshots["dev"].path)
    # the random baseline is exact and computed at once
    rand, created = evaluation_run_create(snapshot=snapshots["dev"], kind="random", created_by=manager)
    assert created and rand.status == "succeeded" and rand.job is None
    assert rand.metrics["random"]["R@1"] == pytest.approx(random_baseline(dev)["R@1"])
    # the untrained model: its initial weights for a seed, queued and then computed
    untrained, created = evaluation_run_create(snapshot=snapshots["dev"], kind="untrained", model_kind="vtrajembed",
                                               config={"model": TINY_VTRAJEMBED, "seed": 3}, queue=False)
    assert created and untrained.status == "queued" and untrained.job.queue == "gpu"
    assert untrained.config == {"model": untrained.config["model"], "seed": 3, "device": "auto"}
    untrained = evaluation_run_execute(run=untrained)
    assert untrained.status == "succeeded", untrained.error
    assert untrained.metrics["t2traj"]["n_queries"] == rand.metrics["random"]["n_queries"]
    assert 0.0 <= untrained.metrics["t2traj"]["R@1"] <= 100.0
    # a trained evaluation needs a succeeded run, and each (run, snapshot) is evaluated once
    run = _create(snapshots)
    with pytest.raises(ConflictError) as err:
        evaluation_run_create(snapshot=snapshots["dev"], training_run=run)
    assert err.value.code == "run_not_finished"
    run = training_run_execute(run=run)
    existing, created = evaluation_run_create(snapshot=snapshots["dev"], training_run=run)
    assert not created and existing.metrics == run.metrics
    assert existing.stamps == [] and run.eval_stamps == []
    # the model's own training data only when asked for, and then the figures say so
    with pytest.raises(ApplicationError) as err:
        evaluation_run_create(snapshot=snapshots["train"], training_run=run, queue=False)
    assert err.value.code == "evaluation_on_training_data" and err.value.status_code == 400
    assert "training snapshot" in err.value.message and "allow_train_split" in err.value.message
    assert not EvaluationRun.objects.filter(snapshot=snapshots["train"]).exists()
    on_train, created = evaluation_run_create(snapshot=snapshots["train"], training_run=run, queue=False,
                                              allow_train_split=True)
    on_train = evaluation_run_execute(run=on_train)
    assert created and on_train.status == "succeeded" and on_train.metrics["t2traj"]["n_queries"] > 0
    assert on_train.stamps == ["train-split"]
    # the trained checkpoint reloads to the same figures the trainer reported
    again, _ = evaluation_run_create(snapshot=snapshots["dev"], kind="untrained", model_kind="vtrajembed",
                                     config={"model": TINY_VTRAJEMBED, "seed": 3}, queue=False)
    assert evaluation_run_execute(run=again).metrics == untrained.metrics            # deterministic
    for bad, code in (({"kind": "trained"}, "invalid_training_run"),
                      ({"kind": "untrained"}, "invalid_model_kind"),
                      ({"kind": "untrained", "model_kind": "vtrajembed", "config": {"steps": 3}}, "invalid_config"),
                      ({"kind": "random", "model_kind": "scout"}, "invalid_config"),
                      ({"kind": "best"}, "invalid_kind")):
        with pytest.raises(ApplicationError) as err:
            evaluation_run_create(snapshot=snapshots["dev"], **bad)
        assert err.value.code == code


# -- several processes -------------------------------------------------------------------------------------
def test_the_torchrun_command_line():
    cmd = command(nproc_per_node=4, snapshot_dir="/s/train", snapshot_sha="ab" * 32, model_kind="scout",
                  config_file="/o/train_config.json", out_dir="/o", eval_snapshot_dir="/s/dev",
                  eval_snapshot_sha="cd" * 32, progress_file="/o/progress-1.jsonl", stop_file="/o/STOP", python="/py")
    assert cmd == ["/py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
                   "-m", "workers.train_entry", "--snapshot", "/s/train", "--snapshot-sha", "ab" * 32,
                   "--model", "scout", "--config", "/o/train_config.json", "--out-dir", "/o",
                   "--eval-snapshot", "/s/dev", "--eval-snapshot-sha", "cd" * 32,
                   "--progress", "/o/progress-1.jsonl", "--stop-file", "/o/STOP"]
    assert command(nproc_per_node=1, snapshot_dir="a", snapshot_sha="b", model_kind="c", config_file="d",
                   out_dir="e", progress_file="p", checkpoint_links=True)[-1] == "--checkpoint-links"
    assert command(nproc_per_node=1, snapshot_dir="a", snapshot_sha="b", model_kind="c", config_file="d",
                   out_dir="e")[0] == sys.executable
    for bad in ({"nproc_per_node": 0}, {"eval_snapshot_dir": "/s/dev"}, {"snapshot_sha": ""},
                {"checkpoint_links": True}):
        with pytest.raises(ValueError):
            command(**{"nproc_per_node": 2, "snapshot_dir": "a", "snapshot_sha": "b", "model_kind": "c",
                       "config_file": "d", "out_dir": "e", **bad})


@pytest.mark.slow
def test_a_run_through_torchrun_with_one_process(snapshots, var_dir):
    run = _create(snapshots, launcher="torchrun", nproc_per_node=1, steps=4)
    assert run.launch == {"nproc_per_node": 1, "launcher": "torchrun"}
    run = training_run_execute(run=run)
    assert run.status == "succeeded", run.error
    assert run.steps_done == 4 and run.result["world_size"] == 1
    assert list(TrainingStep.objects.filter(run=run).values_list("step", flat=True)) == [1, 2, 3, 4]
    assert run.metrics["t2traj"]["n_queries"] > 0 and EvaluationRun.objects.filter(training_run=run).exists()
    run.job.refresh_from_db()
    assert "torch.distributed.run --standalone --nproc_per_node 1 -m workers.train_entry" in run.job.log_tail
    lines = [json.loads(line) for line in (var_dir / "training" / str(run.pk) / "progress-1.jsonl").read_text().splitlines()]
    progress = [p for p in lines if "step" in p]
    assert [p["step"] for p in progress] == [1, 2, 3, 4]
    assert np.allclose([p["loss"] for p in progress],
                       list(TrainingStep.objects.filter(run=run).values_list("loss", flat=True)))
    # each checkpoint rank 0 announced was stored by the worker and its link removed; the last is named
    assert [p["checkpoint_step"] for p in lines if "checkpoint_step" in p] == [2, 4]
    assert not list((var_dir / "training" / str(run.pk)).glob("*.link"))
    assert run.checkpoint_step == 4 and store().list(run.out_dir)[0] == run.checkpoint_key
    assert store().list(run.out_dir)[-1] == f"training/{run.pk}/torchrun-1.log"


# -- evaluation guards --------------------------------------------------------------------------------------
def test_training_data_and_incomplete_snapshots_are_refused_unless_asked_for_then_stamped(snapshots, tiny_benchmark_dir):
    train, dev = snapshots["train"], snapshots["dev"]
    # no evaluation snapshot means the training snapshot: refused, nothing written
    with pytest.raises(ApplicationError) as err:
        training_run_create(snapshot=train, model_kind="vtrajembed", config=tiny_config(), queue=False)
    assert err.value.code == "evaluation_on_training_data" and err.value.status_code == 400
    # another snapshot of the train split is training data too
    other_train = register_snapshot(tiny_benchmark_dir / "snapshots" / "train")
    with pytest.raises(ApplicationError, match="a snapshot of the train split"):
        training_run_create(snapshot=train, eval_snapshot=other_train, model_kind="vtrajembed", config=tiny_config(),
                            queue=False)
    with pytest.raises(ApplicationError, match="evaluate on a dev or test snapshot"):
        evaluation_run_create(snapshot=train, kind="random")
    assert not TrainingRun.objects.exists() and not EvaluationRun.objects.exists() and not Job.objects.exists()
    asked = training_run_create(snapshot=train, model_kind="vtrajembed", config=tiny_config(), queue=False,
                                allow_train_split=True)
    assert asked.eval_stamps == ["train-split"]
    # an incomplete dev snapshot: refused unless asked for, then stamped
    incomplete = register_snapshot(tiny_benchmark_dir / "snapshots" / "dev", complete=False)
    with pytest.raises(ApplicationError) as err:
        training_run_create(snapshot=train, eval_snapshot=incomplete, model_kind="vtrajembed", config=tiny_config(),
                            queue=False)
    assert err.value.code == "snapshot_incomplete" and "allow_incomplete" in err.value.message
    with pytest.raises(ApplicationError) as err:
        evaluation_run_create(snapshot=incomplete, kind="random")
    assert err.value.code == "snapshot_incomplete"
    run = training_run_create(snapshot=train, eval_snapshot=incomplete, model_kind="vtrajembed", config=tiny_config(),
                              queue=False, allow_incomplete=True)
    assert run.eval_stamps == ["incomplete"]
    rand, _ = evaluation_run_create(snapshot=incomplete, kind="random", allow_incomplete=True)
    assert rand.stamps == ["incomplete"]
    clean, _ = evaluation_run_create(snapshot=dev, kind="random")
    assert clean.stamps == []


def test_the_migration_stamps_the_runs_already_there(snapshots, tiny_benchmark_dir):
    import importlib

    from django.apps import apps

    migration = importlib.import_module("workers.migrations.0004_evaluation_stamps")
    train, dev = snapshots["train"], snapshots["dev"]
    incomplete = register_snapshot(tiny_benchmark_dir / "snapshots" / "dev", complete=False)
    fit = TrainingRun.objects.create(snapshot=train, model_kind="vtrajembed", config={}, steps_total=1)
    held_out = TrainingRun.objects.create(snapshot=train, eval_snapshot=dev, model_kind="vtrajembed", config={},
                                          steps_total=1)
    partial = TrainingRun.objects.create(snapshot=train, eval_snapshot=incomplete, model_kind="vtrajembed",
                                         config={}, steps_total=1)
    on_train = EvaluationRun.objects.create(kind="random", snapshot=train)
    on_dev = EvaluationRun.objects.create(kind="trained", training_run=held_out, snapshot=dev, model_kind="vtrajembed")
    migration.stamp_existing(apps, None)
    stamps = {r.pk: r.eval_stamps for r in TrainingRun.objects.all()}
    assert stamps == {fit.pk: ["train-split"], held_out.pk: [], partial.pk: ["incomplete"]}
    assert EvaluationRun.objects.get(pk=on_train.pk).stamps == ["train-split"]
    assert EvaluationRun.objects.get(pk=on_dev.pk).stamps == []
