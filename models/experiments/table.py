"""The result table of an experiment (DESIGN 4.5), from the per-row values of its evaluations.

Input: per succeeded cell (variant, seed), the evaluation's per-row values
(``models.training.evaluation.snapshot_rows``: per task, the scored rows' ids, pool-size strata and
R@k / AP values). Every cell is evaluated on the same snapshot, so rows pair by id.

For every task (T2Traj, Traj2T, OCVR), metric (R@1, R@3, mAP) and stratum (``all`` and each
pool-size stratum that occurs), one row per variant with, in percent:

- ``values``: the figure of each seed (the mean of its rows × 100), ``mean`` and ``std`` over seeds
  (sample standard deviation; 0 with one seed);
- for every variant but the reference, over the seeds both finished (``paired_seeds``): ``delta``
  = mean(variant) − mean(reference) (negative: a drop), and two 95 % intervals of that
  difference (:data:`INTERVALS`, the table's legend, says which field is which):

  - ``low``..``high``, ``p_value``: the paired bootstrap over queries
    (``models.training.metrics.paired_bootstrap``): each query's value averaged over those seeds
    of each variant, then paired by query id (only ids both variants scored). Seeds are averaged
    away first, so it cannot see training noise;
  - ``hier_low``..``hier_high``, ``hier_p_value``: the hierarchical bootstrap over seeds, then
    queries (``models.training.metrics.hierarchical_bootstrap``), paired by seed and query id
    (only ids every paired seed of both variants scored). It needs at least 2 paired seeds; with
    fewer it is ``None`` and ``hier_note`` says why.

The defaults each cell's run read (``models.training.defaults``; a cell's ``"defaults"`` record,
absent or ``{}`` for a run from before versions were kept) come with the table: ``defaults`` says
which versions it holds, whether it mixes them and a note for people (``"defaults of version X"``,
or ``"...; this table mixes versions"``), and every row lists its seeds' versions (``defaults``) and
is marked ``older_defaults`` when one of them is older than the newest in the table.

:func:`table_csv` flattens it, one line per (task, metric, stratum, variant).
"""
from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence

import numpy as np

from models.training.defaults import defaults_label, defaults_order
from models.training.metrics import STRATA, hierarchical_bootstrap_many, paired_bootstrap

TASKS = ("t2traj", "traj2t", "ocvr")
METRICS = {"R@1": "R@1", "R@3": "R@3", "mAP": "AP"}      # table metric -> per-row value
STRATUM_ORDER = ["all", *(label for label, _, _ in STRATA)]
CSV_COLUMNS = ("task", "metric", "stratum", "variant", "reference", "n_seeds", "mean", "std", "values", "delta",
               "query_low", "query_high", "query_p_value", "paired_seeds", "n_queries", "hier_low", "hier_high",
               "hier_p_value", "hier_note", "defaults", "older_defaults")
INTERVALS = {
    "low/high/p_value": "paired bootstrap over queries (each query's value averaged over the paired seeds): "
                        "query sampling only; CSV query_low/query_high/query_p_value",
    "hier_low/hier_high/hier_p_value": "hierarchical bootstrap over seeds, then queries, paired by seed and query: "
                                       "training noise and query sampling; needs at least 2 paired seeds",
}
MIN_HIER_SEEDS = 2


def _seed_figures(rows: Mapping, metric: str, stratum: str) -> tuple[float, dict[int, float]]:
    """The figure (percent) of one evaluation's rows in a stratum and each row id's value."""
    values = rows[METRICS[metric]]
    keep = [i for i, s in enumerate(rows["stratum"]) if stratum == "all" or s == stratum]
    by_id = {int(rows["id"][i]): float(values[i]) for i in keep}
    return (100.0 * float(np.mean([values[i] for i in keep])) if keep else math.nan), by_id


def _per_query_mean(per_seed: Sequence[dict[int, float]]) -> dict[int, float]:
    """Each id's value averaged over the seeds that scored it."""
    sums: dict[int, list[float]] = {}
    for values in per_seed:
        for i, v in values.items():
            sums.setdefault(i, []).append(v)
    return {i: float(np.mean(v)) for i, v in sums.items()}


def _spread(values: list[float]) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan, math.nan
    return float(np.mean(finite)), float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0


def experiment_table(cells: Sequence[Mapping], *, variants: Sequence[str], reference: str,
                     n_resamples: int = 10000, confidence: float = 0.95, seed: int = 0) -> dict:
    """The table of the module docstring.

    ``cells``: ``{"variant", "seed", "rows"}`` of every succeeded cell (``rows`` as
    ``snapshot_rows`` gives them). ``variants`` fixes the row order; a variant without a succeeded
    cell gets a row with ``n_seeds = 0``. Returns ``{"reference", "variants", "confidence",
    "n_resamples", "tables": [{"task", "metric", "stratum", "rows": [...]}, ...]}``."""
    by_variant: dict[str, list[Mapping]] = {v: [] for v in variants}
    for cell in cells:
        if cell["variant"] not in by_variant:
            raise ValueError(f"cell of unknown variant {cell['variant']!r}")
        by_variant[cell["variant"]].append(cell)
    tables = []
    for task in TASKS:
        present = {s for cell in cells for s in cell["rows"][task]["stratum"]}
        for stratum in [s for s in STRATUM_ORDER if s == "all" or s in present]:
            per_seed = {metric: _per_seed(by_variant, task, metric, stratum) for metric in METRICS}
            rows = {metric: _rows(per_seed[metric], reference, n_resamples, confidence, seed) for metric in METRICS}
            _add_hierarchical(rows, per_seed, reference, n_resamples, confidence, seed)
            tables += [{"task": task, "metric": metric, "stratum": stratum, "rows": rows[metric]}
                       for metric in METRICS]
    defaults = defaults_summary(cells)
    for block in tables:
        for row in block["rows"]:
            labels = [defaults["by_cell"][f"{row['variant']}/{seed}"] for seed in row["seeds"]]
            row["defaults"] = labels
            row["older_defaults"] = any(label != defaults["newest"] for label in labels)
    return {"reference": reference, "variants": list(variants), "confidence": confidence,
            "n_resamples": n_resamples, "intervals": INTERVALS, "defaults": defaults, "tables": tables}


def defaults_summary(cells: Sequence[Mapping]) -> dict:
    """The defaults versions of the cells (module docstring): ``versions`` (labels, oldest first),
    ``newest``, ``mixed``, ``note`` and ``by_cell`` (``"variant/seed"`` → label)."""
    records = {f"{c['variant']}/{int(c['seed'])}": c.get("defaults") for c in cells}
    order = {defaults_label(r): defaults_order(r) for r in records.values()}
    versions = sorted(order, key=order.get)
    mixed = len(versions) > 1
    if not versions:
        note = ""
    elif mixed:
        note = (f"defaults of versions {'; '.join(versions)}: this table mixes versions (rows marked older "
                f"ran on defaults older than {versions[-1]})")
    else:
        note = f"defaults of version {versions[0]}"
    return {"versions": versions, "newest": versions[-1] if versions else None, "mixed": mixed, "note": note,
            "by_cell": {k: defaults_label(r) for k, r in records.items()}}


def _per_seed(by_variant, task, metric, stratum) -> dict[str, dict[int, tuple[float, dict[int, float]]]]:
    """Variant -> seed -> (the seed's figure, each row id's value) of one task, metric and stratum."""
    return {variant: {int(c["seed"]): _seed_figures(c["rows"][task], metric, stratum)
                      for c in sorted(cells, key=lambda c: c["seed"])}
            for variant, cells in by_variant.items()}


def _rows(per_seed, reference, n_resamples, confidence, seed) -> list[dict]:
    ref = per_seed.get(reference, {})
    out = []
    for variant, seeds in per_seed.items():
        values = [figure for figure, _ in seeds.values()]
        mean, std = _spread(values)
        row = {"variant": variant, "reference": variant == reference, "n_seeds": len(values), "seeds": list(seeds),
               "values": values, "mean": mean, "std": std, "delta": None, "low": None, "high": None,
               "p_value": None, "paired_seeds": None,
               "n_queries": len(_per_query_mean([by_id for _, by_id in seeds.values()])),
               "hier_low": None, "hier_high": None, "hier_p_value": None, "hier_note": None}
        if variant != reference:
            paired = sorted(set(seeds) & set(ref))                 # seeds both variants finished
            a_q = _per_query_mean([ref[s][1] for s in paired])
            b_q = _per_query_mean([seeds[s][1] for s in paired])
            common = sorted(set(a_q) & set(b_q))
            row.update(paired_seeds=len(paired), n_queries=len(common))
            if common:
                a = np.asarray([a_q[i] for i in common])
                b = np.asarray([b_q[i] for i in common])
                boot = paired_bootstrap(a, b, n_resamples=n_resamples, confidence=confidence, seed=seed)
                delta = _spread([seeds[s][0] for s in paired])[0] - _spread([ref[s][0] for s in paired])[0]
                row.update(delta=delta, low=100.0 * boot["low"], high=100.0 * boot["high"], p_value=boot["p_value"])
        out.append(row)
    return out


def _add_hierarchical(rows: dict[str, list[dict]], per_seed: dict[str, dict], reference: str, n_resamples: int,
                      confidence: float, seed: int) -> None:
    """Fill the ``hier_*`` fields of the compared rows of one task and stratum (``rows`` and
    ``per_seed`` by metric), every metric of a variant in one resampling (the draws depend only on
    the seeds and queries, so each metric's interval is the one its own call would give)."""
    metrics = list(rows)
    first = per_seed[metrics[0]]
    for variant, seeds in first.items():
        if variant == reference:
            continue
        paired = sorted(set(seeds) & set(first.get(reference, {})))
        ref = [[per_seed[m][reference][s][1] for s in paired] for m in metrics]            # [K][S] by id
        var = [[per_seed[m][variant][s][1] for s in paired] for m in metrics]              # [K][S] by id
        fields = _hierarchical(ref, var, n_resamples, confidence, seed)
        for metric, values in zip(metrics, fields):
            next(r for r in rows[metric] if r["variant"] == variant).update(values)


def _hierarchical(ref: list[list[dict[int, float]]], var: list[list[dict[int, float]]], n_resamples: int,
                  confidence: float, seed: int) -> list[dict]:
    """Per metric, the ``hier_*`` fields of a row from the paired seeds' values by id (reference,
    variant; the same seed at each position), in percent, or ``hier_note`` saying why there is no
    interval."""
    n_paired = len(ref[0])
    if n_paired < MIN_HIER_SEEDS:
        note = f"needs at least {MIN_HIER_SEEDS} paired seeds, has {n_paired}: no seed-level interval"
        return [{"hier_note": note} for _ in ref]
    common = sorted(set.intersection(*(set(v) for by_seed in [*ref, *var] for v in by_seed)))
    if not common:
        return [{"hier_note": "no query scored by every paired seed of both variants"} for _ in ref]
    a = np.asarray([[[r[i] for i in common] for r in by_seed] for by_seed in ref])        # [K, S, Q]
    b = np.asarray([[[v[i] for i in common] for v in by_seed] for by_seed in var])        # [K, S, Q]
    boots = hierarchical_bootstrap_many(a, b, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return [{"hier_low": 100.0 * x["low"], "hier_high": 100.0 * x["high"], "hier_p_value": x["p_value"]}
            for x in boots]


def table_csv(table: Mapping) -> str:
    """The table as CSV text (:data:`CSV_COLUMNS`; numbers with four decimals, blanks for none)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def number(value) -> str:
        return "" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.4f}"

    for block in table["tables"]:
        for row in block["rows"]:
            writer.writerow([block["task"], block["metric"], block["stratum"], row["variant"],
                             "yes" if row["reference"] else "", row["n_seeds"], number(row["mean"]),
                             number(row["std"]), " ".join(number(v) for v in row["values"]), number(row["delta"]),
                             number(row["low"]), number(row["high"]), number(row["p_value"]),
                             "" if row["paired_seeds"] is None else row["paired_seeds"], row["n_queries"],
                             number(row.get("hier_low")), number(row.get("hier_high")),
                             number(row.get("hier_p_value")), row.get("hier_note") or "",
                             " | ".join(row.get("defaults") or []), "yes" if row.get("older_defaults") else ""])
    return buffer.getvalue()


# -- second-stage requests ---------------------------------------------------------------------------
# model_requests: what ActPair's Table 5 calls requests per query (comparisons plus scores asked)
REQUEST_KINDS = ("comparator_requests", "scorer_requests", "invalid_answers", "model_requests")


def request_counts(report: Mapping) -> dict:
    """Requests per query of one evaluation's pipeline report (``models.retrievers.pipeline``): per
    kind, the mean over queries and the total; zeros for a pipeline without a reranker."""
    out = {}
    for kind in REQUEST_KINDS:
        per_query = list((report.get(kind) or {}).get("per_query") or [])
        out[kind] = {"per_query_mean": float(np.mean(per_query)) if per_query else 0.0,
                     "per_query_max": int(max(per_query)) if per_query else 0, "total": int(sum(per_query))}
    return out


def merge_request_counts(counts: Sequence[Mapping]) -> dict:
    """One variant's :func:`request_counts` over its seeds: the mean of the per-query means, the
    largest per-query count and the summed totals, with the number of seeds."""
    out: dict = {"n_seeds": len(counts)}
    for kind in REQUEST_KINDS:
        parts = [c[kind] for c in counts]
        out[kind] = {"per_query_mean": float(np.mean([p["per_query_mean"] for p in parts])) if parts else 0.0,
                     "per_query_max": max((p["per_query_max"] for p in parts), default=0),
                     "total": sum(p["total"] for p in parts)}
    return out


def pipelines_of(spec) -> dict[str, dict]:
    """The retrieval pipeline each variant of an ``ExperimentSpec`` is evaluated with."""
    return {variant: pipeline for variant, _, _, pipeline in spec.cells()}      # one pipeline per variant
