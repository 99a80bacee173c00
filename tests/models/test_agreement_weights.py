"""A count table of distinct vectors weighted by how many items hold each gives the figures of the
table with a row per item (the tallied agreement page reads a stage that way, never a row per item)."""
from __future__ import annotations

import numpy as np
import pytest

from models.curation.agreement import counts_figures


def _expanded_and_weighted(rng, n_items: int, n_categories: int, panel: int):
    n = np.where(rng.random(n_items) < 0.8, panel, rng.integers(0, panel + 2, n_items))   # [I] votes per item
    counts = np.zeros((n_items, n_categories), np.int64)                                  # [I, K]
    for i, m in enumerate(n.tolist()):
        np.add.at(counts[i], rng.integers(0, n_categories, m), 1)
    vectors, where = np.unique(counts, axis=0, return_inverse=True)                        # [C, K], [I]
    weights = np.bincount(where.reshape(-1), minlength=len(vectors))                       # [C]
    order = rng.permutation(len(vectors))                                                  # any row order
    return counts, vectors[order], weights[order]


@pytest.mark.parametrize(("n_categories", "panel"), [(3, 3), (2, 5), (6, 10), (20, 9)])
def test_weighted_distinct_vectors_give_the_expanded_tables_figures(n_categories, panel):
    # (6, 10) groups the combinations with np.unique, (20, 9) row by row: every path of the tally
    rng = np.random.default_rng(n_categories * 100 + panel)
    names = [f"c{k}" for k in range(n_categories)]
    for _ in range(5):
        counts, vectors, weights = _expanded_and_weighted(rng, int(rng.integers(1, 400)), n_categories, panel)
        expanded = counts_figures(counts, names, panel=panel)
        weighted = counts_figures(vectors, names, panel=panel, weights=weights)
        for key in ("raw_agreement", "fleiss_kappa", "krippendorff_alpha"):
            assert weighted.pop(key) == pytest.approx(expanded.pop(key), rel=1e-12, abs=1e-15, nan_ok=True), key
        assert weighted == expanded


def test_a_zero_weight_row_counts_for_nothing_and_bad_weights_are_refused():
    counts = np.array([[3, 0, 0], [2, 1, 0], [1, 1, 1]])
    names = ["a", "b", "c"]
    assert counts_figures(counts, names, panel=3, weights=[2, 0, 1]) == \
        counts_figures(counts[[0, 0, 2]], names, panel=3)
    with pytest.raises(ValueError, match="one non-negative count per row"):
        counts_figures(counts, names, panel=3, weights=[1, -1, 1])
    with pytest.raises(ValueError, match="one non-negative count per row"):
        counts_figures(counts, names, panel=3, weights=[1, 1])
