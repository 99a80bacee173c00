"""Reviewer pseudonyms that stay the same across releases.

A person is named ``reviewer-NNNN`` in every release by a stored mapping
(:class:`annotation.models.ReviewerPseudonym`): the first release that names someone draws them a
free number uniformly at random (a cryptographic draw, so a number tells nothing of the account, its
age or the order people joined), and the mapping never changes afterwards. So a new person joining
never renumbers anybody, and two releases of the same records are the same bytes where people are
concerned. (Mappings stored before numbers were drawn keep their numbers.)
"""
from __future__ import annotations

import secrets
from collections.abc import Iterable

from django.db import connection, transaction

from annotation.models import ReviewerPseudonym
from annotation.models.releases import pseudonym_of


def reviewer_pseudonyms(*, people: Iterable[int]) -> dict[int, str]:
    """Account id -> pseudonym of ``people`` as stored (people without one are left out)."""
    return {user: pseudonym_of(number) for user, number in
            ReviewerPseudonym.objects.filter(user_id__in=set(people)).values_list("user_id", "number")}


# Pseudonym numbers are drawn from 1..NUMBERS; the space grows tenfold whenever it is a tenth full.
NUMBERS = 999_999


def _draw(taken: set[int], count: int) -> list[int]:
    """``count`` distinct numbers not in ``taken``, drawn uniformly at random."""
    space = NUMBERS
    while len(taken) + count > space // 10:
        space = space * 10 + 9
    drawn: list[int] = []
    while len(drawn) < count:
        number = 1 + secrets.randbelow(space)
        if number not in taken:
            taken.add(number)
            drawn.append(number)
    return drawn


def reviewer_pseudonyms_assign(*, people: Iterable[int]) -> dict[int, str]:
    """Give every one of ``people`` (account ids) without a pseudonym a free number drawn at random
    (the module docstring), and return the pseudonyms of all of them. Locks the mapping table
    (EXCLUSIVE on PostgreSQL; SQLite serialises writers) so two releases published at once cannot
    hand out one number twice."""
    people = set(people)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {ReviewerPseudonym._meta.db_table} IN EXCLUSIVE MODE")
        known = set(ReviewerPseudonym.objects.filter(user_id__in=people).values_list("user_id", flat=True))
        newcomers = sorted(people - known)
        if newcomers:
            taken = set(ReviewerPseudonym.objects.values_list("number", flat=True))
            ReviewerPseudonym.objects.bulk_create([ReviewerPseudonym(user_id=user, number=number)
                                                   for user, number in zip(newcomers, _draw(taken, len(newcomers)),
                                                                           strict=True)])
    return reviewer_pseudonyms(people=people)
