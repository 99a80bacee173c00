"""The version of the defaults a run reads (``models.training.defaults``) and how an experiment
table shows a mix of versions (``models.experiments.table``)."""
from __future__ import annotations

import csv
import io

import pytest

from models.experiments.table import CSV_COLUMNS, experiment_table, table_csv
from models.retrievers.registry import RETRIEVERS
from models.training.defaults import (
    UNRECORDED,
    defaults_label,
    defaults_order,
    defaults_version,
    same_defaults,
)
from models.training.trainer import TrainConfig


def test_every_kind_keeps_a_version_beside_its_defaults_outside_its_config_fields():
    for kind, entry in RETRIEVERS.items():
        record = defaults_version(kind)
        assert record == {"model_kind": kind, "model": entry.config.DEFAULTS_VERSION,
                          "train": TrainConfig.DEFAULTS_VERSION}
        assert record["model"] >= 1 and "DEFAULTS_VERSION" not in entry.config.from_dict({}).as_dict()
    assert "DEFAULTS_VERSION" not in TrainConfig().as_dict()
    with pytest.raises(ValueError, match="unknown model kind 'clip'"):
        defaults_version("clip")


def test_labels_order_and_sameness():
    v1 = {"model_kind": "scout", "model": 1, "train": 1, "commit": "a"}
    v2 = {"model_kind": "scout", "model": 2, "train": 1, "commit": "b"}
    resumed = {**v2, "resumed_over": v1}
    assert defaults_label(v1) == "scout v1, train v1" and defaults_label({}) == defaults_label(None) == UNRECORDED
    assert defaults_label(resumed) == "scout v2, train v1 resumed over scout v1, train v1"
    assert sorted([v2, {}, resumed, v1], key=defaults_order) == [{}, v1, resumed, v2]
    assert same_defaults(v1, {**v1, "commit": "c"}) and not same_defaults(v1, v2) and not same_defaults(v1, {})


def _cells(defaults: dict[tuple[str, int], dict]) -> list[dict]:
    task = {"id": [1, 2], "stratum": ["2", "2"], "R@1": [1.0, 0.0], "R@3": [1.0, 1.0], "AP": [1.0, 0.5]}
    return [{"variant": v, "seed": s, "rows": {"t2traj": task, "traj2t": task, "ocvr": task}, "defaults": d}
            for (v, s), d in defaults.items()]


def test_a_table_of_one_version_says_which():
    v1 = {"model_kind": "vtrajembed", "model": 1, "train": 1, "commit": "a"}
    table = experiment_table(_cells({("full", 0): v1, ("full", 1): v1, ("b", 0): v1, ("b", 1): v1}),
                             variants=["full", "b"], reference="full", n_resamples=200)
    assert table["defaults"]["versions"] == ["vtrajembed v1, train v1"] and not table["defaults"]["mixed"]
    assert table["defaults"]["note"] == "defaults of version vtrajembed v1, train v1"
    rows = table["tables"][0]["rows"]
    assert all(r["defaults"] == ["vtrajembed v1, train v1"] * 2 and r["older_defaults"] is False for r in rows)


def test_an_old_run_beside_new_ones_is_marked():
    new = {"model_kind": "vtrajembed", "model": 2, "train": 1, "commit": "b"}
    # variant b's seed 1 is a run from before versions were kept; everything else ran on v2
    table = experiment_table(_cells({("full", 0): new, ("full", 1): new, ("b", 0): new, ("b", 1): {}}),
                             variants=["full", "b"], reference="full", n_resamples=200)
    summary = table["defaults"]
    assert summary["mixed"] and summary["versions"] == [UNRECORDED, "vtrajembed v2, train v1"]
    assert summary["note"].startswith("defaults of versions unrecorded; vtrajembed v2, train v1: this table mixes "
                                      "versions")
    rows = {r["variant"]: r for r in table["tables"][0]["rows"]}
    assert rows["b"]["older_defaults"] and rows["b"]["defaults"] == ["vtrajembed v2, train v1", UNRECORDED]
    assert not rows["full"]["older_defaults"]
    lines = list(csv.reader(io.StringIO(table_csv(table))))
    assert tuple(lines[0]) == CSV_COLUMNS
    line = dict(zip(lines[0], next(x for x in lines if x[3] == "b"), strict=True))
    assert line["older_defaults"] == "yes" and line["defaults"] == "vtrajembed v2, train v1 | unrecorded"
