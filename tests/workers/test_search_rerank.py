"""``rerank=True`` on an ActPair run trained with its pairwise head: search reranks with the head
through the one pipeline executor, exactly as an evaluation of the same pipeline ranks."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from models.retrievers.pipeline import RetrievalPipeline
from models.training.evaluation import snapshot_pipeline
from models.training.snapshot import RelationSnapshotData
from models.training.trainer import load_model, train
from tests.workers.factories import tiny_config
from workers import search as search_module
from workers.folders import feature_cache_dir
from workers.models import RunStatus, TrainingRun
from workers.search import RERANK_DEPTH, search, search_pipeline

pytestmark = pytest.mark.django_db
ACTPAIR = {"model": {"d_model": 32, "d_embed": 32, "n_layers": 1, "n_heads": 4, "ff_mult": 2, "n_actions": 6},
           "features": {"n_fast_max": 6},
           "pairwise": {"enabled": True, "hidden": 16, "steps": 30, "batch_size": 16, "n_negatives": 4}}


@pytest.fixture(scope="module")
def actpair_dir(tiny_benchmark_dir, tmp_path_factory):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("actpair")
    data = RelationSnapshotData.load(tiny_benchmark_dir / "snapshots" / "train")
    config = tiny_config(steps=4, model=ACTPAIR, cache_dir=str(root / "features"), batching={"noisy_gt": False})
    result = train(data, "actpair", config, root / "run")
    torch.set_num_threads(before)
    assert result["after_training"]["pairwise_head"]["pairs"] > 0
    return root / "run"


@pytest.fixture(autouse=True)
def fresh_process_caches():
    search_module._loaded.clear()
    yield
    search_module._loaded.clear()


def test_rerank_uses_the_runs_pairwise_head_as_evaluation_does(snapshots, actpair_dir, var_dir):
    run = TrainingRun.objects.create(snapshot=snapshots["train"], eval_snapshot=snapshots["dev"],
                                     model_kind="actpair", config=tiny_config(model=ACTPAIR), steps_total=4,
                                     steps_done=4, out_dir=str(actpair_dir), status=RunStatus.SUCCEEDED)
    dev = RelationSnapshotData.load(snapshots["dev"].path)
    pipeline = search_pipeline(fuse_with=[], rerank=True, pairwise_head=True)
    assert pipeline["comparator"] == {"kind": "pairwise-head"} and pipeline["shortlist"] == RERANK_DEPTH
    model, _ = load_model(actpair_dir)
    evaluated = snapshot_pipeline(model, dev, pipeline, cache_dir=feature_cache_dir())
    ids = [t.id for t in dev.tracks]
    for e in (0, len(dev.queries) - 1):
        out = search(run=run, text=dev.queries[e].text, k=len(ids), rerank=True)
        assert out["pipeline"] == RetrievalPipeline.from_dict(pipeline).as_dict() and out["reranked"]
        expected = np.argsort(-evaluated.scores[e], kind="stable")
        assert [r["trajectory"] for r in out["results"]] == [ids[i] for i in expected]
        m = min(RERANK_DEPTH, len(ids))
        calls = evaluated.report["comparator_requests"]["per_query"][e]
        assert out["comparator_calls"] == calls and m - 1 <= calls <= m * (m - 1) // 2
        assert out["report"]["model_requests"]["total"] == calls
        assert "description" not in out["results"][0]              # the head reads embeddings, no text
    # without rerank the same run ranks by the first stage alone
    plain = search(run=run, text=dev.queries[0].text, k=5)
    assert not plain["reranked"] and plain["comparator_calls"] == 0
