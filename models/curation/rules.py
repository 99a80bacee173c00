"""The majority rule of DESIGN 2.3, 2.4 and 2.6 for one work item, and the relation and description
outcomes (public contracts, re-exported by ``annotation.rules``).

``votes`` are labels in casting order: the first ``panel`` come from independent annotators,
any later ones from adjudication. ``decisive`` are the labels that can decide the item (for
usability ``usable``/``unusable``; for identity ``same``/``different``; ``uncertain`` never
decides). The result is ``"pending"`` while fewer than ``panel`` votes are in; the decisive label
with at least ``required`` of the panel's votes; otherwise ``"adjudicate"`` until an
adjudication vote exists; after it, the decisive label with at least ``required`` votes in all,
else ``"unresolved"`` (not retained, or kept separate and flagged).

If two decisive labels both reach ``required`` (possible only when ``required`` is at most half
the panel), the one with more votes wins; an exact tie counts as no majority.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence

import numpy as np

PENDING = "pending"
ADJUDICATE = "adjudicate"
UNRESOLVED = "unresolved"
OUTCOMES = (PENDING, ADJUDICATE, UNRESOLVED)


def _majority(votes: Sequence[str], decisive: Collection[str], required: int) -> str | None:
    counts = Counter(v for v in votes if v in decisive)
    reaching = sorted((n, label) for label, n in counts.items() if n >= required)
    if not reaching:
        return None
    if len(reaching) > 1 and reaching[-1][0] == reaching[-2][0]:
        return None  # a tie between decisive labels is no majority
    return reaching[-1][1]


def decide(votes: Sequence[str], decisive: Collection[str], required: int = 2, panel: int = 3) -> str:
    """The state of one item given its votes (see the module docstring)."""
    if isinstance(votes, str) or isinstance(decisive, str):
        raise ValueError("votes and decisive must be collections of labels, not a single string")
    if not decisive:
        raise ValueError("decisive must name at least one label")
    if set(decisive) & set(OUTCOMES):
        raise ValueError(f"decisive labels must not be named like an outcome ({', '.join(OUTCOMES)})")
    if not (isinstance(panel, int) and isinstance(required, int) and 1 <= required <= panel):
        raise ValueError(f"need 1 <= required <= panel, got required={required!r}, panel={panel!r}")
    if any(not isinstance(v, str) or not v for v in votes):
        raise ValueError("every vote must be a non-empty label")
    if len(votes) < panel:
        return PENDING
    label = _majority(votes[:panel], decisive, required)
    if label is not None:
        return label
    if len(votes) == panel:
        return ADJUDICATE
    label = _majority(votes, decisive, required)
    return label if label is not None else UNRESOLVED


def decide_reopened(votes: Sequence[str], decisive: Collection[str], required: int = 2, *,
                    adjudicated: bool) -> str:
    """The state of an item reopened by a consolidation conflict (DESIGN 2.4): its panel majority
    is part of a contradiction, so it cannot settle the item again by itself. Until an adjudication
    follows the reopening the item is ``"adjudicate"``; then :func:`decide` runs over all its
    ``votes`` (panel and adjudication votes together, in casting order) as one panel, and a result
    without a majority is ``"unresolved"``, never a further round of adjudication."""
    if not adjudicated:
        return ADJUDICATE
    if not votes:
        raise ValueError("an adjudicated item has at least one vote")
    outcome = decide(votes, decisive, required=min(required, len(votes)), panel=len(votes))
    return UNRESOLVED if outcome == ADJUDICATE else outcome


# -- the same rule over many items at once --------------------------------------------------------
PENDING_CODE, ADJUDICATE_CODE, UNRESOLVED_CODE = -1, -2, -3


def _majority_codes(counts, decisive_mask, required):
    """Per row: the index of the decisive label with the most votes if it reaches ``required`` and
    is not tied with another decisive label; else -1."""
    masked = np.where(decisive_mask[None, :], counts, -1)                       # [I, K]
    best = masked.argmax(axis=1)                                                 # [I]
    top = masked[np.arange(len(counts)), best]                                   # [I]
    ties = (masked == top[:, None]).sum(axis=1) > 1                              # [I]
    return np.where((top >= required) & ~ties, best, -1)


def decide_counts(panel_counts, all_counts, n_adjudication, decisive_mask, required: int = 2, panel: int = 3):
    """``decide`` for many items at once, from vote counts (panel votes are the non-adjudication ones).

    ``panel_counts``/``all_counts``: [I, K] votes per label (panel only / panel and adjudication),
    ``n_adjudication``: [I], ``decisive_mask``: [K] bool. Returns [I] ints: a decisive label's index,
    or ``PENDING_CODE``, ``ADJUDICATE_CODE``, ``UNRESOLVED_CODE``.
    """
    panel_counts = np.asarray(panel_counts)
    all_counts = np.asarray(all_counts)
    decisive_mask = np.asarray(decisive_mask, bool)
    n_panel = panel_counts.sum(axis=1)                                           # [I]
    from_panel = _majority_codes(panel_counts, decisive_mask, required)          # [I]
    from_all = _majority_codes(all_counts, decisive_mask, required)              # [I]
    adjudicated = np.asarray(n_adjudication) > 0                                 # [I]
    out = np.where(from_panel >= 0, from_panel,
                   np.where(~adjudicated, ADJUDICATE_CODE, np.where(from_all >= 0, from_all, UNRESOLVED_CODE)))
    return np.where(n_panel < panel, PENDING_CODE, out)


# -- descriptions (DESIGN 2.6) --------------------------------------------------------------------
APPROVED, REJECTED, CONSOLIDATE = "approved", "rejected", "consolidate"
MINOR = "usable_after_minor_correction"


def description_outcome(votes: Sequence[tuple[str, str | None]], version_hash: str, *, required: int = 2,
                        panel: int = 3, may_consolidate: bool = True) -> tuple[str, str | None]:
    """The state of one description version's review: ``(outcome, approved_hash)``.

    ``votes`` are ``(label, corrected_hash)`` in casting order (the first ``panel`` from the panel,
    later ones from adjudication); ``corrected_hash`` is the content hash of the correction that a
    ``usable_after_minor_correction`` vote proposes (``None`` for other labels). A ``usable`` vote
    approves exactly ``version_hash``; a correction vote approves exactly its corrected version.
    Approvals are counted per hash, so approving different edits never approves their union.

    Outcomes: ``pending`` (panel incomplete); ``approved`` with the hash that has ≥ ``required``
    approvals; ``rejected`` (≥ ``required`` ``unusable``); a tie between the two (possible with a
    larger panel) is no majority; ``consolidate`` when corrections were
    proposed but no version reached ``required`` (the corrections are merged into one final version
    that goes to a new round; only when ``may_consolidate``); otherwise ``adjudicate`` until an
    adjudication vote exists, after which all votes count and the result is ``approved``,
    ``rejected`` or ``unresolved``.
    """
    if len(votes) < panel:
        return PENDING, None

    def tally(vs) -> tuple[str | None, int]:
        approvals = Counter(version_hash if label == "usable" else h for label, h in vs
                            if label == "usable" or (label == MINOR and h is not None))
        if approvals:
            best, n = approvals.most_common(1)[0]
            if n >= required and list(approvals.values()).count(n) == 1:
                return best, n
        return None, 0

    approved, n_approved = tally(votes[:panel])
    n_rejected = sum(1 for label, _ in votes[:panel] if label == "unusable")
    if approved is not None and n_approved > n_rejected:
        return APPROVED, approved
    if n_rejected >= required and n_rejected > n_approved:
        return REJECTED, None
    if len(votes) == panel:
        if may_consolidate and any(label == MINOR for label, _ in votes[:panel]):
            return CONSOLIDATE, None
        return ADJUDICATE, None
    approved, n_approved = tally(votes)
    n_rejected = sum(1 for label, _ in votes if label == "unusable")
    if approved is not None and n_approved > n_rejected:
        return APPROVED, approved
    if n_rejected >= required and n_rejected > n_approved:
        return REJECTED, None
    return UNRESOLVED, None


def consolidate_corrections(base: dict, corrections: Sequence[dict]) -> dict:
    """One final version from several corrections of ``base`` (``models.facts.Description`` dicts).

    Field by field: what every correction agrees on is kept; a text field the corrections disagree
    on becomes empty (unknown); a fact (by id) that the corrections give differently, or that some
    delete and others keep, stays in as ``known: false`` with an empty value (unresolved fields
    stay unknown). A fact added by only some corrections is left out.
    """
    if not corrections:
        raise ValueError("nothing to consolidate")
    out: dict = {}
    for key in ("appearance", "motion"):
        values = {c[key] for c in corrections}
        out[key] = values.pop() if len(values) == 1 else ""
    base_ids = [f["id"] for f in base["facts"]]
    ids = base_ids + sorted({f["id"] for c in corrections for f in c["facts"]} - set(base_ids))
    facts = []
    for fid in ids:
        versions = [next((f for f in c["facts"] if f["id"] == fid), None) for c in corrections]
        present = [v for v in versions if v is not None]
        if len(present) == len(versions) and all(v == present[0] for v in present):
            facts.append(dict(present[0]))
        elif fid in base_ids and present:
            template = next(f for f in base["facts"] if f["id"] == fid)
            facts.append({**template, "value": "", "known": False})
        # a fact only some corrections add, or that all delete, is left out
    out["facts"] = facts
    return out


# -- relations (DESIGN 2.8, 2.9) ------------------------------------------------------------------
def relation_disputed(first: int, prelabel: int | None) -> bool:
    """A reviewed pair needs an independent second review when the reviewer was unsure (⊥) or
    disagrees with a binary pre-label."""
    return first == -1 or (prelabel in (0, 1) and first != prelabel)


def relation_final(labels: Sequence[int]) -> int:
    """The final label of a pair from its reviews in order (1, 0 or -1 each): one review stands
    alone; with a second review, its binary label stands if the first was unsure or agrees, and two
    contradicting reviews (or a second unsure one) leave the pair ⊥."""
    if not labels or any(x not in (1, 0, -1) for x in labels):
        raise ValueError(f"labels must be a non-empty sequence of 1, 0, -1; got {list(labels)!r}")
    if len(labels) == 1:
        return int(labels[0])
    first, second = labels[0], labels[-1]
    if second != -1 and first in (-1, second):
        return int(second)
    return -1
