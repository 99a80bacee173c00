"""One retrieval pipeline, used everywhere: a declared pipeline served by ``POST /api/search/`` is
what an evaluation of the same pipeline ranks; evaluation runs store their pipeline; bad pipelines
are a 400 with a message, never a crash."""
from __future__ import annotations

import numpy as np
import pytest

from models.retrievers.pipeline import RetrievalPipeline
from models.training.evaluation import snapshot_pipeline
from models.training.snapshot import RelationSnapshotData
from models.training.trainer import load_model
from tests.workers.factories import finished_run
from workers import search as search_module
from workers.evaluation import evaluation_run_create
from workers.execute import evaluation_run_execute
from workers.folders import feature_cache_dir
from workers.models import EvaluationRun
from workers.search import search

pytestmark = pytest.mark.django_db
PAIRWISE = {"reranker": "pairwise", "shortlist": 4, "top_k": 4}


@pytest.fixture(autouse=True)
def fresh_process_caches():
    search_module._loaded.clear()
    search_module._descriptions.clear()
    yield
    search_module._loaded.clear()


def test_search_serves_what_the_evaluation_of_the_same_pipeline_ranks(snapshots, trained_dirs, var_dir):
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    dev = RelationSnapshotData.load(snapshots["dev"].path)
    model, _ = load_model(trained_dirs["vtrajembed"])
    evaluated = snapshot_pipeline(model, dev, PAIRWISE, cache_dir=feature_cache_dir())
    ids = [t.id for t in dev.tracks]
    for e in (0, len(dev.queries) - 1):
        text = dev.queries[e].text
        out = search(run=run, text=text, k=len(ids), pipeline=PAIRWISE)
        expected = np.argsort(-evaluated.scores[e], kind="stable")
        assert [r["trajectory"] for r in out["results"]] == [ids[i] for i in expected]
        assert [r["score"] for r in out["results"]] == evaluated.scores[e][expected].tolist()   # bit-identical
        assert out["pipeline"] == RetrievalPipeline.from_dict(PAIRWISE).as_dict() and out["reranked"]
        calls = evaluated.report["comparator_requests"]["per_query"][e]
        assert out["comparator_calls"] == calls == out["report"]["comparator_requests"]["total"] >= 3
        assert out["report"]["scorer_requests"]["total"] == 4


def test_bad_pipelines_are_refused_with_a_clear_400(snapshots, trained_dirs, var_dir, make_user, client_for):
    run = finished_run(snapshots, trained_dirs["vtrajembed"])
    client = client_for(make_user("manager", username="boss"))
    body = {"run": run.pk, "text": "a person in a red top", "k": 5}
    for pipeline, words in (({"retrievers": ["bm25"]}, "known: dense, rewrite"),
                            ({"reranker": "pointwise", "weights": {"first_stage": 0.3, "vlm": 0.3}}, "sum to 1"),
                            ({"reranker": "magic"}, "known: none, pairwise, pointwise"),
                            ({"fuse_runs": [987654], "fusion": "combsum"}, "unknown training runs"),
                            ({"reranker": "pointwise", "scorer": {"backend": "heuristic",
                                                                  "settings": {"no_such_setting": 1}}}, "no_such_setting"),
                            ("dense", "JSON object")):
        r = client.post("/api/search/", {**body, "pipeline": pipeline}, format="json")
        assert r.status_code == 400, r.content
        assert r.json()["code"] == "invalid_pipeline" and words in r.json()["message"], r.json()
    r = client.post("/api/search/", {**body, "pipeline": PAIRWISE, "rerank": True}, format="json")
    assert r.status_code == 400 and "not both" in r.json()["message"]
    r = client.post("/api/search/", {**body, "pipeline": PAIRWISE}, format="json")
    assert r.status_code == 200 and r.json()["report"]["comparator_requests"]["total"] >= 3
    # evaluation runs validate the same way, and the random baseline takes none
    for data in ({"snapshot": snapshots["dev"].pk, "training_run": run.pk, "pipeline": {"shortlist": 0}},
                 {"snapshot": snapshots["dev"].pk, "kind": "random", "pipeline": PAIRWISE}):
        r = client.post("/api/evaluation-runs/", data, format="json")
        assert r.status_code == 400 and r.json()["code"] == "invalid_pipeline", r.content
    assert not EvaluationRun.objects.exists()


def test_an_evaluation_run_stores_and_runs_its_pipeline(snapshots, trained_dirs, var_dir):
    run = finished_run(snapshots, trained_dirs["scout"], "scout")
    paper = {"retrievers": ["dense", "rewrite"], "fusion": "dual_view", **PAIRWISE}
    ev, created = evaluation_run_create(snapshot=snapshots["dev"], training_run=run, pipeline=paper, queue=False)
    assert created and ev.pipeline == RetrievalPipeline.from_dict(paper).as_dict()
    assert ev.pipeline_sha256 == RetrievalPipeline.from_dict(paper).sha256()
    ev = evaluation_run_execute(run=ev)
    assert ev.status == "succeeded", ev.error
    report = ev.metrics["pipeline"]
    assert report["rewrite"]["requests"] == report["queries"] == len(RelationSnapshotData.load(snapshots["dev"].path)
                                                                     .queries)
    assert report["comparator_requests"]["total"] == sum(report["comparator_requests"]["per_query"]) > 0
    # the same pipeline again is the same run; plain retrieval is another run of the same snapshot
    again, created = evaluation_run_create(snapshot=snapshots["dev"], training_run=run, pipeline=paper, queue=False)
    assert not created and again.pk == ev.pk
    plain, created = evaluation_run_create(snapshot=snapshots["dev"], training_run=run, queue=False)
    assert created and plain.pk != ev.pk and plain.pipeline == {} and plain.pipeline_sha256 == ""
