"""REST API of training runs, evaluation runs and search: permissions, 400/409 answers, queuing on
the gpu queue after commit, the per-step series and cancelling."""
from __future__ import annotations

import pytest

from tests.workers.factories import finished_run, register_snapshot, tiny_config
from workers import search as search_module
from workers.models import EvaluationRun, TrainingRun, TrainingStep

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued_tasks(monkeypatch):
    """What the services hand to Celery: (task name, args, options)."""
    from common.jobs import runs

    sent = []
    monkeypatch.setattr(runs.current_app, "send_task",
                        lambda name, args=None, **options: sent.append((name, args, options)))
    return sent


@pytest.fixture
def staff(make_user, client_for):
    return {role: client_for(make_user(role)) for role in ("manager", "annotator", "auditor")}


def _body(snapshots, **overrides):
    return {"snapshot": snapshots["train"].pk, "eval_snapshot": snapshots["dev"].pk, "model_kind": "vtrajembed",
            "config": tiny_config(), **overrides}


def test_managers_start_training_runs_that_are_queued_on_the_gpu_queue(
        snapshots, staff, queued_tasks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        r = staff["manager"].post("/api/training-runs/", _body(snapshots), format="json")
    assert r.status_code == 202, r.content
    body = r.json()
    assert body["status"] == "queued" and body["job"]["queue"] == "gpu" and body["steps_total"] == 6
    assert body["config"]["batch_size"] == 4 and body["launch"] == {"nproc_per_node": 1, "launcher": "auto"}
    assert queued_tasks == [("workers.tasks.training_run_task", [body["id"]], {"queue": "gpu"})]
    # others may read but not start
    for role in ("annotator", "auditor"):
        assert staff[role].post("/api/training-runs/", _body(snapshots), format="json").status_code == 403
        listed = staff[role].get("/api/training-runs/")
        assert listed.status_code == 200 and [run["id"] for run in listed.json()["results"]] == [body["id"]]
    from rest_framework.test import APIClient

    assert APIClient().get("/api/training-runs/").status_code in (401, 403)
    assert staff["manager"].get("/api/training-runs/?status=succeeded").json()["count"] == 0
    assert staff["manager"].get("/api/training-runs/?model_kind=vtrajembed").json()["count"] == 1


@pytest.mark.parametrize(("overrides", "status", "code"), [
    ({"model_kind": "clip"}, 400, "invalid_model_kind"),
    ({"config": {"steps": 0}}, 400, "invalid_config"),
    ({"config": {"model": {"aggregator": "rnn"}}}, 400, "invalid_config"),
    ({"config": "not an object"}, 400, "invalid_config"),
    ({"snapshot": 999999}, 400, "invalid"),
    ({"model_kind": None}, 400, "invalid"),
])
def test_bad_training_requests_are_400s(snapshots, staff, queued_tasks, overrides, status, code):
    r = staff["manager"].post("/api/training-runs/", _body(snapshots, **overrides), format="json")
    assert r.status_code == status, r.content
    assert r.json()["code"] == code and r.json()["message"]
    assert not TrainingRun.objects.exists() and queued_tasks == []


def test_an_unsealed_snapshot_is_a_409(snapshots, staff, tiny_benchmark_dir):
    unsealed = register_snapshot(tiny_benchmark_dir / "snapshots" / "train", sealed=False)
    r = staff["manager"].post("/api/training-runs/", _body(snapshots, snapshot=unsealed.pk), format="json")
    assert r.status_code == 409 and r.json()["code"] == "snapshot_not_sealed"


def test_the_detail_has_the_per_step_series_for_live_curves(snapshots, staff):
    run = finished_run(snapshots, "/nowhere")
    for step in (1, 2, 3):
        TrainingStep.objects.create(run=run, step=step, attempt=1 if step < 3 else 2, loss=1.0 / step,
                                    record={"step": step, "loss": 1.0 / step, "t2v": 0.5, "zero_neg_row_rate": 0.0,
                                            "cross_video_negatives": 10 * step})
    r = staff["auditor"].get(f"/api/training-runs/{run.pk}/")
    assert r.status_code == 200
    series = r.json()["series"]
    assert series["step"] == [1, 2, 3] and series["attempt"] == [1, 1, 2]
    assert series["loss"] == pytest.approx([1.0, 0.5, 1 / 3]) and series["cross_video_negatives"] == [10, 20, 30]
    assert r.json()["progress"] == 1.0 and r.json()["metrics"] == {}
    newer = staff["auditor"].get(f"/api/training-runs/{run.pk}/?after=2").json()["series"]
    assert newer["step"] == [3]
    assert staff["auditor"].get(f"/api/training-runs/{run.pk}/?after=x").status_code == 400
    assert staff["auditor"].get("/api/training-runs/999999/").status_code == 404


def test_cancel(snapshots, staff, queued_tasks):
    run_id = staff["manager"].post("/api/training-runs/", _body(snapshots), format="json").json()["id"]
    assert staff["annotator"].post(f"/api/training-runs/{run_id}/cancel/").status_code == 403
    r = staff["manager"].post(f"/api/training-runs/{run_id}/cancel/")
    assert r.status_code == 200 and r.json()["status"] == "cancelled" and r.json()["cancel_requested"]
    again = staff["manager"].post(f"/api/training-runs/{run_id}/cancel/")
    assert again.status_code == 409 and again.json()["code"] == "run_finished"


def test_evaluation_runs_over_the_api(snapshots, staff, queued_tasks, django_capture_on_commit_callbacks):
    r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "kind": "random"},
                              format="json")
    assert r.status_code == 201 and r.json()["status"] == "succeeded" and r.json()["metrics"]["random"]["R@1"] > 0
    with django_capture_on_commit_callbacks(execute=True):
        r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "kind": "untrained",
                                                            "model_kind": "scout"}, format="json")
    assert r.status_code == 202 and r.json()["job"]["queue"] == "gpu"
    assert queued_tasks == [("workers.tasks.evaluation_run_task", [r.json()["id"]], {"queue": "gpu"})]
    run = finished_run(snapshots, "/nowhere")
    existing = EvaluationRun.objects.create(kind="trained", training_run=run, snapshot=snapshots["dev"],
                                            model_kind="vtrajembed", status="succeeded", metrics={"t2traj": {}})
    r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "training_run": run.pk},
                              format="json")
    assert r.status_code == 200 and r.json()["id"] == existing.pk
    queued = TrainingRun.objects.create(snapshot=snapshots["train"], model_kind="vtrajembed", config={}, steps_total=2)
    r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "training_run": queued.pk},
                              format="json")
    assert r.status_code == 409 and r.json()["code"] == "run_not_finished"
    r = staff["manager"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "kind": "untrained"},
                              format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_model_kind"
    assert staff["annotator"].post("/api/evaluation-runs/", {"snapshot": snapshots["dev"].pk, "kind": "random"},
                                   format="json").status_code == 403
    listed = staff["annotator"].get(f"/api/evaluation-runs/?training_run={run.pk}")
    assert listed.status_code == 200 and [e["id"] for e in listed.json()["results"]] == [existing.pk]
    assert staff["annotator"].get(f"/api/evaluation-runs/{existing.pk}/").json()["kind"] == "trained"


def test_evaluating_on_training_data_is_refused_over_the_api_unless_asked_for(snapshots, staff, queued_tasks):
    manager = staff["manager"]
    r = manager.post("/api/training-runs/", _body(snapshots, eval_snapshot=None), format="json")
    assert r.status_code == 400 and r.json()["code"] == "evaluation_on_training_data"
    assert "allow_train_split" in r.json()["message"] and not TrainingRun.objects.exists()
    r = manager.post("/api/evaluation-runs/", {"snapshot": snapshots["train"].pk, "kind": "random"}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "evaluation_on_training_data"
    r = manager.post("/api/training-runs/", _body(snapshots, eval_snapshot=None, allow_train_split=True), format="json")
    assert r.status_code == 202 and r.json()["eval_stamps"] == ["train-split"]
    r = manager.post("/api/evaluation-runs/", {"snapshot": snapshots["train"].pk, "kind": "random",
                                               "allow_train_split": "yes"}, format="json")
    assert r.status_code == 400 and "allow_train_split" in str(r.json())          # strict booleans only
    r = manager.post("/api/evaluation-runs/", {"snapshot": snapshots["train"].pk, "kind": "random",
                                               "allow_train_split": True}, format="json")
    assert r.status_code == 201 and r.json()["stamps"] == ["train-split"]
    clean = manager.post("/api/training-runs/", _body(snapshots), format="json").json()
    assert clean["eval_stamps"] == []


def test_search_over_the_api(snapshots, staff, trained_dirs, var_dir):
    search_module._loaded.clear()
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    other = finished_run(snapshots, trained_dirs["scout"], "scout")
    body = {"run": run.pk, "text": "someone in blue trousers", "k": 3}
    r = staff["annotator"].post("/api/search/", body, format="json")
    assert r.status_code == 200, r.content
    out = r.json()
    assert len(out["results"]) == 3 and out["results"][0]["rank"] == 1 and out["score"] == "cosine"
    assert out["results"][0]["score"] >= out["results"][1]["score"] >= out["results"][2]["score"]
    r = staff["annotator"].post("/api/search/", {**body, "level": "video", "fuse_with": [other.pk], "rerank": True},
                                format="json")
    assert r.status_code == 200 and r.json()["score"] == "combsum" and r.json()["reranked"]
    assert len({hit["video"] for hit in r.json()["results"]}) == len(r.json()["results"])
    for bad, status, code in (({"level": "frame"}, 400, "invalid_level"), ({"k": 0}, 400, "invalid"),
                              ({"text": ""}, 400, "invalid"), ({"fuse_with": [run.pk]}, 400, "invalid_fuse_with"),
                              ({"mode": "approved"}, 400, "invalid"),
                              ({"run": 999999}, 400, "invalid")):
        r = staff["annotator"].post("/api/search/", {**body, **bad}, format="json")
        assert r.status_code == status and r.json()["code"] == code, (bad, r.content)
    queued = TrainingRun.objects.create(snapshot=snapshots["train"], model_kind="vtrajembed", config={}, steps_total=2)
    r = staff["annotator"].post("/api/search/", {**body, "run": queued.pk}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "run_not_finished"
    from rest_framework.test import APIClient

    assert APIClient().post("/api/search/", body, format="json").status_code in (401, 403)


def test_the_run_names_its_stored_checkpoint_to_managers(snapshots, staff):
    run = finished_run(snapshots, "training/1")
    TrainingRun.objects.filter(pk=run.pk).update(checkpoint_key="training/1/checkpoint-00000008.pt",
                                                 checkpoint_step=8, checkpoint_sha256="ab" * 32)
    seen = staff["manager"].get(f"/api/training-runs/{run.pk}/").json()
    assert (seen["checkpoint_key"], seen["checkpoint_step"], seen["checkpoint_sha256"]) == (
        "training/1/checkpoint-00000008.pt", 8, "ab" * 32)
    # others see the step and checksum of what was stored, not where
    listed = staff["auditor"].get("/api/training-runs/").json()["results"][0]
    assert (listed["checkpoint_key"], listed["checkpoint_step"], listed["checkpoint_sha256"]) == ("", 8, "ab" * 32)
