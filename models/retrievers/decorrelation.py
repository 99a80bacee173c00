"""Per-query rank decorrelation between retrievers (SCOUT paper, Secs. 6.1, 7.1, 7.3): for each
query, Spearman's ρ between two retrievers' scores over that query's gallery. A low ρ marks a
member that ranks differently from the others, the kind of signal whose fusion pays (fusing
redundant members does not).

Spearman's ρ of one query is the Pearson correlation of the two score rows' ranks, ties given
their average rank (as ``scipy.stats.spearmanr``). Items masked out of a query's gallery are left
out before ranking. A query with fewer than two items, or whose scores are constant in either
retriever, has no ρ (NaN) and is counted apart.
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import numpy as np
import torch


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """Ranks ``[n]`` (1-based) of a 1-D tensor, ties sharing their average rank."""
    order = torch.argsort(values, stable=True)                                 # [n]
    sorted_vals = values[order]                                                # [n]
    new_group = torch.ones_like(sorted_vals, dtype=torch.bool)                 # [n] first of a tie group
    new_group[1:] = sorted_vals[1:] != sorted_vals[:-1]
    group = torch.cumsum(new_group.long(), 0) - 1                              # [n] tie-group index
    positions = torch.arange(1, len(values) + 1, dtype=torch.float64)          # [n]
    sums = torch.zeros(int(group[-1]) + 1, dtype=torch.float64).index_add_(0, group, positions)
    counts = torch.bincount(group).double()                                    # [G]
    ranks = torch.empty(len(values), dtype=torch.float64)
    ranks[order] = (sums / counts)[group]
    return ranks


def per_query_spearman(a, b, mask=None) -> torch.Tensor:
    """Spearman's ρ per query ``[Q]`` (float64, NaN where undefined) between score matrices
    ``a [Q, N]`` and ``b [Q, N]`` of two retrievers over the same galleries; ``mask [Q, N]`` (True:
    in the query's gallery) leaves items out."""
    a = torch.as_tensor(a).detach().to("cpu", torch.float64)
    b = torch.as_tensor(b).detach().to("cpu", torch.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"a and b must both be [Q, N], got {list(a.shape)} and {list(b.shape)}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("scores must be finite")
    if mask is None:
        mask = torch.ones(a.shape, dtype=torch.bool)
    mask = torch.as_tensor(mask).to("cpu", torch.bool)
    if mask.shape != a.shape:
        raise ValueError(f"mask must be [Q, N] = {list(a.shape)}, got {list(mask.shape)}")
    out = torch.full((a.shape[0],), float("nan"), dtype=torch.float64)       # [Q]
    for i in range(a.shape[0]):
        keep = mask[i]
        if int(keep.sum()) < 2:
            continue
        ra, rb = _average_ranks(a[i, keep]), _average_ranks(b[i, keep])         # [n], [n]
        ra, rb = ra - ra.mean(), rb - rb.mean()
        denom = ra.norm() * rb.norm()
        if denom > 0:
            out[i] = float((ra @ rb) / denom)
    return out


def decorrelation_summary(rho, bins: int = 10) -> dict:
    """Mean, median, spread and a histogram over ``[-1, 1]`` of per-query ρ values (NaN ones are
    counted in ``n_undefined`` and left out)."""
    rho = np.asarray(torch.as_tensor(rho).detach().cpu(), dtype=np.float64).reshape(-1)
    if not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    defined = rho[np.isfinite(rho)]
    counts, edges = np.histogram(defined, bins=bins, range=(-1.0, 1.0))
    empty = defined.size == 0
    return {"n_queries": int(defined.size), "n_undefined": int(rho.size - defined.size),
            "mean": None if empty else float(defined.mean()), "median": None if empty else float(np.median(defined)),
            "std": None if empty else float(defined.std()),
            "histogram": {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}}


def pairwise_decorrelation(scores: Mapping[str, object], mask=None, bins: int = 10) -> dict[str, dict]:
    """:func:`decorrelation_summary` of every pair of retrievers ``{name: [Q, N]}``, keyed
    ``"a|b"`` in the order given."""
    names = list(scores)
    if len(names) < 2:
        raise ValueError("decorrelation needs the scores of at least two retrievers")
    return {f"{x}|{y}": decorrelation_summary(per_query_spearman(scores[x], scores[y], mask), bins)
            for x, y in combinations(names, 2)}
