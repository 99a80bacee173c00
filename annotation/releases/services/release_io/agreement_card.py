"""The dataset card's agreement section: how much the people who labelled each stage agreed.

Rendered from ``release_statistics``'s ``pre_adjudication_agreement`` and ``vote_distributions``.
"""
from __future__ import annotations


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x, digits: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def agreement_lines(stats: dict) -> list[str]:
    lines = ["| stage | items | panel votes | raw agreement | Fleiss' kappa | Krippendorff's alpha | adjudicated | "
             "three-vote patterns |", "|---|---|---|---|---|---|---|---|"]
    for stage, r in stats["pre_adjudication_agreement"].items():
        if r is None:
            continue
        patterns = stats["vote_distributions"][stage].get("patterns", {})
        lines.append(f"| {stage} | {r['n_items']} | {r['n_panel_votes']} | {_num(r['raw_agreement'])} | "
                     f"{_num(r['fleiss_kappa'])} | {_num(r['krippendorff_alpha'])} | {_pct(r['adjudication_rate'])} | "
                     f"{', '.join(f'{k}: {v}' for k, v in patterns.items()) or '-'} |")
    return lines


def agreement_section(stats: dict) -> list[str]:
    """The card's agreement subsection, heading included, ending with a blank line."""
    return ["### Pre-adjudication agreement", "", "Panel votes before any adjudication (three annotators per item; "
            "pairs: the first and the second review).", "", *agreement_lines(stats), ""]
