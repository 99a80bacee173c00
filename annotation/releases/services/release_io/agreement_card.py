"""The dataset card's agreement section: how much the people who labelled each stage agreed.

Rendered from ``release_statistics``'s ``pre_adjudication_agreement`` and ``vote_distributions``.
Three-vote panels get their chance-corrected figures; single-review stages (relation rows, pairs:
a second review only for disputed units) get their dispute rate and their first labels'
agreement with the blind audit's random sample, each with its exact 95 % interval, and never a
coefficient over the disputed units (``annotation.curation.services.agreement_review``).
"""
from __future__ import annotations


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _num(x, digits: int = 3) -> str:
    return "n/a" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def _interval(ci) -> str:
    return "n/a" if not ci else f"[{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def _single(r: dict) -> bool:
    return (r.get("review") or {}).get("kind") == "single_review"


def agreement_lines(stats: dict) -> list[str]:
    """The three-vote panels' table."""
    lines = ["| stage | items | people per item | panel votes | raw agreement | Fleiss' kappa | Krippendorff's alpha "
             "| adjudicated | three-vote patterns |", "|---|---|---|---|---|---|---|---|---|"]
    for stage, r in stats["pre_adjudication_agreement"].items():
        if r is None or _single(r):
            continue
        patterns = stats["vote_distributions"][stage].get("patterns", {})
        people = (r.get("review") or {}).get("people_per_unit", "n/a")
        lines.append(f"| {stage} | {r['n_items']} | {people} | {r['n_panel_votes']} | {_num(r['raw_agreement'])} | "
                     f"{_num(r['fleiss_kappa'])} | {_num(r['krippendorff_alpha'])} | {_pct(r['adjudication_rate'])} | "
                     f"{', '.join(f'{k}: {v}' for k, v in patterns.items()) or '-'} |")
    return lines


def single_review_lines(stats: dict) -> list[str]:
    """The single-review stages' table (empty when the release has none)."""
    rows = [(stage, r) for stage, r in stats["pre_adjudication_agreement"].items() if r is not None and _single(r)]
    if not rows:
        return []
    lines = ["| stage | units | people per unit | disputed (second review) | 95% CI | first label = blind audit | "
             "95% CI |", "|---|---|---|---|---|---|---|"]
    for stage, r in rows:
        d, a = r.get("dispute") or {}, r.get("audit_agreement") or {}
        audit = (f"{a['n_agree']} of {a['n_judged']} ({_pct(a['agreement'])})" if a.get("n_judged")
                 else "no audited sample")
        lines.append(f"| {stage} | {d.get('n_units', 0)} | {r['review']['people_per_unit']} | "
                     f"{d.get('n_disputed', 0)} ({_pct(d.get('rate'))}) | {_interval(d.get('ci95'))} | {audit} | "
                     f"{_interval(a.get('ci95'))} |")
    return lines


def agreement_section(stats: dict) -> list[str]:
    """The card's agreement subsection, heading included, ending with a blank line."""
    out = ["### Pre-adjudication agreement", "",
           "Panel stages (usability, identity, descriptions): a panel of independent annotators (people per item) "
           "labelled every item; raw agreement, Fleiss' kappa and the vote patterns are over the items with their "
           "full panel, Krippendorff's alpha over those with two votes or more, all before any adjudication.", "",
           *agreement_lines(stats), ""]
    single = single_review_lines(stats)
    if single:
        out += ["Single-review stages (within-video relations, one unit per candidate of a query's row; cross-video "
                "pairs): one person labelled every unit, and a second, independent person only the disputed ones "
                "(the first label was ⊥ or contradicted the model's binary proposal). Agreement between the two "
                "reviews is not reported: the units they share are the disputed ones, so it would be disagreement "
                "by construction. The table gives the dispute rate over every unit, and how often the first label "
                "equals a blind auditor's on the audit's random sample of accepted relations. Intervals are exact "
                "(Clopper-Pearson) and treat units as independent.", "", *single, ""]
    return out
