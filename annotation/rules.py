"""The majority rule of DESIGN 2.3, 2.4 and 2.6 for one work item (a public contract).

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
