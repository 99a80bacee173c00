"""Experiment grids with values of the wrong type or past int64 (issue 27, finding 4): a 400 naming the
field, and no experiment, training run or job written."""
from __future__ import annotations

import pytest

from common.models import Job
from models.experiments.grid import ExperimentSpec
from models.retrievers.pipeline import RetrievalPipeline
from tests.workers.factories import tiny_config
from tests.workers.test_training_api import queued_tasks  # noqa: F401 (fixture)
from workers.models import Experiment, TrainingRun

pytestmark = pytest.mark.django_db


def _post(manager_client, snapshots, grid: dict):
    body = {"snapshot": snapshots["train"].pk, "eval_snapshot": snapshots["dev"].pk,
            "grid": {"preset": "vtrajembed-table3", "variants": ["without_slow"], "seeds": [0],
                     "base": tiny_config(steps=2), **grid}}
    return manager_client.post("/api/experiments/", body, format="json")


@pytest.mark.parametrize("confidence", ["x", None, True, [0.9], {"v": 0.9}, 0.3, 1.0])
def test_a_confidence_that_is_not_a_number_in_range_is_a_400(manager_client, snapshots, queued_tasks,  # noqa: F811
                                                             confidence):
    response = _post(manager_client, snapshots, {"confidence": confidence})
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_experiment" and "confidence" in response.json()["message"]
    assert not Experiment.objects.exists() and not TrainingRun.objects.exists() and not Job.objects.exists()
    assert not queued_tasks


@pytest.mark.parametrize("fuse_runs, field", [([2**70], "grid.fuse_runs[0]"), ([1, -(2**64)], "grid.fuse_runs[1]")])
def test_fuse_runs_past_int64_are_a_400_naming_the_field(manager_client, snapshots, queued_tasks,  # noqa: F811
                                                         fuse_runs, field):
    response = _post(manager_client, snapshots, {"preset": "scout-rerank", "variants": ["first_stage"],
                                                 "fuse_runs": fuse_runs})
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["code"], body["extra"]["field"]) == ("out_of_range", field)
    assert not Experiment.objects.exists() and not TrainingRun.objects.exists() and not queued_tasks


def test_the_grid_and_the_pipeline_refuse_them_without_the_request_edge_too():
    with pytest.raises(ValueError, match="confidence must be a number"):
        ExperimentSpec(model_kind="vtrajembed", variants={"full": {}}, reference="full", confidence="x")
    with pytest.raises(ValueError, match="fuse_runs must be training run ids"):
        RetrievalPipeline(fuse_runs=(2**63,), fusion="combsum")
    assert RetrievalPipeline(fuse_runs=(2**63 - 1,), fusion="combsum").fuse_runs == (2**63 - 1,)
