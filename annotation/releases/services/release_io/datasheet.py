"""The dataset card's datasheet sections (after Gebru et al., *Datasheets for Datasets*, and the
Hugging Face dataset card template): motivation, composition, collection, uses and limits, licences,
maintenance. Each is a list of Markdown lines ending with a blank line, written from
``release.json``'s content (``body``), the statistics and the construction configuration only.
"""
from __future__ import annotations

from annotation.releases.services.release_io.plots import PLOTS


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def motivation(body: dict) -> list[str]:
    return ["## Motivation", "",
            "Text-to-trajectory retrieval asks for the one tracked object of a video that a sentence describes, "
            "and the reverse. Its benchmarks are only as good as their relation labels: a query that also matches "
            "an unlabelled candidate turns a correct answer into a miss. This release exists so that every "
            "(query, candidate) pair a metric reads has been verified by people, with the provenance of each "
            "decision kept: which model proposed what, who voted how (under pseudonyms), who adjudicated, and what "
            "an independent audit found. It was built with Trajlab's construction protocol (model proposals, "
            "three-person panels, complete within-video relation rows, mined cross-video pairs, audits).", ""]


def _relation_totals(stats: dict) -> dict[str, dict[str, int]]:
    """Per split: relations, binary ones, unknown (⊥) ones and pseudo-labels."""
    out: dict[str, dict[str, int]] = {}
    for row in stats.get("relations") or []:
        t = out.setdefault(row["split"], {"all": 0, "binary": 0, "unknown": 0, "pseudo": 0, "cross": 0})
        t["all"] += row["n"]
        if row["pseudo"]:
            t["pseudo"] += row["n"]
            continue
        t["binary" if row["label"] in (0, 1) else "unknown"] += row["n"]
        if row["stratum"] != "within":
            t["cross"] += row["n"]
    return out


def _strata(stats: dict) -> list[str]:
    rows: dict[tuple[str, str], dict[int, int]] = {}
    for row in stats.get("relations") or []:
        if row["stratum"] == "within" or row["pseudo"]:
            continue
        rows.setdefault((row["split"], row["stratum"]), {}).setdefault(row["label"], 0)
        rows[(row["split"], row["stratum"])][row["label"]] += row["n"]
    if not rows:
        return ["No cross-video pairs were mined for these splits."]
    lines = ["| split | stratum | pairs | 1 | 0 | ⊥ |", "|---|---|---|---|---|---|"]
    for (split, stratum), labels in sorted(rows.items()):
        lines.append(f"| {split} | {stratum} | {sum(labels.values())} | {labels.get(1, 0)} | {labels.get(0, 0)} | "
                     f"{labels.get(-1, 0)} |")
    return lines


def composition(body: dict, stats: dict) -> list[str]:
    totals = _relation_totals(stats)
    lines = ["## Composition", "",
             "A record is one row of a table (the list under *Files*). The evaluation unit is a query of "
             "`benchmark` against the complete candidate pool of its video and, across videos, the candidates "
             "of its split.", "",
             "| split | evaluated queries | candidates | relations | binary | unknown (⊥) | ⊥ share | "
             "cross-video | pseudo-labels |", "|---|---|---|---|---|---|---|---|---|"]
    for split in body["splits"]:
        report = (stats.get("completeness") or {}).get(split) or {}
        t = totals.get(split, {"all": 0, "binary": 0, "unknown": 0, "pseudo": 0, "cross": 0})
        human = t["binary"] + t["unknown"]
        lines.append(f"| {split} | {report.get('queries', 'n/a')} | {report.get('trajectories', 'n/a')} | {t['all']} | "
                     f"{t['binary']} | {t['unknown']} | {_pct(t['unknown'] / human if human else None)} | "
                     f"{t['cross']} | {t['pseudo']} |")
    lines += ["", "The ⊥ share counts verified relations (pseudo-labels apart) whose label stayed unknown. "
              "Mining strata of the cross-video pairs (non-pseudo), with their final labels:", "", *_strata(stats), "",
              "Pseudo-labels are kept apart: `relations.pseudo` is true for them, `relations.rule_id` names the frozen "
              "rule (`pseudo_rules`, with its declared error bound and calibration), and they are training-only; no "
              "metric of this card and no gallery of dev or test reads them.", "",
              "![Query length](plots/query_length.png)", "", "![Trajectory length](plots/trajectory_length.png)", "",
              "![Relations per query](plots/relations_per_query.png)", ""]
    return lines


def _budget(budget) -> str:
    if not budget:
        return "-"
    return ", ".join(f"{k} {v}" for k, v in sorted(budget.items()))


def collection(config: dict) -> list[str]:
    lines = ["## Collection process", "",
             "Videos were imported with their source recordings and assigned to splits by split group before any "
             "construction. Every model output is a proposal that people accepted, corrected or refused.", "",
             "### Proposal models", "", "| model | version | backend | checkpoint SHA-256 | categories |",
             "|---|---|---|---|---|"]
    for p in config.get("proposal_configs") or []:
        sha = (p.get("checkpoint_sha256") or "")[:16] or "-"
        lines.append(f"| {p['name']} | {p['version']} | {p['backend']} | {sha} | "
                     f"{', '.join(map(str, p.get('categories') or [])) or '-'} |")
    lines += ["", "### Describers and query writers", "", "| run | role | backend | prompt version | prompt SHA-256 | "
              "budget |", "|---|---|---|---|---|---|"]
    for role, key in (("describer", "describer_runs"), ("query writer", "writer_runs")):
        for r in config.get(key) or []:
            backend = (r.get("backend") or {}).get("kind") or (r.get("backend") or {}).get("name") or "-"
            lines.append(f"| {r['id']} | {role} | {backend} | {r['prompt_version']} | "
                         f"{(r.get('prompt_sha256') or '')[:16] or '-'} | {_budget(r.get('budget'))} |")
    mining = config.get("mining_runs") or []
    lines += ["", f"Mining runs: {len(mining)}; their budgets, seeds, encoders and strata are in "
              "`construction.json` and `mining_runs.config`. The prompts' full texts are in `construction.json` "
              "(`prompts`, by version).", ""]
    return lines


def protocol(config: dict) -> list[str]:
    policy = config.get("review_policy") or {}
    return ["## Annotation protocol", "",
            f"- Usability, identity and descriptions: panels of {policy.get('panel_size', 3)} distinct annotators; "
            f"a label with at least {policy.get('required_votes', 2)} votes decides, otherwise an adjudicator's "
            "vote is added and the same rule applied. A corrected description is approved only as the exact "
            "consolidated version that at least two people approved.",
            "- Within-video relations: every query is checked against every candidate of its frozen pool (the "
            "complete row); disputed candidates get an independent second review; a candidate still uncertain "
            "stays ⊥. Faithfulness and naturalness are rated in the same pass.",
            "- Cross-video pairs: potential matches and hard negatives are reviewed pair by pair, easy negatives in "
            "stratified samples; unverified pairs stay ⊥.",
            "- Reviewers never see each other's votes before voting; auditors re-check a random sample of accepted "
            "records blind to votes and model suggestions, and a sample of difficult ones apart.",
            "- Every vote, reason, correction and adjudication is in `votes`, `relation_judgments`, "
            "`description_versions` and `work_items`; audits in `audits`, `audit_samples` and `audit_judgments`.",
            ""]


def uses(body: dict) -> list[str]:
    return ["## Uses and limits", "",
            "- Intended: evaluating and training text-to-trajectory, trajectory-to-text and cross-video "
            "retrieval (T2Traj, Traj2T, OCVR) on the `benchmark` queries and their binary, non-pseudo relations; "
            "studying annotation agreement and model-proposal quality from the kept votes and versions.",
            "- Queries are model-generated: a language model wrote each query from approved facts only, and people "
            "verified it. Their wording follows the writer's prompt and style, not free human description; do not "
            "read them as a sample of how people ask.",
            "- Majority approval is a rule, not a guarantee: a label decided by two of three votes can still be "
            "wrong. The audit's random stratum estimates how often (see *How reliable the labels are*), with its "
            "interval.",
            "- ⊥ is not a negative: an unknown relation must be left out of a metric, never scored as 0. "
            "Pseudo-labels are training-only.",
            "- Out of scope: identifying people. Trajectories are boxes of tracked objects; reviewers appear under "
            "pseudonyms only.", ""]


def licences(body: dict) -> list[str]:
    media = ("The video files are included under `media/`." if body["media_included"] else
             "The video files are not included: `videos.path` and `videos.content_sha256` name them.")
    return ["## Licences", "",
            f"- Annotations, metadata and derived tables: {body['license']}.",
            f"- Media: {media} Each video keeps the licence of its source recording (`sources`, `videos`); "
            "this release does not relicense them. Obtain and use the videos under their own terms.", ""]


def maintenance(body: dict) -> list[str]:
    parent = body.get("parent")
    return ["## Maintenance and versioning", "",
            f"- This is version {body['version']} of {body['name']}, folder format `{body['format']}`. A release "
            "never changes: it is read-only, and `SHA256SUMS` (whose own SHA-256 names the release) proves it.",
            "- Versions follow MAJOR.MINOR.PATCH. A new version names its parent and lists the records added, "
            "removed and changed (`release.json` `changes`, *Changes since the parent* below); "
            "`index/records.tsv` lets anyone diff two releases record by record.",
            "- A tracking defect is fixed by a new pool version, which sends every query of the old one back to "
            "verification; errors found by audits are corrected in the platform and published as a new version.",
            f"- Parent: {parent['name']} {parent['version']}." if parent else "- Parent: none (first release).",
            f"- Plots ({', '.join(f'`{p}`' for p in PLOTS)}) and this card are written with the release and listed "
            "in `SHA256SUMS`.", ""]
