"""``python manage.py experiment``: run an experiment grid (DESIGN 4.5, 5): train every (variant, seed)
cell on one sealed snapshot, evaluate it on another, and print the table with each variant's
difference from the reference and its two intervals (paired bootstrap over queries; hierarchical
over seeds, then queries)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.smoke_test import SMOKE_TEST_NOTE, SMOKE_TEST_STAMP
from common.errors import ApplicationError, ConflictError
from common.management.options import json_object_option
from common.progress import ProgressBar
from workers.execute import evaluation_run_execute, training_run_execute
from workers.experiments import (
    experiment_create,
    experiment_pending,
    experiment_refresh,
    experiment_resume,
    experiment_root,
    preset_list,
)
from workers.management.commands.train import _snapshot
from workers.models import Experiment, RunStatus


def _list(raw: str | None, what: str, cast=str) -> list | None:
    if raw is None:
        return None
    try:
        items = [cast(x.strip()) for x in raw.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"{what} must be a comma-separated list, got {raw!r}") from None
    if not items:
        raise CommandError(f"{what} is empty")
    return items


INTERVAL_LEGEND = ("intervals: q[..] paired bootstrap over queries (seeds averaged first); s+q[..] hierarchical "
                   "bootstrap over seeds, then queries (n/a with fewer than 2 paired seeds)")


def _interval(low, high) -> str:
    return "n/a" if low is None or high is None else f"[{low:+.1f}, {high:+.1f}]"


def format_table(result: dict, *, stratum: str = "all", metrics=("R@1", "R@3", "mAP")) -> str:
    """The table as text: one block per task, a line per variant with each metric's mean ± std over
    seeds and, for the other variants, the difference from the reference with both intervals
    (named by the legend line)."""
    lines = [f"note: {SMOKE_TEST_NOTE}"] if SMOKE_TEST_STAMP in (result.get("stamps") or []) else []
    if result.get("tables"):
        lines.append(INTERVAL_LEGEND)
    defaults = result.get("defaults") or {}
    if defaults.get("note"):
        lines.append(("warning: " if defaults.get("mixed") else "") + defaults["note"]
                     + ("; † marks them" if defaults.get("mixed") else ""))
    blocks = [b for b in result.get("tables", []) if b["stratum"] == stratum and b["metric"] in metrics]
    for task in dict.fromkeys(b["task"] for b in blocks):
        lines.append(f"{task}")
        by_metric = {b["metric"]: {r["variant"]: r for r in b["rows"]} for b in blocks if b["task"] == task}
        for variant in result.get("variants", []):
            older = any(by_metric.get(m, {}).get(variant, {}).get("older_defaults") for m in metrics)
            cells = []
            for metric in metrics:
                row = by_metric.get(metric, {}).get(variant)
                if row is None or not row["n_seeds"]:
                    cells.append(f"{metric} n/a")
                    continue
                text = f"{metric} {row['mean']:5.1f}±{row['std']:.1f}"
                if row["delta"] is not None:
                    text += (f" ({row['delta']:+.1f} q{_interval(row['low'], row['high'])} "
                             f"s+q{_interval(row.get('hier_low'), row.get('hier_high'))})")
                cells.append(text)
            name = f"{variant}†" if older else variant
            lines.append(f"  {name:16s} " + "   ".join(cells))
    requests = {v: r["model_requests"]["per_query_mean"] for v, r in (result.get("requests") or {}).items()
                if "model_requests" in r}
    if requests:
        lines.append("requests per query (comparisons and scores asked of the reranking model): "
                     + ", ".join(f"{v} {requests[v]:.2f}" for v in result.get("variants", []) if v in requests))
    return "\n".join(lines)


class Command(BaseCommand):
    help = ("Run an experiment grid: every variant × seed trained on --snapshot (train split) and evaluated on "
            "--eval-snapshot (dev or test), here one after another or queued on the gpu queue with --queue. "
            "Prints, per task and metric, mean ± std over seeds and each variant's difference from the reference "
            "with two 95 % intervals (paired bootstrap over queries; hierarchical over seeds, then queries); "
            "writes table.json and table.csv.")

    def add_arguments(self, parser):
        parser.add_argument("--snapshot", type=int, help="relation snapshot id to train on (train split)")
        parser.add_argument("--eval-snapshot", type=int, help="relation snapshot id to evaluate on (dev or test)")
        parser.add_argument("--preset", default=None, help="a named grid (see --list-presets), e.g. vtrajembed-table3")
        parser.add_argument("--variants", default=None,
                            help="with --preset: a comma-separated subset of its variants (the reference is always "
                                 "run); or JSON / a JSON file of name -> overrides")
        parser.add_argument("--model", default=None, help="model kind (without --preset)")
        parser.add_argument("--reference", default=None, help="the reference variant (without --preset)")
        parser.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2)")
        parser.add_argument("--config", default=None, help="base TrainConfig as JSON or a JSON file, shared by all cells")
        parser.add_argument("--resamples", type=int, default=None, help="paired bootstrap resamples (default 10000)")
        parser.add_argument("--name", default="", help="a name for the experiment")
        parser.add_argument("--allow-train-split", action="store_true",
                            help="evaluate on training data anyway (figures stamped train-split)")
        parser.add_argument("--allow-incomplete", action="store_true",
                            help="evaluate on an incomplete dev/test snapshot anyway (figures stamped incomplete)")
        parser.add_argument("--queue", action="store_true", help="queue the cells to the gpu workers")
        parser.add_argument("--resume", type=int, default=None, metavar="ID",
                            help="continue experiment ID: run its unfinished cells (failed, cancelled or never "
                                 "started); succeeded cells are kept")
        parser.add_argument("--out", default=None, help="also copy table.json and table.csv to this folder")
        parser.add_argument("--json", action="store_true", help="print the table as JSON")
        parser.add_argument("--list-presets", action="store_true", help="list the named grids and exit")

    def handle(self, *args, **o):
        if o["list_presets"]:
            for p in preset_list():
                self.stdout.write(f"{p['name']} ({p['model_kind']}, reference {p['reference']}): "
                                  f"{', '.join(p['variants'])}\n  {p['description']}")
            return
        try:
            experiment = self._resume(o) if o["resume"] is not None else self._create(o)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if o["queue"]:
            self.stdout.write(f"experiment #{experiment.pk}: {experiment.cells_total} training runs queued on the "
                              f"gpu queue; follow it at /api/experiments/{experiment.pk}/")
            return
        self._run_cells(experiment)
        experiment = experiment_refresh(experiment_id=experiment.pk)
        self._report(experiment, o)

    def _grid(self, o) -> dict:
        grid: dict = {}
        if o["preset"]:
            grid["preset"] = o["preset"]
        if o["variants"]:
            raw = o["variants"].strip()
            grid["variants"] = json_object_option(raw, "--variants") if raw.startswith("{") or Path(raw).is_file() \
                else _list(raw, "--variants")
        if o["model"]:
            grid["model_kind"] = o["model"]
        if o["reference"]:
            grid["reference"] = o["reference"]
        if o["seeds"]:
            grid["seeds"] = _list(o["seeds"], "--seeds", int)
        if o["config"]:
            grid["base"] = json_object_option(o["config"], "--config")
        if o["resamples"] is not None:
            grid["n_resamples"] = o["resamples"]
        return grid

    def _create(self, o) -> Experiment:
        if o["snapshot"] is None or o["eval_snapshot"] is None:
            raise CommandError("--snapshot and --eval-snapshot are required (or --resume ID)")
        return experiment_create(snapshot=_snapshot(o["snapshot"], "--snapshot"),
                                 eval_snapshot=_snapshot(o["eval_snapshot"], "--eval-snapshot"), grid=self._grid(o),
                                 name=o["name"], allow_train_split=o["allow_train_split"],
                                 allow_incomplete=o["allow_incomplete"], queue=o["queue"])

    def _resume(self, o) -> Experiment:
        experiment = Experiment.objects.filter(pk=o["resume"]).first()
        if experiment is None:
            raise CommandError(f"--resume {o['resume']}: no such experiment")
        try:
            experiment_resume(experiment=experiment, queue=o["queue"])
        except ConflictError:
            if o["queue"]:
                raise
        return experiment

    def _run_cells(self, experiment: Experiment) -> None:
        """Train what has not succeeded, then run the cells' pipeline evaluations, one at a time."""
        runs, _ = experiment_pending(experiment)
        for i, run in enumerate(runs, start=1):
            seed = run.config.get("seed")
            with ProgressBar(f"training {i}/{len(runs)} {run.variant} seed {seed} (run #{run.pk})") as bar:
                run = training_run_execute(run=run, echo=bar)
            if run.status != RunStatus.SUCCEEDED:
                self.stderr.write(f"run #{run.pk} ({run.variant}, seed {seed}) {run.status}: {run.error[-300:]}")
        experiment_refresh(experiment_id=experiment.pk)      # creates the pipeline evaluations (not queued: inline)
        _, evaluations = experiment_pending(experiment)
        for i, evaluation in enumerate(evaluations, start=1):
            with ProgressBar(f"pipeline evaluation {i}/{len(evaluations)} (run #{evaluation.pk})") as bar:
                evaluation = evaluation_run_execute(run=evaluation, echo=bar)
            if evaluation.status != RunStatus.SUCCEEDED:
                self.stderr.write(f"evaluation #{evaluation.pk} {evaluation.status}: {evaluation.error[-300:]}")

    def _report(self, experiment: Experiment, o) -> None:
        folder = experiment_root() / str(experiment.pk)
        if o["out"]:
            out = Path(o["out"])
            out.mkdir(parents=True, exist_ok=True)
            for name in ("table.json", "table.csv"):
                if (folder / name).is_file():
                    shutil.copyfile(folder / name, out / name)
        if o["json"]:
            self.stdout.write(json.dumps(experiment.result, indent=2))
        else:
            head = (f"experiment #{experiment.pk} {experiment.status}: {experiment.cells_done}/"
                    f"{experiment.cells_total} cells; snapshot {experiment.snapshot_id} -> {experiment.eval_snapshot_id}")
            if experiment.stamps:
                head += f"; figures stamped {', '.join(experiment.stamps)}"
            self.stdout.write(head)
            self.stdout.write(format_table(experiment.result))
            self.stdout.write(f"tables: {folder / 'table.json'} and {folder / 'table.csv'}")
        if experiment.status != Experiment.Status.SUCCEEDED:
            raise CommandError(f"experiment #{experiment.pk} {experiment.status}; resume it with --resume {experiment.pk}")
