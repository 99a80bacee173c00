"""Query results as NumPy columns: one statement, no Python step per row.

:func:`integer_columns` reads the rows of a queryset as one int64 array per expression. On
PostgreSQL each column is aggregated into one byte string (``string_agg`` of each value's 8
big-endian bytes) and the single result row is read with ``COPY ... TO STDOUT (FORMAT binary)``,
which NumPy reads in place: a statement that sent its rows one by one would cost the client more
than the query itself (psycopg handles every row of a result or of a ``COPY`` apart, a few
microseconds each). Elsewhere (SQLite) the rows come through the cursor.

:func:`integer_columns_among` reads the rows that point to a set of parent rows known by their
keys (the votes of some items), joining on this side where the keys are dense: PostgreSQL would
probe a hash table of the parents once per row, which costs more than reading the rows.

The arrays cover the rows in one order, the same for every column and none in particular (the
queryset's ordering is dropped, as an aggregate keeps none): a caller that needs an order reads
an id column and sorts by it (:func:`order_by_column`).

PostgreSQL runs one statement on one core, and its aggregate (the expressions and ``string_agg``
of every row) takes most of a large read. With ``parts`` above 1, outside a transaction, a large
table is read as that many ranges of its pages at once, each on a connection of its own, all in
one snapshot (:func:`_copied_in_parts`).
"""
from __future__ import annotations

import re
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.models import (
    BigIntegerField,
    BooleanField,
    Case,
    ExpressionWrapper,
    F,
    IntegerField,
    Lookup,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL

_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_EMPTY = "''::bytea"
# A part of a split read covers at least this many pages of its table (8 kB each): below, a second
# connection costs more than it saves
MIN_PAGES_PER_PART = 2_000
_SNAPSHOT_ID = re.compile(r"[0-9A-F]+-[0-9A-F]+(-[0-9]+)?")


def integer_columns(queryset: QuerySet, *expressions, parts: int = 1) -> tuple[np.ndarray, ...]:
    """The values of ``expressions`` (field names or integer expressions that are never NULL)
    over the rows of ``queryset``, one int64 array ``[N]`` each, in one order shared by all of
    them (see the module docstring). Raises ``ValueError`` where a value is NULL. ``parts``: on
    PostgreSQL outside a transaction, read a large table as that many ranges of its pages at once
    (the module docstring; for commands and workers: the other connections are not the web
    request's, and so not bound by its timeouts)."""
    if not expressions:
        raise ValueError("name at least one column")
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    rows = queryset.order_by().values_list(*expressions)
    if connection.vendor == "postgresql":
        if parts > 1 and not connection.in_atomic_block:
            return _copied_in_parts(rows, len(expressions), parts)
        return _copied_columns(rows, len(expressions))
    try:
        table = np.array(list(rows), dtype=np.int64).reshape(-1, len(expressions))       # [N, C]
    except TypeError as error:
        raise ValueError(f"a column holds NULL ({error})") from None
    return tuple(np.ascontiguousarray(table[:, c]) for c in range(len(expressions)))


def integer_columns_among(queryset: QuerySet, *expressions, field: str, keys: np.ndarray, parents: QuerySet,
                          first_below: int | None = None, last_below: int | None = None,
                          parts: int = 1) -> tuple[np.ndarray, ...]:
    """:func:`integer_columns` of the rows of ``queryset`` whose ``field`` (a foreign key) is one
    of ``keys``, the sorted distinct primary keys of ``parents``; the first array gives each
    row's position in ``keys``. Where the keys fill at least half their range the rows in that
    range are read and the others dropped here (one lookup table over the range); sparser keys
    are matched by the database (``field`` one of the keys, as one array parameter on
    PostgreSQL, where ``parents`` may cost more to evaluate again; in ``parents`` elsewhere). ``first_below``: the first
    expression's values lie in ``0 .. first_below - 1`` and travel in one number with the
    field's (one column fewer to read); ``last_below`` (with ``first_below``): the last
    expression's values lie in ``0 .. last_below - 1`` and travel in that number too where it
    stays within int64 (the keys' range times both bounds below 2**63), else in a column of their
    own. Each bound must hold for every row read: a value outside it would be read as another.
    ``parts``: as for :func:`integer_columns`."""
    keys = np.asarray(keys, np.int64)                                                      # [P]
    if keys.size == 0:
        return tuple(np.zeros(0, np.int64) for _ in range(len(expressions) + 1))
    low, high = int(keys[0]), int(keys[-1])
    span = high - low + 1
    dense = 2 * keys.size >= span
    if dense:
        rows = queryset.filter(**{f"{field}__gte": low, f"{field}__lte": high})
    elif connection.vendor == "postgresql":   # the keys as one array: ``parents`` may be costly to evaluate again
        rows = queryset.filter(any_of(field, keys.tolist()))
    else:
        rows = queryset.filter(**{f"{field}__in": parents.values("pk")})
    if first_below is None:
        value, *columns = integer_columns(rows, field, *expressions, parts=parts)
    elif last_below is not None and len(expressions) >= 2 and span * first_below * last_below < 1 << 63:
        # (field - low, first, last) in one number: the keys' range bounds the field
        packed = ExpressionWrapper((F(field) - low) * first_below * last_below + expressions[0] * last_below
                                   + expressions[-1], output_field=BigIntegerField())
        combined, *rest = integer_columns(rows, packed, *expressions[1:-1], parts=parts)
        combined, last = np.divmod(combined, last_below)                                   # [N], [N]
        offset, first = np.divmod(combined, first_below)                                   # [N], [N]
        value = offset + low                                                               # [N]
        columns = [first, *rest, last]
    else:
        packed = ExpressionWrapper(F(field) * first_below + expressions[0], output_field=BigIntegerField())
        combined, *rest = integer_columns(rows, packed, *expressions[1:], parts=parts)
        value, first = np.divmod(combined, first_below)                                    # [N], [N]
        columns = [first, *rest]
    if dense:
        lookup = np.full(span, -1, np.int64)                                               # [span]
        lookup[keys - low] = np.arange(keys.size)
        position = lookup[value - low]                                                     # [N]
    else:
        position = np.minimum(np.searchsorted(keys, value), keys.size - 1)                 # [N]
        position[keys[position] != value] = -1                       # a parent that came after ``keys``
    if position.size and position.min() < 0:
        kept = position >= 0                                                               # [N]
        return (position[kept], *(c[kept] for c in columns))
    return (position, *columns)


def index_of(field: str, values: tuple) -> Case:
    """``field``'s position in ``values``, computed in the database; ``len(values)`` for any
    other value (an integer column for :func:`integer_columns`)."""
    return Case(*[When(**{field: value}, then=Value(i)) for i, value in enumerate(values)], default=Value(len(values)),
                output_field=IntegerField())


def order_by_column(key: np.ndarray, *columns: np.ndarray) -> tuple[np.ndarray, ...]:
    """``key`` and ``columns`` reordered by ascending ``key`` (distinct values, e.g. row ids);
    left as they are when already in that order, as a table scan usually returns them."""
    if key.size < 2 or bool(np.all(key[1:] > key[:-1])):
        return (key, *columns)
    order = np.argsort(key, kind="stable")                                                 # [N]
    return (key[order], *(c[order] for c in columns))


def sorted_distinct(ids: np.ndarray) -> np.ndarray:
    """``np.unique(ids)``: the distinct values in ascending order, without sorting values that a
    table scan returned in that order (the keys for :func:`integer_columns_among`)."""
    return ids if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])) else np.unique(ids)


def _copied_columns(rows: QuerySet, n_columns: int) -> tuple[np.ndarray, ...]:
    """``rows`` (a values list of ``n_columns``) aggregated into one byte string per column (each
    value's 8 big-endian bytes, ``int8send``) beside the number of rows, and read through a binary
    ``COPY``."""
    try:
        sql, params = rows.query.sql_with_params()
    except EmptyResultSet:                                           # a filter that matches nothing
        return tuple(np.zeros(0, np.int64) for _ in range(n_columns))
    names = [f"c{c}" for c in range(n_columns)]
    statement = (f"SELECT count(*), {', '.join(f'string_agg(int8send({name}::int8), {_EMPTY})' for name in names)} "
                 f"FROM ({connection.ops.compose_sql(sql, params)}) AS rows ({', '.join(names)})")
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY ({statement}) TO STDOUT (FORMAT binary)") as copy:
            messages = list(copy)
    # PostgreSQL sends the header with the row, then the trailer: the row is read where it arrived
    data = messages[0] if len(messages) <= 2 else b"".join(messages)
    (n_rows,), *columns = _parse_copy_row(data, n_columns + 1)
    if any(c.size != n_rows for c in columns):                       # string_agg skips NULL values
        raise ValueError("a column holds NULL")
    return tuple(columns)


def _copied_in_parts(rows: QuerySet, n_columns: int, parts: int) -> tuple[np.ndarray, ...]:
    """:func:`_copied_columns` of ``rows`` read as ``parts`` ranges of its table's pages (``ctid``
    ranges, each a TID range scan of its pages only), at once: this connection reads the first in a
    repeatable-read transaction that exports its snapshot, and a thread per other range reads it on
    its own connection in that snapshot, so that every row is read once, as of one moment (a row
    updated meanwhile is not read in both its old page and its new one). The ranges' arrays are
    joined in page order. A table of fewer than ``parts * MIN_PAGES_PER_PART`` pages is read whole."""
    table = connection.ops.quote_name(rows.model._meta.db_table)
    connection.ensure_connection()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cursor.execute("SELECT pg_export_snapshot(), pg_relation_size(%s::regclass) / "
                           "current_setting('block_size')::int", [table])
            snapshot, pages = cursor.fetchone()
        if pages < parts * MIN_PAGES_PER_PART:
            return _copied_columns(rows, n_columns)
        starts = [pages * i // parts for i in range(parts)]
        ranges = [(start, end) for start, end in zip(starts, [*starts[1:], None])]  # the last one open-ended
        part_rows = [rows.filter(_pages(table, start, end)) for start, end in ranges]
        with ThreadPoolExecutor(parts - 1) as pool:
            others = [pool.submit(_copied_in_snapshot, r, n_columns, snapshot) for r in part_rows[1:]]
            read = [_copied_columns(part_rows[0], n_columns), *(f.result() for f in others)]
    return tuple(np.concatenate(columns) for columns in zip(*read))


def _pages(table: str, start: int, end: int | None) -> RawSQL:
    """The rows of ``table`` in its pages ``start`` to ``end - 1`` (``None``: to its last)."""
    sql, params = f"{table}.ctid >= %s::tid", [f"({start},0)"]
    if end is not None:
        sql, params = f"{sql} AND {table}.ctid < %s::tid", [*params, f"({end},0)"]
    return RawSQL(sql, params, output_field=BooleanField())


def _copied_in_snapshot(rows: QuerySet, n_columns: int, snapshot: str) -> tuple[np.ndarray, ...]:
    """:func:`_copied_columns` on this thread's own connection, in the exported ``snapshot``; the
    connection is closed afterwards."""
    if not _SNAPSHOT_ID.fullmatch(snapshot):
        raise ValueError(f"not a snapshot id: {snapshot!r}")
    try:
        connection.ensure_connection()
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cursor.execute(f"SET TRANSACTION SNAPSHOT '{snapshot}'")
            return _copied_columns(rows, n_columns)
    finally:
        connection.close()


def _parse_copy_row(data: bytes | memoryview, n_fields: int) -> tuple[np.ndarray, ...]:
    """The one row of a binary ``COPY`` (PostgreSQL's format: a header, then the row's fields,
    each its length and bytes) whose fields are big-endian int64 values, one (``bigint``) or
    many (a byte string; NULL: none), as int64 arrays."""
    if bytes(data[:len(_SIGNATURE)]) != _SIGNATURE:
        raise ValueError("not a binary COPY stream")
    _, extension = struct.unpack_from(">ii", data, len(_SIGNATURE))
    offset = len(_SIGNATURE) + 8 + extension
    (n_sent,) = struct.unpack_from(">h", data, offset)
    if n_sent != n_fields:
        raise ValueError(f"expected one row of {n_fields} fields, got {n_sent}")
    offset += 2
    fields = []
    for _ in range(n_fields):
        (length,) = struct.unpack_from(">i", data, offset)
        offset += 4
        size = max(length, 0) // 8
        fields.append(np.frombuffer(data, ">i8", count=size, offset=offset).astype(np.int64))
        offset += max(length, 0)
    return tuple(fields)


class AnyOf(Lookup):
    """``path IN ids`` with the ids as one array parameter on PostgreSQL (``= ANY(%s)``): a release's
    thousands of video, pool and run ids cost one parameter (composing a query with one placeholder
    per id takes longer than running it); an ``IN`` list elsewhere. Used as ``AnyOf(F(path), ids)``."""

    lookup_name = "any_of"
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        ids = [int(v) for v in self.rhs]
        if connection.vendor == "postgresql":                   # an array literal: one string to quote
            return f"{lhs} = ANY(%s::bigint[])", [*lhs_params, "{" + ",".join(map(str, ids)) + "}"]
        if not ids:
            raise EmptyResultSet
        return f"{lhs} IN ({', '.join(['%s'] * len(ids))})", [*lhs_params, *ids]


def any_of(path: str, ids) -> AnyOf:
    """The condition ``path IN ids`` (:class:`AnyOf`)."""
    return AnyOf(F(path), list(ids))
