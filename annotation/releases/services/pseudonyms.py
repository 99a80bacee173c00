"""Reviewer pseudonyms that stay the same across releases.

A person is named ``reviewer-NNNN`` in every release by a stored mapping
(:class:`annotation.models.ReviewerPseudonym`): the first release that names someone gives them the
next free number (newcomers in account-id order), and the mapping never changes afterwards. So a new
person joining never renumbers anybody, and two releases of the same records are the same bytes
where people are concerned.
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db import connection, transaction
from django.db.models import Max

from annotation.models import ReviewerPseudonym
from annotation.models.releases import pseudonym_of


def reviewer_pseudonyms(*, people: Iterable[int]) -> dict[int, str]:
    """Account id -> pseudonym of ``people`` as stored (people without one are left out)."""
    return {user: pseudonym_of(number) for user, number in
            ReviewerPseudonym.objects.filter(user_id__in=set(people)).values_list("user_id", "number")}


def reviewer_pseudonyms_assign(*, people: Iterable[int]) -> dict[int, str]:
    """Give every one of ``people`` (account ids) without a pseudonym the next free number, in
    account-id order, and return the pseudonyms of all of them. Locks the mapping table (EXCLUSIVE on
    PostgreSQL; SQLite serialises writers) so two releases published at once cannot hand out one
    number twice."""
    people = set(people)
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {ReviewerPseudonym._meta.db_table} IN EXCLUSIVE MODE")
        known = set(ReviewerPseudonym.objects.filter(user_id__in=people).values_list("user_id", flat=True))
        newcomers = sorted(people - known)
        if newcomers:
            last = ReviewerPseudonym.objects.aggregate(n=Max("number"))["n"] or 0
            ReviewerPseudonym.objects.bulk_create([ReviewerPseudonym(user_id=user, number=last + i)
                                                   for i, user in enumerate(newcomers, start=1)])
    return reviewer_pseudonyms(people=people)
