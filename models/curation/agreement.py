"""Inter-annotator agreement for one annotation stage, vectorised over items (no Django).

A stage is, for example, usability (labels ``usable | unusable | uncertain``) or duplicate
identity (``same | different | uncertain``). Call the functions once per stage, and once per
split or any other subset, with the votes of that subset.

Vote table
----------
Parallel 1-D arrays with one entry per vote ``[V]``:

- ``item``: integer item index in ``0 .. I-1`` (the caller maps database keys to indices, e.g.
  with ``np.unique(keys, return_inverse=True)``);
- ``rater``: integer annotator id (any integers; used only for the per-rater figures);
- ``label``: integer category index in ``0 .. K-1`` with ``K = n_categories``;
- ``is_adjudication``: bool, True for a vote cast by an adjudicator;
- ``time_spent`` (optional): float seconds, ``nan`` where not recorded.

An item may hold any number of votes: a full panel (3 by default), fewer while it is pending, plus
adjudication votes. **Adjudication votes never enter the agreement statistics**: raw agreement,
Fleiss' kappa, Krippendorff's alpha, vote distributions and the per-rater agreement are all
pre-adjudication figures computed on panel votes only. Adjudication votes count in ``n_votes``,
the adjudication rate and the time figures.

A count table ``counts [I, K]`` (``count_matrix``) holds, per item, the number of panel votes
for each category; every statistic below is computed from it with whole-array operations.

Degenerate cases (never a crash, never a NumPy warning)
-------------------------------------------------------
- No item with at least two panel votes: raw agreement, kappa and alpha are ``nan``.
- Every vote in one category: the expected agreement is 1, so kappa and alpha are ``0 / 0`` and
  returned as ``nan`` (raw agreement is 1.0). ``krippendorff.alpha`` raises in this case and
  statsmodels returns ``nan`` with a warning.
- Fleiss' kappa needs the same number of raters on every item. With unequal numbers it uses only
  the items that have the modal number of votes among items with at least two (a tie between
  two numbers goes to the larger); ``n_raters=`` picks the number explicitly. The report passes
  the panel size, so its kappa covers exactly the items with a full panel.
- Empty input: counts are zeros, rates and statistics ``nan``, ``per_rater`` empty.
- Ratios with an empty denominator (a rater with no scored vote, an adjudication rate over no
  item, a mean over no timed vote) are ``nan``.

``models.curation.agreement_reference.per_item_loop_report`` is the same report written the slow,
obvious way (a Python loop over items with per-item dicts and the textbook formulas); the tests
and the benchmark compare the two.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NAN = float("nan")


# -- input checks ---------------------------------------------------------------------------------
def _int_array(values, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array, got shape {list(arr.shape)}")
    if arr.size == 0:
        return arr.astype(np.int64)
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _check_range(arr: np.ndarray, upper: int, name: str, what: str) -> None:
    if arr.size and (arr.min() < 0 or arr.max() >= upper):
        bad = arr[(arr < 0) | (arr >= upper)][0]
        raise ValueError(f"{name} must lie in 0..{upper - 1} ({what}), found {bad}")


def _check_n_categories(n_categories: int) -> int:
    if not isinstance(n_categories, int | np.integer) or n_categories < 1:
        raise ValueError(f"n_categories must be a positive integer, got {n_categories!r}")
    return int(n_categories)


def _label_names(labels: Sequence[str] | None, n_categories: int) -> list[str]:
    if labels is None:
        return [str(k) for k in range(n_categories)]
    names = [str(name) for name in labels]
    if len(names) != n_categories:
        raise ValueError(f"labels names {len(names)} categories, n_categories is {n_categories}")
    if len(set(names)) != len(names):
        raise ValueError(f"labels must be distinct, got {names}")
    return names


def _as_counts(counts) -> np.ndarray:
    counts = np.asarray(counts)
    if counts.ndim != 2:
        raise ValueError(f"counts must be a 2-D [items, categories] table, got shape {list(counts.shape)}")
    if counts.size and not np.issubdtype(counts.dtype, np.integer):
        if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
            raise ValueError("counts must hold whole numbers")
    counts = counts.astype(np.int64, copy=False)
    if counts.size and counts.min() < 0:
        raise ValueError("counts must not be negative")
    return counts


def _row_sums(counts: np.ndarray) -> np.ndarray:
    """``counts.sum(axis=1)`` of an int ``[I, K]`` table, column by column where K is small (a
    reduction along a short row costs several times more than adding K columns)."""
    if counts.shape[1] == 0 or counts.shape[1] > 16:
        return counts.sum(axis=1)
    total = counts[:, 0].copy()                                       # [I]
    for k in range(1, counts.shape[1]):
        total += counts[:, k]
    return total


def _rows_where(counts: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``counts[keep]`` for a bool ``[I]`` mask (``np.compress`` copies whole rows at once)."""
    return np.compress(keep, counts, axis=0)


# -- count table ------------------------------------------------------------------------------------
def count_matrix(item, label, n_items: int, n_categories: int) -> np.ndarray:
    """Votes per item and category: ``counts[i, k]`` = number of votes on item ``i`` with label
    ``k``. ``item``, ``label``: int ``[V]``. Returns int64 ``[n_items, n_categories]``."""
    n_categories = _check_n_categories(n_categories)
    if not isinstance(n_items, int | np.integer) or n_items < 0:
        raise ValueError(f"n_items must be a non-negative integer, got {n_items!r}")
    item = _int_array(item, "item")                                   # [V]
    label = _int_array(label, "label")                                # [V]
    if item.shape != label.shape:
        raise ValueError(f"item and label must have one length, got {item.size} and {label.size}")
    _check_range(item, n_items, "item", "item index")
    _check_range(label, n_categories, "label", "category index")
    flat = np.bincount(item * n_categories + label, minlength=int(n_items) * n_categories)  # [I*K]
    return flat.reshape(int(n_items), n_categories)                  # [I, K]


# -- three-vote distributions ----------------------------------------------------------------------
def _partitions(total: int, max_parts: int, largest: int | None = None) -> list[tuple[int, ...]]:
    """Partitions of ``total`` into at most ``max_parts`` positive parts, largest part first."""
    largest = total if largest is None else largest
    if total == 0:
        return [()]
    if max_parts == 0:
        return []
    out = []
    for first in range(min(total, largest), 0, -1):
        out += [(first, *rest) for rest in _partitions(total - first, max_parts - 1, first)]
    return out


def _pattern_name(parts: Sequence[int], panel: int) -> str:
    """``(3,)`` -> ``"3-0"`` (unanimous), ``(2, 1)`` -> ``"2-1"``, ``(1, 1, 1)`` -> ``"1-1-1"``."""
    parts = [int(p) for p in parts if p > 0]
    if len(parts) == 1:
        return f"{panel}-0"
    return "-".join(str(p) for p in parts)


def vote_distributions(counts, labels: Sequence[str] | None = None, *, panel: int = 3) -> dict:
    """Distribution of vote patterns over the items with exactly ``panel`` votes.

    ``counts``: int ``[I, K]`` panel votes per item and category (items with another number of
    votes are left out; their number is not reported here). Returns::

        {"panel": 3, "n_items": n,
         "patterns": {"3-0": n, "2-1": n, "1-1-1": n},           # every possible pattern, 0 too
         "detail": {"usable,usable,unusable": n, ...},            # label multisets (JSON-ready)
         "combinations": {(("usable", 2), ("unusable", 1)): n}}   # the same as label-count tuples

    In ``detail`` and ``combinations`` the labels of one item are sorted by count (descending),
    then by category index; entries are ordered by frequency (descending), then by that key.
    ``labels`` names the K categories (default ``"0"``, ``"1"``, ...).
    """
    counts = _as_counts(counts)                                       # [I, K]
    return _vote_distributions(counts, _row_sums(counts), labels, panel=panel)


def _vote_distributions(counts: np.ndarray, n: np.ndarray, labels, *, panel: int,
                        weights: np.ndarray | None = None) -> dict:
    """:func:`vote_distributions` of a checked table ``[I, K]`` with its row sums ``n`` ``[I]``;
    ``weights`` ``[I]``: how many items each row stands for (None: one each)."""
    n_categories = counts.shape[1]
    names = _label_names(labels, n_categories)
    if not isinstance(panel, int | np.integer) or panel < 1:
        raise ValueError(f"panel must be a positive integer, got {panel!r}")
    full = _rows_where(counts, n == panel)                            # [F, K]
    w = None if weights is None else weights[n == panel]              # [F]

    # one integer per label combination (base panel + 1), so that grouping is a 1-D sort
    if (panel + 1) ** n_categories < 2**62:
        radix = (panel + 1) ** np.arange(n_categories, dtype=np.int64)  # [K]
        codes = full @ radix                                            # [F]
        if (panel + 1) ** n_categories <= 1 << 20:
            tally = _weighted_bincount(codes, w, minlength=1)           # [(panel + 1)^K]
            keys = np.flatnonzero(tally)                                # [C]
            n = tally[keys]                                             # [C]
        else:
            keys, where = np.unique(codes, return_inverse=True)         # [C], [F]
            n = _weighted_bincount(where.reshape(-1), w, minlength=keys.size)  # [C]
        combos = (keys[:, None] // radix[None, :]) % (panel + 1)        # [C, K]
    else:
        combos, where = np.unique(full, axis=0, return_inverse=True)    # [C, K], [F]
        n = _weighted_bincount(where.reshape(-1), w, minlength=len(combos))  # [C]

    patterns = {_pattern_name(p, panel): 0 for p in _partitions(int(panel), n_categories)}
    rows = []
    for row, count in zip(combos.tolist(), n.tolist()):                # one pass per combination
        patterns[_pattern_name(sorted(row, reverse=True), panel)] += int(count)
        order = sorted((k for k in range(n_categories) if row[k] > 0), key=lambda k: (-row[k], k))
        combo = tuple((names[k], int(row[k])) for k in order)
        rows.append((-count, [k for k in order for _ in range(row[k])], combo, count))
    detail: dict[str, int] = {}
    combinations: dict[tuple[tuple[str, int], ...], int] = {}
    for _, ks, combo, count in sorted(rows, key=lambda r: (r[0], r[1])):
        detail[",".join(names[k] for k in ks)] = int(count)
        combinations[combo] = int(count)
    return {"panel": int(panel), "n_items": len(full) if w is None else int(w.sum()), "patterns": patterns,
            "detail": detail, "combinations": combinations}


def _weighted_bincount(codes: np.ndarray, weights: np.ndarray | None, *, minlength: int) -> np.ndarray:
    """``np.bincount(codes)``, each entry counted ``weights`` times (int64 weights, exact)."""
    if weights is None:
        return np.bincount(codes, minlength=minlength)
    out = np.zeros(max(minlength, int(codes.max()) + 1 if codes.size else 0), np.int64)
    np.add.at(out, codes, weights)
    return out


def _weighted_mean(values: np.ndarray, weights: np.ndarray | None) -> float:
    """The mean of ``values`` ``[J]``, each held ``weights`` times (None: once)."""
    return float(np.mean(values)) if weights is None else float(values @ weights / weights.sum())


# -- agreement statistics ------------------------------------------------------------------------------
def raw_agreement(counts) -> float:
    """Mean over items with at least two votes of the pairwise agreement proportion
    ``sum_k n_k (n_k - 1) / (n (n - 1))`` (the fraction of ordered vote pairs on the item that
    agree). ``counts``: int ``[I, K]``. ``nan`` when no item has two votes."""
    counts = _as_counts(counts)                                       # [I, K]
    return _raw_agreement(counts, _row_sums(counts))


def _raw_agreement(counts: np.ndarray, n: np.ndarray, weights: np.ndarray | None = None) -> float:
    """:func:`raw_agreement` of a checked table ``[I, K]`` with its row sums ``n`` ``[I]``
    (``weights``: items per row, as in :func:`_vote_distributions`)."""
    keep = n >= 2                                                     # [I]
    if not keep.any():
        return NAN
    c, n = _rows_where(counts, keep), n[keep]                         # [J, K], [J]
    agree = _row_sums(c * (c - 1))                                    # [J] agreeing ordered pairs
    return _weighted_mean(agree / (n * (n - 1)), None if weights is None else weights[keep])


def _modal_raters(n: np.ndarray) -> int | None:
    """The most common number of votes among items with at least two (ties: the larger)."""
    n = n[n >= 2]
    if not n.size:
        return None
    freq = np.bincount(n)                                             # [max_n + 1]
    return int(len(freq) - 1 - np.argmax(freq[::-1]))


def fleiss_kappa(counts, n_raters: int | None = None) -> float:
    """Fleiss' kappa (Fleiss 1971) over items rated by the same number of raters.

    ``counts``: int ``[I, K]``. Only items with exactly ``n_raters`` votes are used; by default
    ``n_raters`` is the modal number of votes among items with at least two (a tie goes to the
    larger number), so on a table with equal row sums every item is used and the value equals
    ``statsmodels.stats.inter_rater.fleiss_kappa(counts, method="fleiss")``.

    ``nan`` when no item qualifies, or when all the used votes fall in one category (expected
    agreement 1, kappa 0/0). ``n_raters`` below 2 is refused with ``ValueError``.
    """
    counts = _as_counts(counts)                                       # [I, K]
    return _fleiss_kappa(counts, _row_sums(counts), n_raters)


def _fleiss_kappa(counts: np.ndarray, n: np.ndarray, n_raters: int | None, weights: np.ndarray | None = None) -> float:
    """:func:`fleiss_kappa` of a checked table ``[I, K]`` with its row sums ``n`` ``[I]``
    (``weights``: items per row; ``n_raters`` must then be given)."""
    if n_raters is None:
        if weights is not None:
            raise ValueError("weighted rows need n_raters")
        n_raters = _modal_raters(n)
        if n_raters is None:
            return NAN
    elif not isinstance(n_raters, int | np.integer) or n_raters < 2:
        raise ValueError(f"n_raters must be an integer >= 2, got {n_raters!r}")
    table = _rows_where(counts, n == n_raters)                        # [J, K]
    if not len(table):
        return NAN
    w = None if weights is None else weights[n == n_raters]           # [J]
    totals = table.sum(axis=0) if w is None else w @ table            # [K]
    if np.count_nonzero(totals) <= 1:
        return NAN                                                    # expected agreement is 1
    m = float(n_raters)
    p_cat = totals / totals.sum()                                     # [K]
    p_item = (_row_sums(table * table) - m) / (m * (m - 1.0))         # [J]
    p_mean = _weighted_mean(p_item, w)
    p_exp = (p_cat * p_cat).sum()
    return float((p_mean - p_exp) / (1.0 - p_exp))


def coincidence_matrix(counts) -> np.ndarray:
    """Krippendorff's coincidence matrix ``o [K, K]`` of the pairable items (two votes or more):
    ``o[c, k] = sum_u n_uc (n_uk - [c == k]) / (m_u - 1)``. ``counts``: int ``[I, K]``."""
    counts = _as_counts(counts)                                       # [I, K]
    return _coincidence_matrix(counts, _row_sums(counts))


def _coincidence_matrix(counts: np.ndarray, m: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """:func:`coincidence_matrix` of a checked table ``[I, K]`` with its row sums ``m`` ``[I]``
    (``weights``: items per row)."""
    keep = m >= 2                                                     # [I]
    c = _rows_where(counts, keep).astype(np.float64)                  # [J, K]
    w = 1.0 / (m[keep] - 1.0)                                         # [J]
    if weights is not None:
        w = w * weights[keep]
    cw = c * w[:, None]                                               # [J, K]
    return cw.T @ c - np.diag(cw.sum(axis=0))                         # [K, K]


def krippendorff_alpha_nominal(counts) -> float:
    """Krippendorff's alpha for nominal data from the coincidence matrix.

    ``counts``: int ``[I, K]``; items may hold any number of votes and those with fewer than two
    are ignored. ``alpha = 1 - (n - 1) * (n - sum_c o_cc) / (n^2 - sum_c n_c^2)`` with ``n_c`` the
    row sums of the coincidence matrix and ``n`` their total. Equals
    ``krippendorff.alpha(reliability_data=..., level_of_measurement="nominal")``. ``nan`` with
    no pairable item, or when every pairable vote is in one category (expected disagreement 0;
    the ``krippendorff`` package raises in both cases).
    """
    counts = _as_counts(counts)                                       # [I, K]
    return _krippendorff_alpha(counts, _row_sums(counts))


def _krippendorff_alpha(counts: np.ndarray, m: np.ndarray, weights: np.ndarray | None = None) -> float:
    """:func:`krippendorff_alpha_nominal` of a checked table ``[I, K]`` with its row sums ``m`` ``[I]``
    (``weights``: items per row)."""
    pairable = _rows_where(counts, m >= 2)                            # [J, K]
    n_c = pairable.sum(axis=0) if weights is None else weights[m >= 2] @ pairable  # [K] pairable votes = o's row sums
    if np.count_nonzero(n_c) <= 1:
        return NAN                                                    # no pairable vote, or one category
    o = _coincidence_matrix(counts, m, weights)                       # [K, K]
    n = float(n_c.sum())
    expected = n * n - float((n_c * n_c).sum())                       # = sum_{c != k} n_c n_k
    return float(1.0 - (n - 1.0) * (n - np.trace(o)) / expected)


# -- the report -------------------------------------------------------------------------------------------
def _prepare(item, rater, label, is_adjudication, n_categories, labels, decided, time_spent):
    """Checked and filtered arrays shared by both report implementations."""
    n_categories = _check_n_categories(n_categories)
    names = _label_names(labels, n_categories)
    item = _int_array(item, "item")                                   # [V]
    rater = _int_array(rater, "rater")                                # [V]
    label = _int_array(label, "label")                                # [V]
    adj = np.asarray(is_adjudication)                                 # [V]
    if adj.ndim != 1 or (adj.size and adj.dtype != bool and not np.isin(adj, (0, 1)).all()):
        raise ValueError("is_adjudication must be a 1-D boolean array")
    adj = adj.astype(bool)
    arrays = {"rater": rater, "label": label, "is_adjudication": adj}
    if time_spent is not None:
        time = np.asarray(time_spent, dtype=np.float64)               # [V]
        if time.ndim != 1:
            raise ValueError("time_spent must be a 1-D array")
        if np.isinf(time).any() or (time[~np.isnan(time)] < 0).any():
            raise ValueError("time_spent must be non-negative seconds (nan where not recorded)")
        arrays["time_spent"] = time
    for name, arr in arrays.items():
        if arr.shape != item.shape:
            raise ValueError(f"{name} has {arr.size} entries, item has {item.size}")
    _check_range(label, n_categories, "label", "category index")
    if decided is not None:
        decided = np.asarray(decided)
        if decided.ndim != 1 or (decided.size and decided.dtype != bool):
            raise ValueError("decided must be a 1-D boolean array over items")
        n_items = len(decided)
    else:
        n_items = int(item.max()) + 1 if item.size else 0
    _check_range(item, n_items, "item", "item index; decided has one entry per item")
    if decided is not None:
        keep = decided[item]                                          # [V]
        item, arrays = item[keep], {k: v[keep] for k, v in arrays.items()}
    time = arrays.get("time_spent")
    if time is not None and time.size:
        order = _canonical_order(item, arrays["rater"], time)         # [V] or None
        if order is not None:
            item, time, arrays = item[order], time[order], {k: v[order] for k, v in arrays.items()}
    return (names, n_categories, n_items, item, arrays["rater"], arrays["label"],
            arrays["is_adjudication"], time)


def _canonical_order(item: np.ndarray, rater: np.ndarray, time: np.ndarray) -> np.ndarray | None:
    """One order for the same votes, whatever order they came in (``None``: they are in it): float
    sums of times depend on the order they are added in, and a report (a release's statistics)
    must not. By (item, rater) through one stable sort of a combined key, and by time as well only
    where a rater has two votes on an item."""
    low = int(rater.min())
    span = int(rater.max()) - low + 1
    if int(item.max()) < (1 << 62) // span:
        key = item * span + (rater - low)                             # [V] int64
        ordered = bool(np.all(key[1:] >= key[:-1]))
        order = None if ordered else np.argsort(key, kind="stable")   # [V]
        sorted_key = key if order is None else key[order]
        if not np.any(sorted_key[1:] == sorted_key[:-1]):
            return order
    return np.lexsort((time, rater, item))                            # [V]


def _index(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ids ``[R]`` and each entry's position among them ``[V]``, like
    ``np.unique(ids, return_inverse=True)``; without sorting when the ids are small
    non-negative integers (the usual annotator indices)."""
    if ids.size and ids.min() >= 0 and ids.max() < max(2 * ids.size, 1 << 16):
        present = np.bincount(ids) > 0                                # [max + 1]
        distinct = np.flatnonzero(present)                             # [R]
        position = np.cumsum(present) - 1                              # [max + 1]
        return distinct, position[ids]
    distinct, inverse = np.unique(ids, return_inverse=True)
    return distinct, inverse.reshape(-1)


def _mean_median(values: np.ndarray) -> dict:
    if not values.size:
        return {"n": 0, "mean": NAN, "median": NAN}
    return {"n": int(values.size), "mean": float(values.mean()), "median": float(np.median(values))}


def agreement_report(item, rater, label, is_adjudication, n_categories: int,
                     labels: Sequence[str] | None = None, decided=None, time_spent=None, *,
                     panel: int = 3) -> dict:
    """Agreement figures for one stage, computed with whole-array operations.

    Arguments: the vote table of the module docstring (``item``, ``rater``, ``label``,
    ``is_adjudication``: ``[V]``), ``n_categories`` K, optional ``labels`` (K names),
    ``decided``: optional bool ``[I]`` (then only votes on items marked True are used, e.g. to
    leave pending items out; I = ``len(decided)``), ``time_spent``: optional float ``[V]``
    seconds (``nan`` = not recorded), ``panel``: the panel size (Fleiss' kappa and the vote
    distributions use the items with exactly ``panel`` panel votes).

    Returns a dict of plain Python values:

    - ``n_items`` (items with at least one vote), ``n_votes``, ``n_panel_votes``,
      ``n_adjudication_votes``, ``labels``, ``panel_votes_per_item`` ({number of panel votes:
      items}), ``label_counts`` ({label: panel votes});
    - ``vote_distributions`` (see ``vote_distributions``);
    - ``raw_agreement``, ``fleiss_kappa`` (items with ``panel`` votes; ``fleiss_n_items``),
      ``krippendorff_alpha`` (nominal, items with two panel votes or more;
      ``alpha_n_items``), all on panel votes only (pre-adjudication);
    - ``n_adjudicated_items`` and ``adjudication_rate`` (items with any adjudication vote over
      ``n_items``);
    - ``time_per_vote`` and ``time_per_item`` (``{"n", "mean", "median"}`` over votes with a
      recorded time, and over items with at least one, summing their votes' times) or ``None``
      without ``time_spent``;
    - ``per_rater``: ``{rater id: {"n_votes", "n_panel_votes", "n_adjudication_votes",
      "n_scored", "agreement_with_majority", "mean_time"}}``. A panel vote is scored when the
      other panel votes on its item have a strict majority label (more than half of them: with
      three-vote panels, both others agree); ``agreement_with_majority`` is the fraction of
      scored votes equal to that label. ``mean_time`` is over the rater's timed votes.
    """
    names, n_categories, n_items_all, item, rater, label, adj, time = _prepare(
        item, rater, label, is_adjudication, n_categories, labels, decided, time_spent)
    panel_mask = ~adj                                                  # [V]
    # each vote's (item, category) cell; the arrays are checked, so the table is counted directly
    p_cell = (item * n_categories + label)[panel_mask]                 # [Vp]
    counts = np.bincount(p_cell, minlength=n_items_all * n_categories).reshape(n_items_all, n_categories)  # [I, K]
    present = np.bincount(item, minlength=n_items_all) > 0             # [I] items with a vote
    n_items = int(np.count_nonzero(present))
    adjudicated = np.bincount(item[adj], minlength=n_items_all) > 0    # [I]
    n_adjudicated = int(np.count_nonzero(adjudicated))

    report = {
        "n_items": n_items,
        "n_votes": int(item.size),
        "n_panel_votes": int(p_cell.size),
        "n_adjudication_votes": int(item.size - p_cell.size),
        "labels": names,
        **counts_figures(_rows_where(counts, present), names, panel=panel),
        "n_adjudicated_items": n_adjudicated,
        "adjudication_rate": n_adjudicated / n_items if n_items else NAN,
        "time_per_vote": None,
        "time_per_item": None,
    }

    timed = None
    if time is not None:
        timed = ~np.isnan(time)                                        # [V]
        t_item, t_time = item[timed], time[timed]                      # [Vt], [Vt]
        report["time_per_vote"] = _mean_median(t_time)
        t_items = np.bincount(t_item, minlength=n_items_all)           # [I] timed votes per item
        t_sums = np.bincount(t_item, weights=t_time, minlength=n_items_all)  # [I]
        report["time_per_item"] = _mean_median(t_sums[t_items > 0])

    # per rater: majority of the *other* panel votes on the same item
    raters, r_idx = _index(rater)                                      # [R], [V]
    n_r = len(raters)
    outcome = _majority_table(counts).reshape(-1)[p_cell]              # [Vp] 0, 1 scored, 2 agrees
    by_outcome = np.bincount(r_idx[panel_mask] * 3 + outcome, minlength=3 * n_r).reshape(n_r, 3)  # [R, 3]
    by_role = np.bincount(r_idx * 2 + adj, minlength=2 * n_r).reshape(n_r, 2)  # [R, 2] panel, adjudication
    r_votes = by_role[:, 0] + by_role[:, 1]                            # [R]
    r_adj = by_role[:, 1]                                              # [R]
    r_scored = by_outcome[:, 1] + by_outcome[:, 2]                     # [R]
    r_agree = by_outcome[:, 2]                                         # [R]
    r_frac = np.full(n_r, np.nan)                                      # [R]
    np.divide(r_agree, r_scored, out=r_frac, where=r_scored > 0)
    r_time = np.full(n_r, np.nan)                                      # [R]
    if timed is not None:
        t_r = r_idx[timed]                                             # [Vt]
        r_timed = np.bincount(t_r, minlength=n_r)                      # [R]
        r_tsum = np.bincount(t_r, weights=t_time, minlength=n_r)       # [R]
        np.divide(r_tsum, r_timed, out=r_time, where=r_timed > 0)
    report["per_rater"] = per_rater_rows(raters, r_votes, r_adj, r_scored, r_frac,
                                         r_time if timed is not None else None)
    return report


def counts_figures(counts: np.ndarray, names: list[str], *, panel: int, weights: np.ndarray | None = None) -> dict:
    """The figures of a report that come from the panel-vote count matrix ``[I, K]`` of the
    items with a vote (shared with ``agreement_sums.report_from_sums``). ``weights`` (int ``[I]``):
    how many items each row stands for, so that a table of the distinct count vectors gives the
    figures of every item without repeating rows (None: one item a row)."""
    counts = _as_counts(counts)                                        # [I, K]
    if weights is not None:
        weights = np.asarray(weights, np.int64)                        # [I]
        if weights.shape != (counts.shape[0],) or (weights.size and weights.min() < 0):
            raise ValueError("weights must hold one non-negative count per row of counts")
    n_panel = _row_sums(counts)                                        # [I]
    per_count = _weighted_bincount(n_panel, weights, minlength=0)      # [max + 1]
    label_totals = counts.sum(axis=0) if weights is None else weights @ counts  # [K]
    items = np.ones_like(n_panel) if weights is None else weights      # [I]
    return {
        "panel_votes_per_item": {int(m): int(c) for m, c in enumerate(per_count.tolist()) if c},
        "label_counts": {name: int(label_totals[k]) for k, name in enumerate(names)},
        "vote_distributions": _vote_distributions(counts, n_panel, names, panel=panel, weights=weights),
        "raw_agreement": _raw_agreement(counts, n_panel, weights),
        "fleiss_kappa": _fleiss_kappa(counts, n_panel, panel, weights) if panel >= 2 else NAN,
        "fleiss_n_items": int(items[n_panel == panel].sum()),
        "krippendorff_alpha": _krippendorff_alpha(counts, n_panel, weights),
        "alpha_n_items": int(items[n_panel >= 2].sum()),
    }


def per_rater_rows(raters, votes, adjudication, scored, agreement, mean_time) -> dict:
    """``per_rater`` of a report from per-rater columns ``[R]`` (``mean_time`` ``None``: no
    times were given)."""
    times = [None] * len(raters) if mean_time is None else np.asarray(mean_time, float).tolist()
    columns = zip(np.asarray(raters).tolist(), np.asarray(votes).tolist(), np.asarray(adjudication).tolist(),
                  np.asarray(scored).tolist(), np.asarray(agreement, float).tolist(), times)
    return {r: {"n_votes": v, "n_panel_votes": v - a, "n_adjudication_votes": a, "n_scored": s,
                "agreement_with_majority": f, "mean_time": t}
            for r, v, a, s, f, t in columns}                            # one entry per rater


def majority_scores(counts: np.ndarray, p_item: np.ndarray, p_label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per panel vote, whether it is scored (the other panel votes on its item have a strict
    majority label) and whether it agrees with that label. ``counts`` [I, K] panel votes per
    item and category; ``p_item``, ``p_label`` [Vp] the panel votes. Returns bool [Vp], [Vp]."""
    mine = _majority_table(counts).reshape(-1)[p_item * counts.shape[1] + p_label]  # [Vp]
    return mine > 0, mine > 1                                          # [Vp], [Vp]


def _majority_table(counts: np.ndarray) -> np.ndarray:
    """For every item and category ``[I, K]`` (int8): 0 when a panel vote with that label on the
    item is not scored, 1 when it is scored and disagrees, 2 when it agrees (``majority_scores``);
    each vote then reads its own entry, one lookup per vote instead of one per quantity."""
    n_categories = counts.shape[1]
    # the other votes on the item are counts[i] minus the vote itself; their largest count is
    # max(own, the largest count over the other labels), from the item's two largest counts
    first = counts[:, 0].copy()                                        # [I] largest count
    second = np.zeros_like(first)                                      # [I] second largest (0 with K = 1)
    for k in range(1, n_categories):
        column = counts[:, k]                                          # [I]
        np.maximum(second, np.minimum(first, column), out=second)
        np.maximum(first, column, out=first)
    own = counts - 1                                                   # [I, K] others with that label
    rest = np.where(counts == first[:, None], second[:, None], first[:, None])  # [I, K] best other label
    top = np.maximum(own, rest)                                        # [I, K] others' largest count
    scored = 2 * top > (_row_sums(counts) - 1)[:, None]                # [I, K] a strict majority
    return scored.astype(np.int8) + (scored & (own == top))            # [I, K]
