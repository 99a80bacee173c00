"""Rows of a queryset read as arrow arrays, a chunk at a time, with one query.

Each selected column is read as one of ``TYPES``: ``int``, ``float``, ``str``, ``bool``, ``time``
(ISO 8601 text in UTC, ``datetime.isoformat()``), ``json`` (the stored JSON text, parsed by the
writer), ``bytes`` and ``ids`` (lists of integers; rows built in Python only).

On PostgreSQL (with ISO dates, UTC and hex bytea, the settings Django's connection uses) the query
runs as ``COPY (...) TO STDOUT`` in CSV with every value quoted, and pyarrow parses it: no value
becomes a Python object. Elsewhere the backend's cursor is read and Django's converters applied a
column at a time; both give the same arrays.
"""
from __future__ import annotations

import datetime as dt
import select
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
from django.core.exceptions import EmptyResultSet
from django.db import connections
from django.db.models import QuerySet
from psycopg import errors, pq
from psycopg.types.datetime import TimestamptzLoader

TYPES: dict[str, pa.DataType] = {"int": pa.int64(), "float": pa.float64(), "str": pa.string(), "bool": pa.bool_(),
                                 "time": pa.string(), "json": pa.string(), "bytes": pa.binary(),
                                 "ids": pa.list_(pa.int64())}
COPY_BYTES = 4 << 20                             # a chunk of COPY rows ends at this much CSV (wide rows)
PG_TIME = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?\+00$"   # timestamptz text, ISO style, in UTC
HEX = np.full(256, 255, np.uint8)
HEX[np.frombuffer(b"0123456789abcdef", np.uint8)] = np.arange(16, dtype=np.uint8)
HEX[np.frombuffer(b"ABCDEF", np.uint8)] = np.arange(10, 16, dtype=np.uint8)


def record_batches(queryset: QuerySet, *, types: Sequence[str], size: int) -> Iterator[list[pa.Array]]:
    """The rows of the ``values_list`` queryset ``queryset``, ``size`` at a time, as one array per
    selected column, of the ``TYPES`` named by ``types``.

    On PostgreSQL the connection is busy with the query until the last chunk is taken: read anything
    else first."""
    connection = connections[queryset.db]
    compiler = queryset.query.get_compiler(using=queryset.db)
    try:
        sql, params = compiler.as_sql()
    except EmptyResultSet:
        return
    if connection.vendor == "postgresql" and _copy_readable(connection):
        yield from _copied(connection, connection.ops.compose_sql(sql, params), types, size)
        return
    fields = [s[0] for s in compiler.select[:compiler.col_count]]
    converters = [(i, convs, expression) for i, (convs, expression) in compiler.get_converters(fields).items()
                  if types[i] != "json"]
    with connection.chunked_cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(size):
            columns = [list(column) for column in zip(*rows)]
            for i, convs, expression in converters:
                for convert in convs:
                    columns[i] = [convert(v, expression, connection) for v in columns[i]]
            yield arrays_of(columns, types)


def arrays_of(columns: Sequence[Sequence], types: Sequence[str]) -> list[pa.Array]:
    """Python values (as Django reads them; JSON as its text) as the arrays of ``types``."""
    out = []
    for values, kind in zip(columns, types):
        if kind == "time":
            out.append(iso_times(values))
        elif kind == "bytes":
            out.append(pa.array([None if v is None else bytes(v) for v in values], pa.binary()))
        else:
            out.append(pa.array(values, TYPES[kind]))
    return out


def iso_times(values: Sequence) -> pa.Array:
    """Datetimes as ``v.astimezone(UTC).isoformat()``, each distinct instant converted once when they
    are aware (a column's are all aware or all naive)."""
    utc = dt.UTC
    first = next((v for v in values if v is not None), None)
    if first is None or first.tzinfo is None:
        return pa.array([None if v is None else v.astimezone(utc).isoformat() for v in values], pa.string())
    encoded = pa.array(values, pa.timestamp("us", tz="UTC")).dictionary_encode()
    texts = [v.astimezone(utc).isoformat() for v in encoded.dictionary.to_pylist()]
    return pc.take(pa.array(texts, pa.string()), encoded.indices)


# -- PostgreSQL: COPY to CSV -----------------------------------------------------------------------
def _copy_readable(connection) -> bool:
    """Whether the session prints timestamps (ISO style, in UTC) and bytea (hex) the way ``_copied``
    parses them, as Django's sessions do."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('DateStyle'), current_setting('TimeZone'), "
                       "current_setting('bytea_output')")
        date_style, zone, bytea = cursor.fetchone()
    return date_style.startswith("ISO,") and zone == "UTC" and bytea == "hex"


def _copied(connection, sql: str, types: Sequence[str], size: int) -> Iterator[list[pa.Array]]:
    """``COPY`` of ``sql`` (literal SQL) as CSV, parsed ``size`` rows (or ``COPY_BYTES``) at a time (a
    COPY message is a row)."""
    names = [str(i) for i in range(len(types))]
    convert = pcsv.ConvertOptions(column_types={n: TYPES[t] if t != "bytes" else pa.string()
                                                for n, t in zip(names, types)},
                                  strings_can_be_null=True, quoted_strings_can_be_null=False, null_values=[""],
                                  true_values=["t"], false_values=["f"])
    read = pcsv.ReadOptions(column_names=names, use_threads=False, block_size=1 << 26)
    parse = pcsv.ParseOptions(newlines_in_values=True)

    def chunk(buffer: bytearray, rows: int) -> list[pa.Array]:
        table = pcsv.read_csv(pa.py_buffer(buffer), read_options=read, parse_options=parse, convert_options=convert)
        if table.num_rows != rows:
            raise ValueError(f"COPY gave {rows} rows and the CSV parser {table.num_rows}")
        arrays = [table.column(i).combine_chunks() for i in range(len(types))]
        return [_iso_from_pg(a) if t == "time" else _bytea(a) if t == "bytes" else a
                for a, t in zip(arrays, types)]

    connection.ensure_connection()
    pgconn, encoding = connection.connection.pgconn, connection.connection.info.encoding
    with connection.wrap_database_errors:
        _copy_start(pgconn, f"COPY ({sql}) TO STDOUT (FORMAT csv, FORCE_QUOTE *)", encoding)
    done = False
    try:
        get, buffer, rows = pgconn.get_copy_data, bytearray(), 0
        while True:
            nbytes, data = get(0)
            if nbytes < 0:
                break
            buffer += data
            rows += 1
            if rows == size or len(buffer) >= COPY_BYTES:
                yield chunk(buffer, rows)
                buffer, rows = bytearray(), 0
        done = True
        with connection.wrap_database_errors:
            _results(pgconn, encoding)
        if rows:
            yield chunk(buffer, rows)
    finally:
        if not done:
            _copy_abandon(pgconn)


def _copy_start(pgconn, command: str, encoding: str) -> None:
    """Send ``COPY ... TO STDOUT`` on the session's libpq connection and wait until rows flow.

    The rows are read straight from libpq (``PQgetCopyData``, a row per call): psycopg's ``Copy``
    costs twice as much per row, and a release reads millions."""
    pgconn.send_query(command.encode())
    while pgconn.flush():
        select.select([], [pgconn.socket], [])
    result = pgconn.get_result()
    if result is not None and result.status == pq.ExecStatus.COPY_OUT:
        return
    _results(pgconn, encoding)
    raise errors.error_from_result(result, encoding=encoding) if result is not None else \
        errors.OperationalError("COPY gave no result")


def _results(pgconn, encoding: str = "utf-8") -> None:
    """Collect the results left after a command; raise the first error among them."""
    error = None
    while (result := pgconn.get_result()) is not None:
        if result.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.COPY_OUT) and error is None:
            error = errors.error_from_result(result, encoding=encoding)
    if error is not None:
        raise error


def _copy_abandon(pgconn) -> None:
    """A COPY left unread (its reader failed or stopped): cancel it and drain the connection, so the
    session can go on (the cancelled statement fails its transaction, as any error would)."""
    try:
        pgconn.get_cancel().cancel()
        while pgconn.get_copy_data(0)[0] >= 0:
            pass
    except errors.OperationalError:
        pass
    try:
        _results(pgconn)
    except errors.Error:
        pass


def _iso_from_pg(text: pa.Array) -> pa.Array:
    """PostgreSQL's timestamptz text (``2026-01-01 10:00:00.5+00``) as ``isoformat()`` writes the same
    instant (``2026-01-01T10:00:00.500000+00:00``); a timestamp Python cannot hold is refused."""
    matches = pc.match_substring_regex(text, PG_TIME)
    if not pc.all(pc.or_kleene(matches, text.is_null())).as_py():
        bad = text.filter(pc.invert(matches)).to_pylist()[0]
        raise ValueError(f"timestamp {bad!r} is outside what a release can write (years 1 to 9999)")
    seconds = pc.replace_substring(pc.utf8_slice_codeunits(text, 0, 19), " ", "T", max_replacements=1)
    fraction = pc.utf8_slice_codeunits(text, 19, -3)                                      # "" or ".5"
    micro = pc.if_else(pc.equal(pc.utf8_length(fraction), 0), "", pc.utf8_rpad(fraction, 7, "0"))
    return pc.binary_join_element_wise(seconds, micro, "+00:00", "")


def _bytea(text: pa.Array) -> pa.Array:
    """PostgreSQL's hex bytea text (``\\x0102``) as binary values."""
    n = len(text)
    offsets = np.frombuffer(text.buffers()[1], np.int32, n + 1, text.offset * 4).astype(np.int64)   # [R + 1]
    data = np.frombuffer(text.buffers()[2], np.uint8)[offsets[0]:offsets[-1]]             # [C]
    offsets -= offsets[0]
    lengths = np.diff(offsets)                                                             # [R]
    present = lengths > 0
    starts = offsets[:-1][present]
    if (lengths[present] % 2).any() or (data[starts] != ord("\\")).any() or (data[starts + 1] != ord("x")).any():
        raise ValueError("bytea is not in PostgreSQL's hex format")
    keep = np.ones(data.size, bool)
    keep[starts] = keep[starts + 1] = False
    digits = HEX[data[keep]]                                                               # [2B]
    if (digits == 255).any():
        raise ValueError("bytea is not in PostgreSQL's hex format")
    decoded = (digits[0::2] << 4) | digits[1::2]                                           # [B]
    prefix = np.concatenate([[0], np.cumsum(present * 2)])                                 # [R + 1]
    byte_offsets = pa.py_buffer(((offsets - prefix) // 2).astype(np.int32))
    missing = text.is_null().to_numpy(zero_copy_only=False)                                 # [R]
    validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None
    return pa.Array.from_buffers(pa.binary(), n, [validity, byte_offsets, pa.py_buffer(decoded.tobytes())],
                                 null_count=int(missing.sum()))
