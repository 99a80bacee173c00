"""The paired bootstrap of DESIGN 5, the experiment grid (presets, variants, seeds, merging) and the
experiment table (means and spread over seeds, differences from the reference and their intervals)."""
from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest

from models.experiments.grid import PRESETS, ExperimentSpec, merge, spec_from_request
from models.experiments.table import CSV_COLUMNS, experiment_table, table_csv
from models.metrics import paired_bootstrap
from models.training.metrics import evaluate_rankings, protocol_rows


# -- paired bootstrap -----------------------------------------------------------------------------------
def test_the_paired_bootstrap_follows_the_contract():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, 200).astype(float)
    b = np.where(rng.random(200) < 0.2, 1.0, a)                  # b fixes a fifth of a's misses
    out = paired_bootstrap(a, b, n_resamples=4000, seed=7)
    assert out["delta"] == pytest.approx(float((b - a).mean()))
    assert out["low"] <= out["delta"] <= out["high"] and out["low"] > 0 and out["n"] == 200
    assert out["p_value"] < 0.01
    assert paired_bootstrap(a, b, n_resamples=4000, seed=7) == out            # deterministic for a seed
    x, y = rng.random(50), rng.random(50)
    assert paired_bootstrap(x, y, n_resamples=500, seed=1)["low"] != paired_bootstrap(x, y, n_resamples=500, seed=2)["low"]
    # the interval is the percentile interval of the resampled mean differences
    d = b - a
    idx = np.random.default_rng(7).integers(0, 200, size=(4000, 200))
    low, high = np.quantile(d[idx].mean(axis=1), [0.025, 0.975])
    assert (out["low"], out["high"]) == pytest.approx((low, high))


def test_the_paired_bootstrap_of_identical_and_shifted_systems():
    a = np.linspace(0, 1, 50)
    same = paired_bootstrap(a, a, n_resamples=500)
    assert same["delta"] == same["low"] == same["high"] == 0.0 and same["p_value"] == 1.0
    shifted = paired_bootstrap(a, a + 0.25, n_resamples=500)
    assert shifted["low"] == pytest.approx(0.25) and shifted["high"] == pytest.approx(0.25)
    assert shifted["p_value"] == 0.0
    wider = paired_bootstrap(a, a[::-1], n_resamples=2000, confidence=0.99)
    narrower = paired_bootstrap(a, a[::-1], n_resamples=2000, confidence=0.8)
    assert wider["low"] <= narrower["low"] <= narrower["high"] <= wider["high"]


@pytest.mark.parametrize(("a", "b", "kwargs", "words"), [
    ([1.0, 0.0], [1.0], {}, "same length"),
    ([], [], {}, "empty"),
    ([1.0, math.nan], [1.0, 0.0], {}, "finite"),
    ([1.0, 0.0], [1.0, math.inf], {}, "finite"),
    ([[1.0]], [[1.0]], {}, "1-D"),
    ([1.0], [0.0], {"n_resamples": 0}, "n_resamples"),
    ([1.0], [0.0], {"confidence": 1.0}, "confidence"),
])
def test_bad_bootstrap_input_is_a_value_error(a, b, kwargs, words):
    with pytest.raises(ValueError, match=words):
        paired_bootstrap(a, b, **kwargs)


def test_protocol_rows_average_to_the_protocol_figures():
    rng = np.random.default_rng(0)
    sim = rng.normal(size=(12, 9))
    relation = rng.choice([1, 0, 0, -1], size=(12, 9))
    track_video = np.array([1, 1, 1, 2, 2, 3, 3, 3, 3])
    query_video = rng.choice([1, 2, 3], size=12)
    rows = protocol_rows(sim, relation, track_video, query_video)
    traj2t = rows["traj2t"]
    figures = evaluate_rankings(sim.T[traj2t["row"]], relation.T[traj2t["row"]])
    assert 100 * np.mean(traj2t["R@1"]) == pytest.approx(figures["R@1"])
    assert 100 * np.mean(traj2t["AP"]) == pytest.approx(figures["mAP"])
    assert set(rows) == {"t2traj", "traj2t", "ocvr"}
    for task in rows.values():
        assert len(task["row"]) == len(task["stratum"]) == len(task["R@3"]) and set(task["stratum"]) <= {
            "<2", "2", "3-5", "6-10", ">10"}


# -- the grid -------------------------------------------------------------------------------------------
def test_the_table3_preset_and_its_cells():
    spec = spec_from_request({"preset": "vtrajembed-table3", "base": {"steps": 5, "model": {"d_model": 32}}})
    assert list(spec.variants) == ["full", "without_slow", "without_fast", "obs16", "without_lbi", "without_lgroup"]
    assert spec.reference == "full" and spec.seeds == (0, 1, 2) and spec.model_kind == "vtrajembed"
    cells = spec.cells()
    assert len(cells) == 18 and [c[:2] for c in cells[:3]] == [("full", 0), ("full", 1), ("full", 2)]
    by = {(v, s): c for v, s, c, _ in cells}
    assert by[("obs16", 1)] == {"steps": 5, "seed": 1, "model": {"d_model": 32, "features": {"n_fast_max": 16}}}
    assert by[("without_slow", 2)]["model"] == {"d_model": 32, "use_slow": False}
    assert by[("full", 0)] == {"steps": 5, "seed": 0, "model": {"d_model": 32}}


def test_a_subset_of_a_preset_always_keeps_its_reference_and_merges_deeply():
    spec = spec_from_request({"preset": "vtrajembed-table3", "variants": ["without_lbi"], "seeds": [4],
                              "base": {"model": {"features": {"n_slow_budget": 2}}}})
    assert list(spec.variants) == ["full", "without_lbi"]
    assert spec.cells()[1][2] == {"seed": 4, "model": {"features": {"n_slow_budget": 2}, "lambda_bi": 0.0}}
    assert merge({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}, "d": 4}) == {"a": {"b": 1, "c": 3}, "d": 4}
    custom = spec_from_request({"model_kind": "scout", "reference": "b32",
                                "variants": {"b32": {"batch_size": 32}, "b128": {"batch_size": 128}}})
    assert [c[2]["batch_size"] for c in custom.cells()] == [32, 32, 32, 128, 128, 128]


@pytest.mark.parametrize(("request_", "words"), [
    ({"preset": "table9"}, "unknown preset 'table9'; known: actpair-encoders, actpair-rerank, actpair-views, scout-batch-sweep, scout-encoders, scout-rerank, vtrajembed-encoders, vtrajembed-table3"),
    ({"preset": "vtrajembed-table3", "variants": ["without_slwo"]}, "unknown variant(s) 'without_slwo'"),
    ({"preset": "vtrajembed-table3", "model_kind": "scout"}, "is for vtrajembed"),
    ({"preset": "vtrajembed-table3", "seeds": [0, 0]}, "must not repeat"),
    ({"preset": "vtrajembed-table3", "seeds": []}, "seeds must list"),
    ({"preset": "vtrajembed-table3", "seeds": [-1]}, "integers >= 0"),
    ({"preset": "vtrajembed-table3", "base": {"seed": 3}}, "set per cell"),
    ({"preset": "vtrajembed-table3", "base": [1]}, "base must be an object"),
    ({"preset": "vtrajembed-table3", "colour": 1}, "unknown key(s) colour"),
    ({"model_kind": "vtrajembed", "variants": {"a": {}}, "reference": "b"}, "reference 'b' is not one of"),
    ({"model_kind": "vtrajembed", "variants": ["full"]}, "needs a preset"),
    ({"model_kind": "vtrajembed", "variants": {"Bad Name": {}}, "reference": "Bad Name"}, "variant name"),
    ({"model_kind": "vtrajembed", "variants": {"a": {"seed": 1}}, "reference": "a"}, "set per cell"),
    ({"variants": {"a": {}}, "reference": "a"}, "model_kind is required"),
    ({"preset": "vtrajembed-table3", "seeds": list(range(64)), "variants": {f"v{i}": {} for i in range(9)}},
     "more than 512 runs"),
])
def test_bad_grids_are_refused_with_a_reason(request_, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        spec_from_request(request_)


def test_presets_are_valid_specs_whose_stored_form_keeps_the_variant_order():
    for preset in PRESETS.values():
        spec = ExperimentSpec.from_dict({"model_kind": preset.model_kind, "variants": preset.variants,
                                         "reference": preset.reference, "pipeline": preset.pipeline})
        stored = json.loads(json.dumps(spec.stored(), sort_keys=True))
        assert list(ExperimentSpec.from_dict(stored).variants) == list(preset.variants)


def test_the_scout_preset_fuses_only_when_given_runs_to_fuse_with():
    alone = spec_from_request({"preset": "scout-rerank"})
    assert list(alone.variants) == ["first_stage", "vlm", "itm", "full_blend"]
    assert all("fusion" not in p and "fuse_runs" not in p for *_, p in alone.cells())
    fused = spec_from_request({"preset": "scout-rerank", "fuse_runs": [7, 9]})
    assert list(fused.variants) == ["first_stage", "combsum", "rrf", "vlm", "itm", "full_blend"]
    pipelines = {v: p for v, _, _, p in fused.cells()}
    assert pipelines["first_stage"] == {"shortlist": 20}
    assert pipelines["combsum"] == {"shortlist": 20, "fusion": "combsum", "fuse_runs": [7, 9]}
    assert pipelines["full_blend"]["fuse_runs"] == [7, 9] and pipelines["full_blend"]["reranker"] == "pointwise"
    with pytest.raises(ValueError, match="fuse_runs must be a list"):
        spec_from_request({"preset": "actpair-views", "fuse_runs": [7]})


def test_pipeline_variants_split_from_training_overrides():
    spec = spec_from_request({"preset": "actpair-rerank", "seeds": [0, 1]})
    cells = {(v, s): (c, p) for v, s, c, p in spec.cells()}
    # one training (with the pairwise head) per seed, shared by the three pipelines
    assert cells[("pairwise", 1)][0] == cells[("pointwise", 1)][0] == cells[("dual_view", 1)][0] == {
        "model": {"pairwise": {"enabled": True}}, "seed": 1}
    assert cells[("pairwise", 0)][1]["reranker"] == "pairwise" and cells[("pairwise", 0)][1]["fusion"] == "dual_view"
    assert cells[("dual_view", 0)][1] == PRESETS["actpair-rerank"].pipeline


# -- the table ------------------------------------------------------------------------------------------
def _rows(values: dict[str, list[float]], strata: list[str]) -> dict:
    ids = list(range(100, 100 + len(strata)))
    task = {"id": ids, "stratum": strata, "R@1": values["R@1"], "R@3": values["R@3"], "R@5": values["R@3"],
            "R@10": values["R@3"], "AP": values["AP"], "AP@10": values["AP"]}
    return {"t2traj": task, "traj2t": task, "ocvr": task}


def test_the_table_reports_mean_spread_delta_and_interval():
    strata = ["2", "2", "3-5", "3-5"]
    full = [_rows({"R@1": [1, 1, 1, 0], "R@3": [1, 1, 1, 1], "AP": [1, 1, 0.5, 0.5]}, strata),
            _rows({"R@1": [1, 1, 0, 0], "R@3": [1, 1, 1, 1], "AP": [1, 1, 0.5, 0.25]}, strata)]
    ablated = [_rows({"R@1": [0, 1, 0, 0], "R@3": [1, 1, 0, 1], "AP": [0.5, 1, 0.25, 0.25]}, strata),
               _rows({"R@1": [0, 0, 0, 0], "R@3": [1, 0, 1, 1], "AP": [0.5, 0.5, 0.5, 0.25]}, strata)]
    cells = [{"variant": "full", "seed": s, "rows": r} for s, r in enumerate(full)] + \
            [{"variant": "without_slow", "seed": s, "rows": r} for s, r in enumerate(ablated)]
    table = experiment_table(cells, variants=["full", "without_slow", "without_fast"], reference="full",
                             n_resamples=2000)
    blocks = {(b["task"], b["metric"], b["stratum"]): {r["variant"]: r for r in b["rows"]} for b in table["tables"]}
    assert {k[2] for k in blocks} == {"all", "2", "3-5"} and {k[1] for k in blocks} == {"R@1", "R@3", "mAP"}
    r1 = blocks[("t2traj", "R@1", "all")]
    assert r1["full"]["values"] == [75.0, 50.0] and r1["full"]["mean"] == 62.5
    assert r1["full"]["std"] == pytest.approx(np.std([75.0, 50.0], ddof=1)) and r1["full"]["delta"] is None
    assert r1["without_slow"]["mean"] == 12.5 and r1["without_slow"]["delta"] == -50.0
    assert r1["without_slow"]["low"] <= -50.0 <= r1["without_slow"]["high"] and r1["without_slow"]["n_queries"] == 4
    # the per-query pairing: each query's value averaged over seeds, then the bootstrap of the differences
    a, b = np.array([1, 1, 0.5, 0]), np.array([0, 0.5, 0, 0])
    boot = paired_bootstrap(a, b, n_resamples=2000)
    assert (r1["without_slow"]["low"], r1["without_slow"]["high"]) == pytest.approx((100 * boot["low"], 100 * boot["high"]))
    stratum = blocks[("t2traj", "R@1", "2")]
    assert stratum["full"]["values"] == [100.0, 100.0] and stratum["without_slow"]["delta"] == -75.0
    assert blocks[("ocvr", "mAP", "all")]["full"]["mean"] == pytest.approx(100 * np.mean([1, 1, .5, .5, 1, 1, .5, .25]))
    missing = r1["without_fast"]
    assert missing["n_seeds"] == 0 and math.isnan(missing["mean"]) and missing["delta"] is None
    # the CSV has one line per (task, metric, stratum, variant)
    lines = list(csv.reader(io.StringIO(table_csv(table))))
    assert tuple(lines[0]) == CSV_COLUMNS and len(lines) == 1 + 3 * 3 * 3 * 3
    row = next(line for line in lines if line[:4] == ["t2traj", "R@1", "all", "without_slow"])
    assert row[6] == "12.5000" and row[9] == "-50.0000" and row[8] == "25.0000 0.0000"


def test_differences_pair_the_seeds_both_variants_finished():
    strata = ["2", "2"]
    ref = {0: _rows({"R@1": [1, 1], "R@3": [1, 1], "AP": [1, 1]}, strata),
           1: _rows({"R@1": [0, 0], "R@3": [1, 1], "AP": [0.5, 0.5]}, strata)}
    var = {1: _rows({"R@1": [1, 0], "R@3": [1, 1], "AP": [1, 0.5]}, strata)}          # seed 0 never finished
    cells = [{"variant": "full", "seed": s, "rows": r} for s, r in ref.items()] + \
            [{"variant": "ablated", "seed": s, "rows": r} for s, r in var.items()]
    table = experiment_table(cells, variants=["full", "ablated"], reference="full", n_resamples=500)
    rows = {r["variant"]: r for r in table["tables"][0]["rows"]}
    assert rows["full"]["mean"] == 50.0 and rows["ablated"]["mean"] == 50.0
    # against the reference's seed 1 alone (0 %), not its two-seed mean (50 %)
    assert rows["ablated"]["paired_seeds"] == 1 and rows["ablated"]["delta"] == 50.0
    boot = paired_bootstrap(np.array([0.0, 0.0]), np.array([1.0, 0.0]), n_resamples=500)
    assert (rows["ablated"]["low"], rows["ablated"]["high"]) == pytest.approx((100 * boot["low"], 100 * boot["high"]))
