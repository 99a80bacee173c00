"""Hand-written SQL on the request path: statements PostgreSQL plans once per connection, and
rows read into model instances without the ORM's query machinery.

A claim, a vote and a token check each run a few statements of their own (``annotation.curation.
services.claims``, ``votes``, ``accounts.authentication``). Sent with client-side binding (Django's
default), PostgreSQL parses and plans each one every time, which for a claim's candidate query
takes longer than running it. :func:`prepared_cursor` sends them as server-side prepared statements
where the connection allows them (PostgreSQL with a ``prepare_threshold``, which the settings give a
connection that persists: ``DATABASE_CONN_MAX_AGE`` other than 0), so each connection plans a
statement once; elsewhere (a connection per request, SQLite) it is Django's own cursor. Either way
the statements go through Django's cursor wrapper: execute wrappers and the query log see them.
The ORM's own statements stay client-side bound (Django's default), as their SQL is not written
to be prepared.

Such a statement names its columns (:func:`columns`, not ``alias.*``: a prepared statement's result
columns are fixed), writes its limits in, and sends integers as ``bigint`` and a list of excluded
ids as one array, so each statement text is one prepared statement.

:func:`model_rows` reads a cursor's rows as instances of a model (the columns it has, by name,
through the fields' database converters), with any other column set as an attribute, as
``Model.objects.raw`` does, for a fraction of its cost.
"""
from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from django.db import connection
from django.db.models.base import DEFERRED


def columns(model, alias: str) -> str:
    """``model``'s columns, named one by one (``alias.col, ...``), for a statement that reads its
    rows: a prepared statement fixes its result columns, so ``alias.*`` would fail once a
    migration run from another process adds one ("cached plan must not change result type")."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields)


def _prepares() -> bool:
    """On a PostgreSQL connection (opened by now) whose psycopg connection prepares statements."""
    return connection.vendor == "postgresql" and getattr(connection.connection, "prepare_threshold", None) is not None


def _as_int8(value):
    """Integers (alone or in a list) sent as ``bigint``: psycopg types each by its size (int2, int4
    or int8), and each typing of a statement would be one more prepared statement."""
    from psycopg.types.numeric import Int8

    if type(value) is int:
        return Int8(value)
    if type(value) is list and value and all(type(v) is int for v in value):
        return [Int8(v) for v in value]
    return value


@functools.cache
def _prepared_cursor_classes():
    """The psycopg cursor that prepares, and Django's query-logging wrapper for it."""
    from django.db.backends.postgresql.base import CursorDebugWrapper, ServerBindingCursor
    from django.db.backends.utils import CursorWrapper
    from psycopg.errors import DataError

    class PreparedCursor(ServerBindingCursor):
        """Server-side binding; every statement prepared (psycopg keeps the connection's prepared
        statements, by text and parameter types, and reuses them)."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            if isinstance(params, dict):
                params = {k: _as_int8(v) for k, v in params.items()}
            elif params is not None:
                params = [_as_int8(v) for v in params]
            return super().execute(query, params, prepare=True if prepare is None else prepare, binary=binary)

    class PreparedDebugWrapper(CursorDebugWrapper):
        """Logs a prepared statement with its parameters written in (psycopg keeps no text of a
        statement it ran prepared, which Django's log would read)."""

        def execute(self, sql, params=None):
            try:
                logged = self.db.ops.compose_sql(sql, params)
            except DataError:   # a parameter it cannot write out (the statement says why, if it fails)
                logged = sql
            with self.debug_sql(logged):
                return CursorWrapper.execute(self, sql, params)   # not the logging one: logged here

    return PreparedCursor, PreparedDebugWrapper


@contextmanager
def prepared_cursor() -> Iterator:
    """A Django cursor whose statements are prepared on a persistent PostgreSQL connection
    (see the module docstring); Django's plain cursor otherwise. Parameters are ``%s`` or
    ``%(name)s``, as with any Django cursor."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    if not _prepares():
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.validate_thread_sharing()
    cursor_class, debug_wrapper = _prepared_cursor_classes()
    with connection.wrap_database_errors:
        raw = cursor_class(connection.connection)
        _same_timezone_as_django(raw)
    cursor = debug_wrapper(raw, connection) if connection.queries_logged else connection.make_cursor(raw)
    try:
        yield cursor
    finally:
        cursor.close()


def _same_timezone_as_django(cursor) -> None:
    """What Django's own ``create_cursor`` does: timestamps read in the connection's time zone
    when the psycopg connection's loader has another (a setting changed since it connected)."""
    from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    loader = connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    if connection.timezone != loader.timezone:
        register_tzloader(connection.timezone, cursor)


def model_rows(model, sql: str, params: Sequence | dict) -> list:
    """The rows of ``sql`` as ``model`` instances (see the module docstring), read on a
    :func:`prepared_cursor`."""
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        names = tuple(column[0] for column in cursor.description)
        rows = cursor.fetchall()
    if not rows:
        return []
    positions, converters, extras = _reader(model, names)
    attnames = [f.attname for f in model._meta.concrete_fields]
    out = []
    for row in rows:
        values = [DEFERRED if i is None else row[i] for i in positions]
        for j, convert in converters:
            values[j] = convert(values[j])
        obj = model.from_db(connection.alias, attnames, values)
        for i, name in extras:
            setattr(obj, name, row[i])
        out.append(obj)
    return out


@functools.lru_cache(maxsize=256)
def _reader(model, names: tuple[str, ...]):
    """For the columns ``names``: the position of each concrete field's column (``None``: not
    read, deferred), the converters of the fields that have any, and the other columns."""
    at = {name: i for i, name in enumerate(names)}
    fields = model._meta.concrete_fields
    positions = [at.get(f.column) for f in fields]
    converters = []
    for j, f in enumerate(fields):
        if positions[j] is None:
            continue
        col = f.get_col(model._meta.db_table)
        chain = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        if chain:
            converters.append((j, functools.partial(_convert, tuple(chain), col)))
    own = {f.column for f in fields}
    extras = [(i, name) for i, name in enumerate(names) if name not in own]
    return positions, converters, extras


def _convert(chain, expression, value):
    for converter in chain:
        value = converter(value, expression, connection)
    return value
