"""The datasheet's plots, drawn from the release's own Parquet files and statistics (PNG, by
matplotlib's Agg canvas).

- ``plots/query_length.png``: words per evaluated query (``benchmark.text``), per split;
- ``plots/trajectory_length.png``: observations per candidate of the released pools (``pool_members.n_obs``);
- ``plots/relations_per_query.png``: relations per query (``relations``), binary and ⊥ apart;
- ``plots/agreement.png``: agreement per review stage (``statistics.json``): the three-vote panels'
  raw agreement and, for single-review stages, the share of first labels the blind audit confirmed.

A plot is a function of those values alone (no date, no software string in the file), so the same
release draws the same bytes with the same matplotlib.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pyarrow.compute as pc
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from annotation.releases.services.release_io.splits import read_parquet

PLOTS = ("plots/query_length.png", "plots/trajectory_length.png", "plots/relations_per_query.png",
         "plots/agreement.png")
SIZE = (6.0, 3.6)                                # inches
DPI = 100
PNG_METADATA = {"Software": None}                # no version string: the bytes depend on the values only


def _figure():
    """A figure drawn by Agg alone (no pyplot, no global backend), with fixed margins: (figure, axes)."""
    fig = Figure(figsize=SIZE)
    FigureCanvasAgg(fig)
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.2, top=0.9)
    return fig, fig.subplots()


def _save(fig, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=DPI, metadata=PNG_METADATA)


def _histogram(ax, groups: dict[str, np.ndarray], xlabel: str, *, stacked: bool = True) -> None:
    """Histograms of each group's values, stacked (parts of one population) or overlaid."""
    values = [v for v in groups.values() if v.size]
    if not values:
        ax.text(0.5, 0.5, "no records", ha="center", va="center", transform=ax.transAxes)
    else:
        top = int(max(v.max() for v in values))
        bins = np.arange(0, top + 2) - 0.5 if top < 60 else np.linspace(0, top + 1, 41)
        below = np.zeros(bins.size - 1)
        for name, v in groups.items():           # one filled outline per group
            counts = below + np.histogram(v, bins=bins)[0]
            ax.stairs(counts, bins, baseline=below, fill=True, label=name, alpha=0.8 if stacked else 0.6)
            below = counts if stacked else below
        if len(groups) > 1:
            ax.legend()
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")


def _query_length(folder: Path, out: Path) -> None:
    table = read_parquet(folder, "benchmark", ["split", "text"])
    words = pc.list_value_length(pc.utf8_split_whitespace(table.column("text"))).to_numpy(zero_copy_only=False)
    splits = np.asarray(table.column("split").to_pylist(), dtype=object)
    groups = {s: words[splits == s] for s in sorted(set(splits.tolist()))} or {"queries": words}
    fig, ax = _figure()
    _histogram(ax, groups, "words per evaluated query")
    ax.set_title("Query length")
    _save(fig, out)


def _trajectory_length(folder: Path, out: Path) -> None:
    n_obs = read_parquet(folder, "pool_members", ["n_obs"]).column("n_obs")
    fig, ax = _figure()
    _histogram(ax, {"candidates": n_obs.fill_null(0).to_numpy(zero_copy_only=False)},
               "observations per pool candidate")
    ax.set_title("Trajectory length")
    _save(fig, out)


def _relations_per_query(folder: Path, out: Path) -> None:
    table = read_parquet(folder, "relations", ["query_id", "label"])
    groups = {}
    for name, mask in (("binary (1 or 0)", pc.greater_equal(table.column("label"), 0)),
                       ("unknown (⊥)", pc.less(table.column("label"), 0))):
        ids = table.column("query_id").filter(mask.fill_null(False))
        counts = ids.value_counts().field("counts") if len(ids) else None
        groups[name] = counts.to_numpy() if counts is not None else np.zeros(0, np.int64)
    fig, ax = _figure()
    _histogram(ax, groups, "relations per query", stacked=False)
    ax.set_title("Relations per query")
    _save(fig, out)


def stage_agreement(stats: dict) -> list[tuple[str, str, float | None]]:
    """(stage, what is measured, value) per review stage of the statistics."""
    out = []
    for stage, r in (stats.get("pre_adjudication_agreement") or {}).items():
        if r is None:
            continue
        if (r.get("review") or {}).get("kind") == "single_review":
            out.append((stage, "first label = blind audit", (r.get("audit_agreement") or {}).get("agreement")))
        else:
            out.append((stage, "panel raw agreement", r.get("raw_agreement")))
    return out


def _agreement(stats: dict, out: Path) -> None:
    rows = stage_agreement(stats)
    fig, ax = _figure()
    if not rows:
        ax.text(0.5, 0.5, "no votes", ha="center", va="center", transform=ax.transAxes)
    for i, (_stage, measure, value) in enumerate(rows):
        colour = "tab:blue" if measure.startswith("panel") else "tab:orange"
        ax.bar(i, 0.0 if value is None else value, color=colour,
               label=measure if measure not in [r[1] for r in rows[:i]] else None)
        ax.text(i, (value or 0.0) + 0.02, "n/a" if value is None else f"{value:.2f}", ha="center", fontsize=8)
    ax.set_xticks(range(len(rows)), [r[0] for r in rows], rotation=20)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("agreement")
    ax.set_title("Agreement per review stage")
    if rows:
        ax.legend(loc="lower right", fontsize=8)
    _save(fig, out)


def data_plots(folder: Path) -> list[str]:
    """Draw the plots of the release's records into ``folder`` (its Parquet files written); their paths."""
    folder = Path(folder)
    with matplotlib.rc_context({"font.size": 9}):
        _query_length(folder, folder / PLOTS[0])
        _trajectory_length(folder, folder / PLOTS[1])
        _relations_per_query(folder, folder / PLOTS[2])
    return list(PLOTS[:3])


def agreement_plot(folder: Path, stats: dict) -> list[str]:
    """Draw the agreement plot of the release's statistics into ``folder``; its path."""
    with matplotlib.rc_context({"font.size": 9}):
        _agreement(stats, Path(folder) / PLOTS[3])
    return [PLOTS[3]]
