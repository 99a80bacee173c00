"""The review rules of annotation, as a public contract: the pure majority rule and the relation and
description outcomes live in :mod:`models.curation.rules` (no Django); this module names them for
the stages, services and tests of ``annotation``."""
from models.curation.rules import (
    ADJUDICATE,
    ADJUDICATE_CODE,
    APPROVED,
    CONSOLIDATE,
    MINOR,
    OUTCOMES,
    PENDING,
    PENDING_CODE,
    REJECTED,
    UNRESOLVED,
    UNRESOLVED_CODE,
    consolidate_corrections,
    decide,
    decide_counts,
    decide_reopened,
    description_outcome,
    relation_disputed,
    relation_final,
)

__all__ = [
    "ADJUDICATE", "ADJUDICATE_CODE", "APPROVED", "CONSOLIDATE", "MINOR", "OUTCOMES", "PENDING",
    "PENDING_CODE", "REJECTED", "UNRESOLVED", "UNRESOLVED_CODE", "consolidate_corrections", "decide",
    "decide_counts", "decide_reopened", "description_outcome", "relation_disputed", "relation_final",
]
