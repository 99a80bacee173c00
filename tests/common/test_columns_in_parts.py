"""``integer_columns(..., parts=N)``: a table read as N ranges of its pages at once, each on its own
connection, in one snapshot (common/columns.py), gives the rows of the whole read, each once."""
from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import IntegerField
from django.db.models.functions import Cast, Length

import common.columns as columns
from common.columns import integer_columns

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "postgresql", reason="split reads are PostgreSQL's")]


@pytest.fixture
def users():
    User = get_user_model()
    User.objects.bulk_create(User(username=f"reader-{i:05d}-{'x' * (i % 37)}", password="!", is_staff=i % 3 == 0)
                             for i in range(1500))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {User._meta.db_table}")
    return User.objects.all()


def _rows(*arrays: np.ndarray) -> list[tuple]:
    return sorted(zip(*(a.tolist() for a in arrays)))


@pytest.mark.parametrize("parts", [2, 3])
def test_a_read_in_parts_equals_the_whole_read(users, parts, monkeypatch):
    monkeypatch.setattr(columns, "MIN_PAGES_PER_PART", 1)
    split = []
    copied = columns._copied_columns
    monkeypatch.setattr(columns, "_copied_columns", lambda rows, n: split.append(rows) or copied(rows, n))
    expressions = ("id", Length("username"), Cast("is_staff", IntegerField()))
    whole = integer_columns(users.filter(id__gt=10), *expressions)
    split.clear()
    in_parts = integer_columns(users.filter(id__gt=10), *expressions, parts=parts)
    assert len(split) == parts                              # the ranges were read apart
    assert _rows(*in_parts) == _rows(*whole) and len(whole[0]) == users.filter(id__gt=10).count()
    assert all(a.dtype == np.int64 for a in in_parts)


def test_a_small_table_or_an_open_transaction_is_read_whole(users, monkeypatch):
    split = []
    copied = columns._copied_columns
    monkeypatch.setattr(columns, "_copied_columns", lambda rows, n: split.append(rows) or copied(rows, n))
    (ids,) = integer_columns(users, "id", parts=2)          # fewer pages than two parts need
    assert len(split) == 1 and sorted(ids.tolist()) == sorted(users.values_list("id", flat=True))
    monkeypatch.setattr(columns, "MIN_PAGES_PER_PART", 1)
    split.clear()
    with transaction.atomic():                               # its own writes are not the others' to see
        get_user_model().objects.create(username="written-in-the-transaction")
        (ids,) = integer_columns(users, "id", parts=2)
    assert len(split) == 1 and ids.size == users.count()


def test_rows_updated_while_the_parts_are_read_are_read_once_as_they_were(users, monkeypatch):
    """Every row is updated (each new version lands in another page) and committed after the first
    range's snapshot and before the others' reads: they read in that snapshot, so no row is read
    twice (old version in one range, new one in another) and none with its new values."""
    monkeypatch.setattr(columns, "MIN_PAGES_PER_PART", 1)
    before = _rows(*integer_columns(users, "id", Cast("is_staff", IntegerField())))
    read_in_snapshot = columns._copied_in_snapshot

    def update_then_read(rows, n_columns, snapshot):
        connection.ensure_connection()                       # this thread's own connection, autocommit
        get_user_model().objects.update(is_staff=True)
        return read_in_snapshot(rows, n_columns, snapshot)

    monkeypatch.setattr(columns, "_copied_in_snapshot", update_then_read)
    during = integer_columns(users, "id", Cast("is_staff", IntegerField()), parts=3)
    assert _rows(*during) == before
    assert get_user_model().objects.filter(is_staff=False).count() == 0    # the updates were committed


def test_parts_below_one_are_refused(users):
    with pytest.raises(ValueError, match="parts must be at least 1"):
        integer_columns(users, "id", parts=0)
