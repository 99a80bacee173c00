"""Agreement statistics from sums over items: the tallies a stage keeps as votes arrive.

Every figure of :func:`models.curation.agreement.agreement_report` is a sum over items (or over
votes) of something that depends on one item's votes only: its panel votes per category, whether
it was adjudicated, its votes' and its own recorded time, and each of its panel votes' agreement
with the other panel votes' majority. So the report of a set of items can be kept as a few
histograms and one row per rater, added to and taken from item by item:

- ``counts``: items per count vector (the item's panel votes per category, one integer, base
  ``COUNT_RADIX``);
- ``adjudicated``: items with an adjudication vote (key 0);
- ``vote_ms``: votes per recorded time in milliseconds;
- ``item_ms``: items with a recorded time per their votes' summed milliseconds;
- per rater: ``RATER_COLUMNS``.

:func:`agreement_sums` computes them over a vote table (the same arrays as ``agreement_report``,
times in whole milliseconds, -1 where none). The sums of disjoint sets of items add up, so the
sums of a changed item are its new sums minus its old ones. :func:`report_from_sums` rebuilds the
report: the distinct count vectors, each weighted by how many items hold it, are handed to the
same functions (``counts_figures``; never a row per item, so reading a stage of a million items
costs what its few hundred distinct vectors cost), the medians are read off the time histograms. The figures equal ``agreement_report``'s
on the same votes, floating-point means up to their rounding (integers and medians exactly).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.curation.agreement import (
    NAN,
    count_matrix,
    counts_figures,
    majority_scores,
    per_rater_rows,
)

KINDS = ("counts", "adjudicated", "vote_ms", "item_ms")
RATER_COLUMNS = ("n_votes", "n_adjudication", "n_scored", "n_agree", "n_timed", "ms_total")
# Panel votes of one category on one item stay below this (a panel is a handful of people).
COUNT_RADIX = 256


@dataclass
class AgreementSums:
    """Histograms ``{kind: (keys [H], n [H])}`` (keys ascending, distinct) and the rater rows
    ``raters`` [R] (ascending ids) with ``rater_table`` [R, len(RATER_COLUMNS)]."""

    histograms: dict[str, tuple[np.ndarray, np.ndarray]]
    raters: np.ndarray
    rater_table: np.ndarray

    def minus(self, other: AgreementSums) -> AgreementSums:
        """These sums less ``other``'s, key by key (zero rows kept: a key that was there)."""
        histograms = {}
        for kind in KINDS:
            (a_keys, a_n), (b_keys, b_n) = self.histograms[kind], other.histograms[kind]
            histograms[kind] = grouped(np.concatenate([a_keys, b_keys]), np.concatenate([a_n, -b_n]))
        ids = np.concatenate([self.raters, other.raters])                                  # [R + R']
        table = np.concatenate([self.rater_table, -other.rater_table])                     # [R + R', C]
        raters, where = np.unique(ids, return_inverse=True)
        summed = np.zeros((raters.size, len(RATER_COLUMNS)), np.int64)                     # [R'', C]
        np.add.at(summed, where.reshape(-1), table)
        return AgreementSums(histograms, raters, summed)


def grouped(keys: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``keys`` ascending and the sum of ``n`` over each."""
    distinct, where = np.unique(np.asarray(keys, np.int64), return_inverse=True)
    return distinct, np.bincount(where.reshape(-1), weights=n, minlength=distinct.size).astype(np.int64)


def empty_sums() -> AgreementSums:
    none = np.zeros(0, np.int64)
    return AgreementSums({kind: (none, none) for kind in KINDS}, none, np.zeros((0, len(RATER_COLUMNS)), np.int64))


def agreement_sums(item, rater, label, is_adjudication, ms, n_categories: int) -> AgreementSums:
    """The sums of a vote table: ``item`` (any integer unit ids), ``rater``, ``label`` (category
    index in ``0 .. n_categories - 1``), ``is_adjudication``, ``ms`` (whole milliseconds, -1 where
    none was recorded), all [V]."""
    item, rater, label, ms = (np.asarray(a, np.int64) for a in (item, rater, label, ms))   # [V] each
    adj = np.asarray(is_adjudication, bool)                                                # [V]
    if not item.size:
        return empty_sums()
    if label.min() < 0 or label.max() >= n_categories:  # as agreement_report refuses it
        bad = label[(label < 0) | (label >= n_categories)][0]
        raise ValueError(f"label must lie in 0..{n_categories - 1} (category index), found {bad}")
    units, unit = np.unique(item, return_inverse=True)                                     # [U], [V]
    unit = unit.reshape(-1)
    panel = ~adj                                                                           # [V]
    counts = count_matrix(unit[panel], label[panel], units.size, n_categories)             # [U, K]
    if counts.size and counts.max() >= COUNT_RADIX:
        raise ValueError(f"an item holds {counts.max()} panel votes of one category; at most {COUNT_RADIX - 1}")
    codes = counts @ (COUNT_RADIX ** np.arange(n_categories, dtype=np.int64))              # [U]
    timed = ms >= 0                                                                        # [V]
    t_items = np.bincount(unit[timed], minlength=units.size)                               # [U]
    t_sums = np.bincount(unit[timed], weights=ms[timed], minlength=units.size).astype(np.int64)  # [U]
    n_adjudicated = int(np.unique(unit[adj]).size)
    histograms = {
        "counts": grouped(codes, np.ones_like(codes)),
        "adjudicated": (np.zeros(1, np.int64), np.array([n_adjudicated], np.int64)),
        "vote_ms": grouped(ms[timed], np.ones(int(timed.sum()), np.int64)),
        "item_ms": grouped(t_sums[t_items > 0], np.ones(int((t_items > 0).sum()), np.int64)),
    }
    scored, agrees = majority_scores(counts, unit[panel], label[panel])                    # [Vp], [Vp]
    raters, r = np.unique(rater, return_inverse=True)                                      # [R], [V]
    r = r.reshape(-1)
    p_r = r[panel]                                                                         # [Vp]
    table = np.stack([
        np.bincount(r, minlength=raters.size),
        np.bincount(r[adj], minlength=raters.size),
        np.bincount(p_r[scored], minlength=raters.size),
        np.bincount(p_r[agrees], minlength=raters.size),
        np.bincount(r[timed], minlength=raters.size),
        np.bincount(r[timed], weights=ms[timed], minlength=raters.size).astype(np.int64),
    ], axis=1).astype(np.int64)                                                            # [R, C]
    return AgreementSums(histograms, raters, table)


def _mean_median_ms(values_ms: np.ndarray, n: np.ndarray) -> dict:
    """``{"n", "mean", "median"}`` in seconds of the values ``values_ms`` (ascending, distinct)
    held ``n`` times each, the median as ``np.median`` takes it (the middle value, or the mean of
    the middle two)."""
    keep = n > 0
    values_ms, n = values_ms[keep], n[keep]
    total = int(n.sum())
    if not total:
        return {"n": 0, "mean": NAN, "median": NAN}
    seconds = values_ms / 1000.0                                                           # [H]
    ends = np.cumsum(n)                                                                    # [H]
    low = seconds[np.searchsorted(ends, (total - 1) // 2, side="right")]
    high = seconds[np.searchsorted(ends, total // 2, side="right")]
    return {"n": total, "mean": float(values_ms @ n / 1000.0 / total), "median": float((low + high) / 2)}


def report_from_sums(sums: AgreementSums, n_categories: int, labels: Sequence[str], *, panel: int) -> dict:
    """``agreement_report``'s dict (times given) rebuilt from the sums of the same votes."""
    names = [str(name) for name in labels]
    codes, n_of = sums.histograms["counts"]                                                # [C], [C]
    keep = n_of > 0
    codes, n_of = codes[keep], n_of[keep]
    vectors = (codes[:, None] // COUNT_RADIX ** np.arange(n_categories, dtype=np.int64)) % COUNT_RADIX  # [C, K]
    rows = sums.rater_table[sums.rater_table[:, 0] > 0]                                    # [R, C]
    raters = sums.raters[sums.rater_table[:, 0] > 0]                                       # [R]
    votes, adj, scored, agree, timed, ms_total = rows.T                                    # [R] each
    n_items = int(n_of.sum())
    n_adjudicated = int(sums.histograms["adjudicated"][1].sum())
    report = {
        "n_items": n_items,
        "n_votes": int(votes.sum()),
        "n_panel_votes": int(n_of @ vectors.sum(axis=1)),
        "n_adjudication_votes": int(adj.sum()),
        "labels": names,
        **counts_figures(vectors, names, panel=panel, weights=n_of),  # each distinct vector once, weighted
        "n_adjudicated_items": n_adjudicated,
        "adjudication_rate": n_adjudicated / n_items if n_items else NAN,
        "time_per_vote": _mean_median_ms(*sums.histograms["vote_ms"]),
        "time_per_item": _mean_median_ms(*sums.histograms["item_ms"]),
    }
    fraction, mean_time = np.full(len(raters), NAN), np.full(len(raters), NAN)             # [R], [R]
    np.divide(agree, scored, out=fraction, where=scored > 0)
    np.divide(ms_total / 1000.0, timed, out=mean_time, where=timed > 0)
    report["per_rater"] = per_rater_rows(raters, votes, adj, scored, fraction, mean_time)
    return report
