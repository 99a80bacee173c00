"""The dataset card's evaluation section: how to score rankings with the release's ``evaluate.py``.

The scorer itself is :mod:`.evaluate_kit`, copied into every release folder as ``evaluate.py``;
this section documents its predictions format and works one example through by hand.
"""
from __future__ import annotations


def evaluation_section(body: dict) -> list[str]:
    """The card's "Evaluating on this release" section, heading included, ending with a blank line."""
    splits = [s for s in body.get("splits") or [] if s in ("dev", "test")] or list(body.get("splits") or ["test"])
    split = "test" if "test" in splits else splits[0]
    return [
        "## Evaluating on this release", "",
        "`evaluate.py` (Python 3.10+ and NumPy, nothing else) scores rankings against this release's own ground "
        "truth with the platform's metrics and candidate pools, so figures reported on the release are "
        "comparable. Run it from the release folder:", "",
        "```bash",
        f"python evaluate.py --task t2traj --split {split} --predictions mine.jsonl --json",
        f"python evaluate.py --task t2traj --split {split} --predictions mine.jsonl --baseline theirs.jsonl --json",
        "```", "",
        "Predictions are JSON Lines, one object per ranking row with exactly two keys, the ranking best first "
        "and complete (every item of the row's gallery once):", "",
        "| task | one line | the ranking holds |", "|---|---|---|",
        "| `t2traj` | `{\"query_id\": Q, \"ranking\": [...]}` | every trajectory id of `benchmark.candidates` "
        "of query Q (its video's frozen pool) |",
        "| `traj2t` | `{\"trajectory_id\": T, \"ranking\": [...]}` | every query id of the split (`benchmark` rows), "
        "for every candidate T of the split |",
        "| `ocvr` | `{\"query_id\": Q, \"ranking\": [...]}` | every video id of the split |", "",
        "Every row of the split needs its line. A line that is not such an object, an id that is not an integer, "
        "an unknown or repeated id, or a ranking that leaves out an item is refused with its line number and "
        "nothing is scored (exit status 2); rows without a line are refused too, unless `--missing-as-misses` "
        "scores them as misses.", "",
        "Relevance is the verified label: `relations` rows with label 1 or 0 and `pseudo` false; every other "
        "pair is unknown and leaves that row's gallery. A row without a relevant item is not scored. For OCVR a "
        "video is relevant when one of its candidates matches, irrelevant when every candidate is a confirmed "
        "mismatch, unknown otherwise. `--json` prints, in percent, `R@1`, `R@3`, `R@5`, `R@10`, `mAP`, `mAP@10`, "
        "`n_queries` (rows scored), the same per pool-size stratum (`strata`), `random_R@1` (T2Traj) and "
        "`n_videos` (OCVR); with `--baseline` also `baseline_metrics` and, under `difference`, each metric's "
        "difference (predictions minus baseline, percentage points) with its paired bootstrap 95% interval "
        "(`low`, `high`; 10,000 resamples of the scored rows, seed 0) and `p_value`.", "",
        "A worked example. Query 7's pool holds trajectories 11, 12 and 13; 12 is its match, 11 a confirmed "
        "mismatch, and its relation to 13 stayed unknown. The line", "",
        "```json", "{\"query_id\": 7, \"ranking\": [13, 11, 12]}", "```", "",
        "ranks 13 first, but 13 is unknown and leaves the gallery, so the scored ranking is 11, 12: the match is "
        "at rank 2, and this row scores R@1 = 0, R@3 = R@5 = R@10 = 1, AP = mAP@10 = 1/2. `--json` reports the "
        "means of such rows over the split, times 100.", ""]
