"""The slow reference of :func:`models.curation.agreement.agreement_report`: the same report built
one item and one vote at a time with Python containers, which the tests and benchmarks hold the
array implementation to."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence

from models.curation.agreement import NAN, _partitions, _pattern_name, _prepare


def per_item_loop_report(item, rater, label, is_adjudication, n_categories: int,
                         labels: Sequence[str] | None = None, decided=None, time_spent=None, *,
                         panel: int = 3) -> dict:
    """``agreement_report`` written the obvious way: one Python dict per item, a loop over items
    and the textbook formulas (Fleiss 1971; Krippendorff's coincidences from vote pairs). Same
    arguments and same result (up to floating-point rounding); for tests and benchmarks."""
    names, n_categories, _, item, rater, label, adj, time = _prepare(
        item, rater, label, is_adjudication, n_categories, labels, decided, time_spent)
    times = time.tolist() if time is not None else [NAN] * item.size
    items: dict[int, dict] = {}
    for i, r, lab, a, t in zip(item.tolist(), rater.tolist(), label.tolist(), adj.tolist(), times):
        entry = items.setdefault(i, {"panel": [], "adjudication": [], "times": []})
        entry["adjudication" if a else "panel"].append((r, lab))
        if not math.isnan(t):
            entry["times"].append(t)

    label_counts = [0] * n_categories
    votes_per_item: Counter = Counter()
    patterns = {_pattern_name(p, panel): 0 for p in _partitions(int(panel), n_categories)}
    combos: Counter = Counter()
    agreements = []                              # per item with >= 2 panel votes
    fleiss_rows = []                             # per item with exactly `panel` votes
    coincidence = [[0.0] * n_categories for _ in range(n_categories)]
    pairable = [0] * n_categories                # pairable votes per category (o's row sums)
    n_alpha = n_adjudicated = 0
    vote_times, item_times = [], []
    raters: dict[int, dict] = {}
    for entry in items.values():
        votes = [lab for _, lab in entry["panel"]]
        m = len(votes)
        tally = Counter(votes)
        votes_per_item[m] += 1
        for lab in votes:
            label_counts[lab] += 1
        if entry["adjudication"]:
            n_adjudicated += 1
        vote_times += entry["times"]
        if entry["times"]:
            item_times.append(sum(entry["times"]))
        if m == panel:
            parts = sorted(tally.values(), reverse=True)
            patterns[_pattern_name(parts, panel)] += 1
            combos[tuple(sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])))] += 1
            fleiss_rows.append(tally)
        if m >= 2:
            pairs = [(a, b) for x, a in enumerate(votes) for y, b in enumerate(votes) if x != y]
            agreements.append(sum(a == b for a, b in pairs) / len(pairs))
            for a, b in pairs:
                coincidence[a][b] += 1.0 / (m - 1)
            n_alpha += 1
            for lab in votes:
                pairable[lab] += 1
        for x, (r, lab) in enumerate(entry["panel"]):
            stats = raters.setdefault(r, {"votes": 0, "adj": 0, "scored": 0, "agree": 0})
            stats["votes"] += 1
            rest = Counter(votes[:x] + votes[x + 1:])
            if rest:
                best, best_n = rest.most_common(1)[0]
                if 2 * best_n > sum(rest.values()):
                    stats["scored"] += 1
                    stats["agree"] += best == lab
        for r, _ in entry["adjudication"]:
            stats = raters.setdefault(r, {"votes": 0, "adj": 0, "scored": 0, "agree": 0})
            stats["votes"] += 1
            stats["adj"] += 1
    rater_times: dict[int, list[float]] = {}
    for r, t in zip(rater.tolist(), times):
        if not math.isnan(t):
            rater_times.setdefault(r, []).append(t)

    # Fleiss' kappa, as in Fleiss (1971)
    kappa = NAN
    if panel >= 2 and fleiss_rows:
        n_sub = len(fleiss_rows)
        p_j = [sum(row[k] for row in fleiss_rows) / (n_sub * panel) for k in range(n_categories)]
        p_i = [(sum(c * c for c in row.values()) - panel) / (panel * (panel - 1)) for row in fleiss_rows]
        p_bar, p_e = sum(p_i) / n_sub, sum(p * p for p in p_j)
        if sum(p > 0 for p in p_j) > 1:
            kappa = (p_bar - p_e) / (1 - p_e)

    # Krippendorff's alpha (nominal), from the coincidences of vote pairs
    alpha = NAN
    n_c, n = pairable, sum(pairable)
    if sum(x > 0 for x in n_c) > 1:
        d_o = sum(coincidence[c][k] for c in range(n_categories) for k in range(n_categories) if c != k)
        d_e = sum(n_c[c] * n_c[k] for c in range(n_categories) for k in range(n_categories) if c != k)
        alpha = 1 - (n - 1) * d_o / d_e

    combinations, detail = {}, {}
    ordered = sorted(combos.items(), key=lambda kv: (-kv[1], [lab for lab, c in kv[0] for _ in range(c)]))
    for combo, count in ordered:
        combinations[tuple((names[lab], c) for lab, c in combo)] = count
        detail[",".join(names[lab] for lab, c in combo for _ in range(c))] = count

    def mean_median(values):
        if not values:
            return {"n": 0, "mean": NAN, "median": NAN}
        return {"n": len(values), "mean": statistics.fmean(values), "median": statistics.median(values)}

    timed = time is not None
    per_rater = {}
    for r in sorted(raters):
        s = raters[r]
        per_rater[r] = {
            "n_votes": s["votes"], "n_panel_votes": s["votes"] - s["adj"],
            "n_adjudication_votes": s["adj"], "n_scored": s["scored"],
            "agreement_with_majority": s["agree"] / s["scored"] if s["scored"] else NAN,
            "mean_time": (statistics.fmean(rater_times[r]) if r in rater_times else NAN) if timed else None,
        }
    n_items = len(items)
    return {
        "n_items": n_items,
        "n_votes": int(item.size),
        "n_panel_votes": sum(label_counts),
        "n_adjudication_votes": sum(len(e["adjudication"]) for e in items.values()),
        "labels": names,
        "panel_votes_per_item": dict(sorted(votes_per_item.items())),
        "label_counts": dict(zip(names, label_counts)),
        "vote_distributions": {"panel": int(panel), "n_items": len(fleiss_rows), "patterns": patterns,
                               "detail": detail, "combinations": combinations},
        "raw_agreement": sum(agreements) / len(agreements) if agreements else NAN,
        "fleiss_kappa": kappa,
        "fleiss_n_items": len(fleiss_rows),
        "krippendorff_alpha": alpha,
        "alpha_n_items": n_alpha,
        "n_adjudicated_items": n_adjudicated,
        "adjudication_rate": n_adjudicated / n_items if n_items else NAN,
        "time_per_vote": mean_median(vote_times) if timed else None,
        "time_per_item": mean_median(item_times) if timed else None,
        "per_rater": per_rater,
    }
