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
