"""The Experiments screen in real Chromium against a live server on PostgreSQL, as the demo manager:
an experiment is declared from the form (a server refusal shown by the button and nothing queued;
then a Table 3 subset over two seeds queued as training runs) and cancelled only after a
confirmation; and a finished experiment's result table
shows each variant's mean ± std and its difference from the reference with the paired-bootstrap
interval, marked when the interval excludes 0, per task and stratum.

The snapshots are the tiny rendered benchmark's (``models.demo.benchmark``), registered as sealed
rows. The finished experiment's table is computed by ``models.experiments.table.experiment_table``
from per-query values made up here, so the figures the page must show are known."""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.demo.builders import DEMO_PASSWORD, demo_users_ensure
from models.demo.benchmark import build_demo_benchmark
from models.experiments.table import experiment_table
from tests.browser.conftest import nav
from tests.workers.factories import TINY_BENCHMARK, register_snapshot
from workers.models import Experiment, TrainingRun
from workers.training import json_safe

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINUS = "\u2212"
VARIANTS = ["full", "without_slow", "obs16"]


@pytest.fixture(scope="module")
def tiny_benchmark(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-benchmark")
    build_demo_benchmark(root, TINY_BENCHMARK)
    return root


@pytest.fixture
def snapshots(transactional_db, tiny_benchmark) -> dict:
    demo_users_ensure()
    return {split: register_snapshot(tiny_benchmark / "snapshots" / split) for split in ("train", "dev")}


def pct(value: float) -> str:
    """A figure as the page writes it: one decimal, halves rounded up (JavaScript's toFixed), U+2212."""
    text = str(Decimal(abs(value)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP))
    return f"{MINUS}{text}" if value < 0 and float(text) != 0 else text


def signed(value: float) -> str:
    text = pct(value)
    return text if text.startswith(MINUS) or float(text) == 0 else f"+{text}"


def test_a_manager_declares_an_experiment_and_cancels_it_after_confirming(open_page, snapshots, shot):
    page = open_page("manager", DEMO_PASSWORD)
    nav(page, "Experiments")
    expect(page.get_by_text("No experiments yet")).to_be_visible()
    form = page.get_by_role("form", name="Run an experiment")
    expect(form.get_by_label("Preset")).to_have_value("vtrajembed-table3")
    reference = form.get_by_role("checkbox", name="full (reference)")
    expect(reference).to_be_checked()
    expect(reference).to_be_disabled()
    for variant in ("without_fast", "obs16", "without_lbi", "without_lgroup"):
        form.get_by_role("checkbox", name=variant, exact=True).uncheck()
    expect(form.get_by_role("checkbox", name="without_slow", exact=True)).to_be_checked()
    expect(form.get_by_label("Train on")).to_have_value(str(snapshots["train"].pk))
    expect(form.get_by_label("Evaluate on")).to_have_value(str(snapshots["dev"].pk))
    expect(form.get_by_label("Seeds")).to_have_value("0, 1, 2")
    submit = form.get_by_role("button", name=re.compile("^Run the experiment"))
    expect(submit).to_have_text("Run the experiment (6 training runs)")

    # Seeds that are not whole numbers are refused before sending; a repeated seed by the server.
    form.get_by_label("Seeds").fill("0, one")
    expect(submit).to_be_disabled()
    expect(form.get_by_role("alert")).to_contain_text("not “one”")
    form.get_by_label("Seeds").fill("0, 0")
    form.get_by_label("Base steps").fill("3")
    submit.click()
    refusal = form.locator(".form-actions").get_by_role("alert")
    expect(refusal).to_contain_text("seeds must not repeat")
    expect(refusal).to_contain_text("invalid_experiment")
    assert not Experiment.objects.exists() and not TrainingRun.objects.exists()
    shot(page, "50-experiment-refused")

    form.get_by_label("Seeds").fill("0, 1")
    form.get_by_label("Name").fill("slow ablation")
    expect(submit).to_have_text("Run the experiment (4 training runs)")
    submit.click()
    page.wait_for_url(re.compile(r".*/manage/experiments/\d+$"))
    experiment = Experiment.objects.get()
    assert page.url.endswith(f"/manage/experiments/{experiment.pk}")
    assert experiment.name == "slow ablation" and experiment.cells_total == 4
    cells = {(r.variant, r.config["seed"]): r for r in experiment.runs.all()}
    assert set(cells) == {("full", 0), ("full", 1), ("without_slow", 0), ("without_slow", 1)}
    assert all(r.config["steps"] == 3 and r.status == "queued" for r in cells.values())
    assert cells[("without_slow", 1)].config["model"]["use_slow"] is False

    expect(page.get_by_role("heading", level=1)).to_have_text(f"Experiment {experiment.pk}")
    expect(page.get_by_text(experiment.snapshot_sha256[:12])).to_be_visible()
    expect(page.get_by_text(experiment.eval_snapshot_sha256[:12])).to_be_visible()
    table = page.get_by_role("table", name="Cells: a variant and seed each (variants that differ only in their pipeline share a training run)")
    expect(table.get_by_role("row")).to_have_count(5)
    first = table.get_by_role("row").nth(1)
    expect(first).to_contain_text("full")
    expect(first).to_contain_text("queued")
    expect(first).to_contain_text("0 of 3")
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()
    expect(page.get_by_text("No figures yet")).to_be_visible()
    expect(page.get_by_role("link", name="Download CSV")).to_have_count(0)

    # Cancel asks first; keeping it running changes nothing.
    page.get_by_role("button", name="Cancel…").click()
    dialog = page.get_by_role("dialog", name=f"Cancel experiment {experiment.pk}?")
    expect(dialog).to_contain_text("Its 4 unfinished cells stop")
    shot(page, "51-experiment-cancel-confirm")
    dialog.get_by_role("button", name="Keep running").click()
    expect(dialog).to_be_hidden()
    assert set(experiment.runs.values_list("status", flat=True)) == {"queued"}

    page.get_by_role("button", name="Cancel…").click()
    dialog.get_by_role("button", name="Cancel the cells").click()
    expect(page.get_by_role("status").filter(has_text="Cancel requested")).to_be_visible()
    expect(page.locator(".tiles .badge.status-cancelled")).to_be_visible()
    assert set(experiment.runs.values_list("status", flat=True)) == {"cancelled"}
    expect(page.get_by_role("button", name="Resume")).to_be_enabled()
    expect(page.get_by_role("button", name="Cancel…")).to_be_disabled()

    nav(page, "Experiments")
    row = page.get_by_role("row", name=re.compile(f"^Experiment {experiment.pk}"))
    expect(row).to_contain_text("slow ablation")
    expect(row).to_contain_text("vtrajembed-table3")
    expect(row).to_contain_text("cancelled")
    expect(row).to_contain_text("0 / 4")


def _rows(rng, base: np.ndarray, flips_down: int = 0, flips_up: int = 0) -> dict:
    """Per-query values of one evaluation (``snapshot_rows``' shape) for every task: 40 rows, the
    strata "2" and "3-5" alternating; R@1 is ``base`` with some hits turned into misses and back."""
    hits = base.copy()
    ones, zeros = np.flatnonzero(hits == 1), np.flatnonzero(hits == 0)
    hits[rng.choice(ones, flips_down, replace=False)] = 0
    hits[rng.choice(zeros, flips_up, replace=False)] = 1
    r3 = np.maximum(hits, (rng.random(len(hits)) < 0.5).astype(float))
    ap = np.clip(0.5 * hits + 0.5 * r3 - 0.1 * rng.random(len(hits)), 0, 1)
    one = {"id": list(range(1, len(hits) + 1)), "stratum": ["2" if i % 2 else "3-5" for i in range(len(hits))],
           "R@1": hits.tolist(), "R@3": r3.tolist(), "AP": ap.tolist()}
    return {task: dict(one) for task in ("t2traj", "traj2t", "ocvr")}


V1 = {"model_kind": "vtrajembed", "model": 1, "train": 1, "commit": "5f3e2d1c0b9a8f7e6d5c"}


def _finished_experiment(snapshots, manager) -> Experiment:
    """A succeeded experiment over VARIANTS × seeds 0, 1 whose table is computed from made-up rows:
    without_slow misses most of full's hits (its interval excludes 0), obs16 differs from full in
    both directions (its interval holds 0). Evaluated on a second row of the train snapshot, so
    its figures are stamped train-split."""
    again = register_snapshot(Path(snapshots["train"].path))
    rng = np.random.default_rng(7)
    base = (rng.random(40) < 0.75).astype(float)
    code = {"trajlab_commit": "5f3e2d1c0b9a8f7e6d5c", "trajlab_dirty": False, "torch": "2.5.1", "numpy": "2.1.0"}
    experiment = Experiment.objects.create(
        name="table 3", preset="vtrajembed-table3", model_kind="vtrajembed",
        spec={"model_kind": "vtrajembed", "reference": "full", "variants": {v: {} for v in VARIANTS}, "seeds": [0, 1]},
        snapshot=snapshots["train"], eval_snapshot=again, snapshot_sha256=snapshots["train"].content_sha256,
        eval_snapshot_sha256=again.content_sha256, code_version=code, stamps=["train-split"], defaults_version=V1,
        status="succeeded", cells_done=6, cells_total=6, created_by=manager, finished_at=timezone.now())
    cells, ids = [], []
    for variant in VARIANTS:
        for seed in (0, 1):
            run = TrainingRun.objects.create(
                snapshot=snapshots["train"], eval_snapshot=again, model_kind="vtrajembed", status="succeeded",
                config={"steps": 3, "seed": seed}, steps_total=3, steps_done=3, experiment=experiment, variant=variant)
            ids.append(run.pk)
            flips = {"full": (seed, 0), "without_slow": (20, 0), "obs16": (2 + seed, 2)}[variant]
            old = variant == "obs16" and seed == 1          # a run from before defaults were versioned
            cells.append({"variant": variant, "seed": seed, "rows": _rows(rng, base, *flips), "defaults": {} if old else V1})
    table = experiment_table(cells, variants=VARIANTS, reference="full", n_resamples=2000)
    experiment.result = json_safe(table | {"runs": sorted(ids), "stamps": ["train-split"],
                                           "snapshot_sha256": experiment.snapshot_sha256,
                                           "eval_snapshot_sha256": experiment.eval_snapshot_sha256,
                                           "code_version": code})
    experiment.save(update_fields=["result"])
    return experiment


def _block(experiment: Experiment, task: str, metric: str, stratum: str) -> dict:
    for block in experiment.result["tables"]:
        if (block["task"], block["metric"], block["stratum"]) == (task, metric, stratum):
            return {r["variant"]: r for r in block["rows"]}
    raise AssertionError(f"no block {task} {metric} {stratum}")


def _expect_row(table, experiment: Experiment, task: str, stratum: str, variant: str) -> None:
    row = table.get_by_role("row", name=re.compile(f"^{variant}"))
    older = _block(experiment, task, "R@1", stratum)[variant]["older_defaults"]
    if older:
        expect(row).to_have_attribute("data-older-defaults", "true")
    else:
        expect(row).not_to_have_attribute("data-older-defaults", "true")
    for metric in ("R@1", "R@3", "mAP"):
        figures = _block(experiment, task, metric, stratum)[variant]
        cell = row.locator(f'td[data-metric="{metric}"]')
        expect(cell.locator(".mean-std")).to_have_text(f"{pct(figures['mean'])} ± {pct(figures['std'])}")
        if figures["reference"]:
            expect(cell.locator(".delta")).to_have_count(0)
            continue
        delta = f"Δ {signed(figures['delta'])} [{signed(figures['low'])}, {signed(figures['high'])}]"
        expect(cell.locator(".delta")).to_contain_text(delta)
        excluded = figures["low"] > 0 or figures["high"] < 0
        hier = f"seeds+queries [{signed(figures['hier_low'])}, {signed(figures['hier_high'])}]"
        expect(cell.locator(".hier-interval")).to_have_text(hier)
        expect(cell).to_have_attribute("data-excludes-zero", "true" if excluded else "false")
        expect(cell).to_have_attribute("title", re.compile(f"· p (=|<) .* · {figures['n_queries']} queries paired with full"))


def test_a_finished_experiments_table_shows_the_intervals(open_page, snapshots, shot):
    from django.contrib.auth import get_user_model

    experiment = _finished_experiment(snapshots, get_user_model().objects.get(username="manager"))
    r1 = _block(experiment, "t2traj", "R@1", "all")
    assert r1["without_slow"]["high"] < 0, "the made-up rows should make without_slow's drop significant"
    assert r1["obs16"]["low"] < 0 < r1["obs16"]["high"], "obs16's interval should hold 0"

    page = open_page("manager", DEMO_PASSWORD)
    nav(page, "Experiments")
    row = page.get_by_role("row", name=re.compile(f"^Experiment {experiment.pk}"))
    expect(row).to_contain_text("6 / 6")
    row.get_by_role("link", name=f"Experiment {experiment.pk}").click()
    page.wait_for_url(f"**/manage/experiments/{experiment.pk}")

    expect(page.locator(".warning.stamped")).to_contain_text("Figures stamped train-split")
    expect(page.get_by_text("5f3e2d1c0b", exact=True)).to_be_visible()
    expect(page.get_by_text("vtrajembed v1, train v1", exact=True)).to_be_visible()
    expect(page.locator(".defaults-mixed")).to_contain_text("this table mixes versions")
    assert experiment.result["defaults"]["mixed"], "obs16's seed 1 should be an unrecorded run"
    expect(page.get_by_role("button", name="Resume")).to_be_disabled()
    expect(page.get_by_role("button", name="Cancel…")).to_be_disabled()
    csv = page.get_by_role("link", name="Download CSV")
    expect(csv).to_have_attribute("href", f"/api/experiments/{experiment.pk}/table.csv")
    body = page.request.get(csv.get_attribute("href")).text()
    assert body.splitlines()[0].startswith("task,metric,stratum,variant,reference")

    table = page.get_by_role("table", name=re.compile(r"^T2Traj · all queries"))
    expect(table.get_by_role("row")).to_have_count(4)
    for variant in VARIANTS:
        _expect_row(table, experiment, "t2traj", "all", variant)
    marked = table.get_by_role("row", name=re.compile("^without_slow")).locator('td[data-metric="R@1"] .delta')
    expect(marked).to_have_class(re.compile("excludes-zero"))
    expect(marked.locator(".sig-mark")).to_have_count(1)
    expect(table.get_by_role("row", name=re.compile("^obs16")).locator('td[data-metric="R@1"] .sig-mark')).to_have_count(0)
    shot(page, "52-experiment-table")

    # Another task, then one stratum of it.
    page.get_by_role("group", name="Task").get_by_role("button", name="Traj2T").click()
    table = page.get_by_role("table", name=re.compile(r"^Traj2T · all queries"))
    for variant in VARIANTS:
        _expect_row(table, experiment, "traj2t", "all", variant)
    page.get_by_label("Stratum").select_option("2")
    table = page.get_by_role("table", name=re.compile(r"^Traj2T · pool size 2"))
    for variant in VARIANTS:
        _expect_row(table, experiment, "traj2t", "2", variant)
    page.get_by_role("group", name="Task").get_by_role("button", name="OCVR").click()
    expect(page.get_by_role("table", name=re.compile(r"^OCVR · pool size 2"))).to_be_visible()
