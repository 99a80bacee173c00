"""The chunked release writer against the row-at-a-time reference, on random values (no database).

Every encoder is compared with the expression the reference writes (``canonical_json``, ``export_value``,
``isoformat``, ``f"{x:.3f}"``): plain and exponent floats, NaN and infinities, integers past 64 bits,
control characters, surrogates, packed lists with empty and missing rows. A whole table of random rows
of every column kind is then written both ways, in chunks of random sizes and with small row groups,
and the JSON Lines, Parquet and record index files must be the same bytes.
"""
from __future__ import annotations

import datetime as dt
import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.releases.services.release_io import export, reference
from annotation.releases.services.release_io.encode import (
    ChunkEncoder,
    JsonText,
    canonical_json_bytes,
    fixed3,
    float_is_plain,
    pack,
    packed_json,
)
from annotation.releases.services.release_io.reading import (
    _bytea,
    _iso_from_pg,
    arrays_of,
    iso_times,
)
from annotation.releases.services.release_io.shapes import EVIDENCE, RATINGS, conform, shaped
from annotation.releases.services.release_io.tables import READ_TYPES, Column, Table, export_value
from models.facts import canonical_json

FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 1e-7, 0.1, 5e-324, 1.5e300])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70) | FLOATS
           | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=4), inner, max_size=4), max_leaves=12)


def _reference_bytes(value):
    """What the reference writes for a JSON value: its bytes, or the exception it raises."""
    try:
        return canonical_json(value).encode()
    except (TypeError, ValueError) as exc:
        return type(exc)


def _fast_bytes(value):
    try:
        return canonical_json_bytes(value)
    except (TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_canonical_json_bytes_writes_what_json_dumps_writes(value):
    assert _fast_bytes(value) == _reference_bytes(value)


def test_orjson_floats_agree_with_repr_exactly_where_plain():
    rng = np.random.default_rng(1)
    exponents = rng.integers(-330, 310, 20_000)
    with np.errstate(over="ignore", invalid="ignore"):
        spread = rng.standard_normal(20_000) * 10.0 ** exponents
    values = np.concatenate([spread,
                             rng.uniform(1e-4, 1e-3, 2000), rng.uniform(1e15, 1e16, 2000),
                             rng.standard_normal(4000).astype(np.float32).astype(np.float64) * 1000])
    for x in values.tolist():
        if math.isfinite(x):
            same = canonical_json_bytes(x, plain=True) == canonical_json(x).encode()
            assert same or not float_is_plain(x), x
            assert canonical_json_bytes(x) == canonical_json(x).encode(), x


def test_a_lone_surrogate_is_refused_as_the_reference_refuses_it():
    with pytest.raises(UnicodeEncodeError):
        canonical_json_bytes({"a": "\ud800"})
    with pytest.raises(UnicodeEncodeError):
        canonical_json({"a": "\ud800"}).encode()


def _django_json(text: str):
    """What Django's JSONField reads from a database text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@settings(max_examples=300, deadline=None)
@given(VALUES, st.sampled_from([None, 2]), st.sampled_from([(",", ":"), (", ", ": ")]))
def test_json_text_reads_and_writes_as_django_and_the_reference_do(value, indent, separators):
    text = json.dumps(value, indent=indent, separators=separators)
    expected = _reference_bytes(_django_json(text))
    try:
        got = JsonText().canonical(text)
    except (TypeError, ValueError) as exc:
        got = type(exc)
    assert got == expected


@pytest.mark.parametrize("text", ["NaN", "[Infinity, -Infinity]", "1e400", "123456789012345678901234567890",
                                  " {\"a\": 1} ", "not json", "[1,", "", "\ufeff{}", "{\"a\": 1e-7, \"b\": 0.5}",
                                  "\"\\u2028\\u0001\"", "[1] [2]"])
def test_json_text_edge_cases(text):
    assert JsonText().canonical(text) == _reference_bytes(_django_json(text))


def _packed_rows(rng, kind: str, n: int) -> list:
    rows = []
    for _ in range(n):
        r = rng.random()
        size = int(rng.integers(0, 6))
        if r < 0.1:
            rows.append(None)
            continue
        if kind == "int32s":
            rows.append(rng.integers(-2**31, 2**31, size, dtype=np.int64).astype("<i4").tobytes())
            continue
        values = rng.standard_normal(size * (4 if kind == "boxes" else 1)) * 10.0 ** rng.integers(-9, 22)
        if r < 0.2 and values.size:
            values[0] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 1e-30])
        rows.append(values.astype("<f4").tobytes())
    return rows


@pytest.mark.parametrize("kind", ["int32s", "float32s", "boxes"])
@pytest.mark.parametrize("seed", range(4))
def test_packed_lists_are_written_as_export_value_gives_them(kind, seed):
    rng = np.random.default_rng(seed)
    rows = _packed_rows(rng, kind, 300)
    if seed == 0:
        rows = [None] * 3 + [b""] * 2 + rows[:5]                        # no values at all, then a few
    texts = packed_json(kind, pack(kind, pa.array(rows, pa.binary()), "t")).to_pylist()
    assert texts == [None if v is None else canonical_json(export_value(kind, v, None, "t")).encode() for v in rows]


def test_a_packed_value_of_the_wrong_length_is_refused_as_export_value_refuses_it():
    for kind, value in (("int32s", b"\x00" * 6), ("boxes", b"\x00" * 8), ("float32s", b"\x00" * 3)):
        with pytest.raises(ValueError) as reference_error:
            export_value(kind, value, None, "t")
        good = b"\x00" * (16 if kind == "boxes" else 4)
        with pytest.raises(ValueError) as error:
            pack(kind, pa.array([good, value], pa.binary()), "t")
        assert str(error.value) == str(reference_error.value)


def test_fixed3_formats_as_python_does():
    rng = np.random.default_rng(3)
    values = np.concatenate([
        rng.standard_normal(50_000).astype(np.float32).astype(np.float64) * 2000,   # pixel boxes
        (rng.integers(-10**6, 10**6, 20_000) + 0.5) / 1000,                          # decimal ties
        rng.integers(-4000, 4000, 5000) / 16,                                         # exact binary ties
        np.array([0.0, -0.0, -0.0004, 0.0005, 0.0015, 2.5e-4, np.nan, np.inf, -np.inf, 1e12, -3e15, 1e300, 5e-324]),
        rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 14, 2000)])
    for suffix in (b"", b",1,1,1\n"):
        units, decimals = fixed3(values, suffix)
        texts = [u + d for u, d in zip(units.to_pylist(), decimals.to_pylist())]
        assert texts == [f"{x:.3f}".encode() + suffix for x in values.tolist()]


def test_postgres_times_become_isoformat():
    rng = np.random.default_rng(4)
    moments = [dt.datetime(1, 1, 1, tzinfo=dt.UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)]
    moments += [dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=int(u))
                for u in rng.integers(-10**15, 10**15, 2000)]
    moments += [m.replace(microsecond=0) for m in moments[:200]] + [m.replace(microsecond=500000) for m in moments[:50]]

    def postgres(m: dt.datetime) -> str:                 # timestamptz_out, ISO style, zone UTC
        fraction = f".{m.microsecond:06d}".rstrip("0") if m.microsecond else ""
        return f"{m.year:04d}-{m:%m-%d %H:%M:%S}{fraction}+00"

    texts = pa.array([postgres(m) for m in moments] + [None])
    assert _iso_from_pg(texts).to_pylist() == [m.isoformat() for m in moments] + [None]
    for bad in ("infinity", "2026-01-01 00:00:00 BC+00", "12026-01-01 00:00:00+00"):
        with pytest.raises(ValueError):
            _iso_from_pg(pa.array([bad]))


def test_python_times_become_isoformat_in_utc():
    rng = np.random.default_rng(5)
    zones = [dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30)), dt.timezone(dt.timedelta(hours=-8))]
    moments = [dt.datetime(2026, 1, 1, tzinfo=zones[i % 3]) + dt.timedelta(microseconds=int(u))
               for i, u in enumerate(rng.integers(0, 10**14, 500))] + [None]
    assert iso_times(moments).to_pylist() == [None if m is None else m.astimezone(dt.UTC).isoformat()
                                              for m in moments]


def test_postgres_bytea_becomes_bytes():
    rng = np.random.default_rng(6)
    values = [rng.bytes(int(rng.integers(0, 40))) if rng.random() > 0.1 else None for _ in range(500)]
    text = pa.array([None if v is None else "\\x" + v.hex() for v in values])
    assert _bytea(text).to_pylist() == values
    assert _bytea(text.slice(7, 100)).to_pylist() == values[7:107]


# -- a whole table, both ways -------------------------------------------------------------------------
TABLE = Table("everything", "one column of every kind", (
    Column("id"), Column("n", "int"), Column("x", "float"), Column("s", "str"), Column("ok", "bool"),
    Column("at", "time"), Column("doc", "json"), Column("frames", "int32s"), Column("scores", "float32s"),
    Column("boxes", "boxes"), Column("who", "user"), Column("pools", "ids"),
    Column("evidence", "json", shape=EVIDENCE)), key=("id",))
# a chunk's types (``ReleaseScope.chunks`` has already turned account ids into names and run ids into pools)
CHUNK_TYPES = [{"user": "str", "ids": "ids"}.get(c.kind, READ_TYPES[c.kind]) for c in TABLE.columns]
# relation evidence as the stages write it, and as they never should (the shape keeps what fits)
EVIDENCES = [json.dumps(v) for v in (
    {"prelabel": {"label": 1, "predicates": [{"name": "colour", "value": "red", "fact_ids": ["f1"]}],
                  "evidence": ["f1"], "reason": "", "failed": False}, "reviews": [1, 1], "adjudication": 0},
    {"proposal": {}, "reviews": [0, -1], "adjudication": [1], "blind": True},
    {"contradicted": ["f2"], "similarity": 0.25, "rule_sha256": "ab"}, {}, [1], "text", 2**70,
    {"reviews": [2**70, True, 1.5, "x"], "similarity": 2**70, "blind": 1, "prelabel": "odd", "extra": {"z": 1}})]
TEXTS = ["", "person", "pérson", "a\"b\\c", "line\nbreak\u2028", "\x00\x1f\x7f", "😀", "tab\t"]


def _rows(rng, n: int) -> list[tuple]:
    """Random rows as the database holds them (JSON as text, packed lists as bytes)."""
    zones = [dt.UTC, dt.timezone(dt.timedelta(hours=2))]
    docs = [json.dumps(v) for v in ({}, [], {"reviews": [1]}, {"b": 1e-05, "a": [1e16, 0.5, "é\u2028"]}, 2**70,
                                    {"nested": {"z": None, "y": True, "x": -0.0}}, "text", [float("nan")], 1.5)]
    rows = []
    for i in range(n):
        pick = rng.integers(0, 1000, 8)
        rows.append((
            i, None if pick[0] < 100 else int(rng.integers(-2**63, 2**63)),
            None if pick[1] < 100 else float(rng.choice([rng.standard_normal() * 10.0 ** rng.integers(-8, 20),
                                                          np.nan, np.inf, -0.0, 0.25])),
            None if pick[2] < 50 else TEXTS[pick[2] % len(TEXTS)] + str(pick[3] % 3),
            None if pick[3] < 50 else bool(pick[3] % 2),
            None if pick[4] < 50 else dt.datetime(2026, 1, 1, tzinfo=zones[pick[4] % 2])
            + dt.timedelta(microseconds=int(rng.integers(0, 10**12)) if pick[4] % 3 else int(pick[4]) * 10**6),
            None if pick[5] < 50 else docs[pick[5] % len(docs)],
            *[_packed_rows(rng, kind, 1)[0] for kind in ("int32s", "float32s", "boxes")],
            None if pick[6] < 50 else f"reviewer-{pick[6] % 7}",
            None if pick[7] < 50 else [int(p) for p in rng.integers(1, 100, pick[7] % 4)],
            None if pick[0] < 50 else EVIDENCES[pick[1] % len(EVIDENCES)]))
    return rows


def _export_values(row: tuple) -> tuple:
    """The reference's export values of a database row (``export_value``; names and pools given)."""
    out = []
    for column, value in zip(TABLE.columns, row):
        if column.kind == "json":
            out.append(None if value is None else _django_json(value))
        elif column.kind in ("user", "ids"):
            out.append(value)
        else:
            out.append(export_value(column.kind, value, None, TABLE.name))
    return tuple(out)


@pytest.mark.parametrize("seed", range(3))
def test_a_table_written_in_chunks_is_the_bytes_the_reference_writes(seed, tmp_path, monkeypatch):
    monkeypatch.setattr(export, "ROW_GROUP", 37)
    monkeypatch.setattr(reference, "ROW_GROUP", 37)
    monkeypatch.setattr(export, "ROW_GROUP_VALUES", 150)
    monkeypatch.setattr(reference, "ROW_GROUP_VALUES", 150)
    rng = np.random.default_rng(seed)
    rows = _rows(rng, 400)
    # each row in one of three parts (splits): long runs of one part (chunks written as slices), then
    # rows that interleave them (chunks grouped by a take)
    parts = ["train", "dev", "test"]
    codes = np.repeat(rng.integers(0, 3, 20), 20)[:len(rows)]
    codes[200:] = rng.integers(0, 3, len(rows) - 200)
    codes[codes == 1] = 2 if seed == 2 else 1    # one seed leaves a part without rows: it gets no file
    old, new = tmp_path / "old", tmp_path / "new"
    for folder in (old, new):
        (folder / "data").mkdir(parents=True)
    with open(old / "index.tsv", "w", encoding="utf-8", newline="\n") as index:
        writer = reference.RowTableWriter(old, TABLE, index)
        for row, code in zip(rows, codes):
            writer.add(_export_values(row), parts[code])
        assert writer.close() == len(rows)
    types = CHUNK_TYPES
    writes = export._Writes()
    with open(new / "index.tsv", "wb") as index:
        writer = export._TableWriter(new, TABLE, index, writes, parts)
        start = 0
        while start < len(rows):
            stop = start + int(rng.integers(1, 90))
            columns = [list(c) for c in zip(*rows[start:stop])]
            writer.add(arrays_of(columns, types), codes[start:stop])
            start = stop
        assert writer.close() == len(rows)
        assert writer.written() == {p: int((codes == i).sum()) for i, p in enumerate(parts) if (codes == i).any()}
    writes.close()
    files = sorted(p.relative_to(old).as_posix() for p in old.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(new).as_posix() for p in new.rglob("*") if p.is_file())
    assert ("data/everything/dev.parquet" in files) == (seed != 2) and "data/everything/test.parquet" in files
    for name in files:
        assert (new / name).read_bytes() == (old / name).read_bytes(), name
    for i, part in enumerate(parts):                 # a part holds its rows, in order
        if (codes == i).any():
            ids = pq.read_table(new / "data" / "everything" / f"{part}.parquet", columns=["id"]).column("id")
            assert ids.to_pylist() == [r[0] for r, c in zip(rows, codes) if c == i]


def test_the_chunk_encoder_gives_one_line_per_row():
    rows = _rows(np.random.default_rng(9), 50)
    types = CHUNK_TYPES
    chunk = ChunkEncoder(TABLE).encode(arrays_of([list(c) for c in zip(*rows)], types))
    lines = bytes(chunk.jsonl).split(b"\n")
    assert len(lines) == 51 and lines[-1] == b""
    assert [json.loads(line)["id"] for line in lines[:-1]] == list(range(50))


def test_a_shape_keeps_what_fits_and_nulls_the_rest():
    assert conform({"faithful": True, "natural": 4, "extra": 1}, RATINGS) == {"faithful": True, "natural": 4}
    assert conform({"faithful": 1, "natural": 4.0}, RATINGS) == {"faithful": None, "natural": None}
    assert conform([1], RATINGS) is None and conform(None, RATINGS) is None
    value = conform({"reviews": [1, 2**70, True], "adjudication": 0, "similarity": 3, "rule_sha256": {"a": 1.5},
                     "prelabel": {"label": -1, "predicates": [{"name": "n", "fact_ids": "f1"}]}}, EVIDENCE)
    assert value["reviews"] == [1, None, None] and value["adjudication"] == [0]
    assert value["similarity"] == 3.0 and type(value["similarity"]) is float
    assert value["rule_sha256"] == '{"a":1.5}' and value["proposal"] is None
    assert value["prelabel"]["label"] == -1 and value["prelabel"]["evidence"] is None
    assert value["prelabel"]["predicates"] == [{"name": "n", "value": None, "fact_ids": ["f1"]}]
    array = shaped([json.loads(text) for text in EVIDENCES] + [None], EVIDENCE)
    assert array.type == EVIDENCE and array.null_count == 4            # a list, a string, a number, None
    assert array[0].as_py()["prelabel"]["predicates"][0]["fact_ids"] == ["f1"]
