"""Release records encoded a chunk of rows at a time, with the bytes the row-at-a-time reference
(:mod:`annotation.releases.services.release_io.reference`) writes.

A record's line is ``canonical_json`` of its export values (keys sorted, compact, UTF-8). orjson writes
those bytes exactly for dicts with string keys, lists, strings, booleans, None, integers of 64 bits and
*plain* floats, those that Python writes without an exponent (0 and 1e-4 <= |x| < 1e16); a value with
anything else (an exponent float, NaN or an infinity, a larger integer, a type orjson refuses) is
written by ``json.dumps`` itself, so the bytes and the refusals stay those of the reference.

Columns are encoded whole: each value becomes its JSON text, and pyarrow joins a row's texts behind
their keys into its line; each line's SHA-256 goes to the record index. A chunk's arrays come as
:meth:`ReleaseScope.chunks <annotation.releases.services.release_io.tables.ReleaseScope.chunks>` gives
them: times as their ISO text, JSON as the database's text, packed frames, scores and boxes as bytes,
people as pseudonyms, runs as the lists of their released pools. The MOT ground truth of a chunk of
pool members is formatted here too (:func:`mot_texts`).
"""
from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from annotation.releases.services.release_io.shapes import shaped
from annotation.releases.services.release_io.tables import KINDS, Column, Table, export_value
from models.facts import canonical_json

PLAIN_MIN, PLAIN_MAX = 1e-4, 1e16               # Python's repr writes floats in between without an exponent
SORTED = orjson.OPT_SORT_KEYS
NUMPY = orjson.OPT_SERIALIZE_NUMPY
INDEX_HASH_CHARS = 32                            # 128 bits of a record's SHA-256 name it in diffs
PACKED_DTYPES = {"int32s": "<i4", "float32s": "<f4", "boxes": "<f4"}


# -- JSON values -----------------------------------------------------------------------------------
def float_is_plain(x: float) -> bool:
    """Whether orjson and ``json.dumps`` write ``x`` alike (False for NaN and infinities)."""
    return x == 0.0 or PLAIN_MIN <= abs(x) < PLAIN_MAX


def floats_are_plain(values: np.ndarray) -> np.ndarray:
    """:func:`float_is_plain` of every element."""
    magnitude = np.abs(values)
    return (values == 0) | ((magnitude >= PLAIN_MIN) & (magnitude < PLAIN_MAX))


def is_plain(value) -> bool:
    """Whether orjson writes ``value`` as ``canonical_json`` does: only dicts with string keys,
    lists, tuples, strings, integers, booleans, None and plain floats (integers orjson cannot hold
    make it refuse, which falls back too)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return float_is_plain(value)
    if kind is dict:
        return all(type(k) is str and is_plain(v) for k, v in value.items())
    if kind is list or kind is tuple:
        return all(is_plain(v) for v in value)
    return False


def canonical_json_bytes(value, *, plain: bool | None = None) -> bytes:
    """``canonical_json(value).encode()``, by orjson when ``value`` is plain (``plain``: already known)."""
    if plain if plain is not None else is_plain(value):
        try:
            return orjson.dumps(value, option=SORTED)
        except orjson.JSONEncodeError:
            pass
    return canonical_json(value).encode()


class JsonText:
    """The database's JSON text read as Django's ``JSONField`` reads it (``json.loads``; text that is not
    JSON stays a string), noting on the way whether every float in it is plain."""

    def __init__(self):
        self.plain = True
        decoder = json.JSONDecoder(parse_float=self._float, parse_constant=self._constant)
        self._decode, self._scan = decoder.decode, decoder.scan_once

    def _float(self, text: str) -> float:
        value = float(text)
        if not float_is_plain(value):
            self.plain = False
        return value

    def _constant(self, name: str) -> float:
        self.plain = False
        return float(name.lower().replace("infinity", "inf"))

    def parse(self, text: str):
        """The value that ``text`` holds (``plain`` says whether its floats are)."""
        self.plain = True
        try:
            value, end = self._scan(text, 0)     # the whole of ``decode`` for text without outer spaces
        except (StopIteration, json.JSONDecodeError):
            end = -1
        if end != len(text):
            self.plain = True
            try:
                value = self._decode(text)
            except json.JSONDecodeError:
                value = text
        return value

    def canonical(self, text: str) -> bytes:
        """``canonical_json`` of the value that ``text`` holds, as bytes."""
        value = self.parse(text)
        return canonical_json_bytes(value, plain=self.plain)


def binary_array(data: bytearray, ends: list[int], missing: Sequence[bool]) -> pa.Array:
    """The binary array whose value ``r`` is ``data[ends[r]:ends[r + 1]]``, null where ``missing[r]``.

    Texts are gathered this way, copied into one buffer as they are made: orjson's results, kept one
    by one, would each hold an allocation far larger than the text (microseconds apiece)."""
    mask = np.asarray(missing, bool)                                                       # [R]
    null_count = int(mask.sum())
    validity = pa.py_buffer(np.packbits(~mask, bitorder="little")) if null_count else None
    offsets = pa.py_buffer(np.asarray(ends, np.int32))                                     # [R + 1]
    return pa.Array.from_buffers(pa.binary(), len(ends) - 1, [validity, offsets, pa.py_buffer(data)],
                                 null_count=null_count)


def json_texts(values: Sequence, encode=orjson.dumps) -> pa.Array:
    """``encode`` (JSON text as bytes) of every value, nulls for None; a value orjson refuses is
    written by ``canonical_json`` (which refuses what the reference refuses)."""
    data, ends = bytearray(), [0]
    for v in values:
        if v is not None:
            try:
                data += encode(v)
            except orjson.JSONEncodeError:
                data += canonical_json(v).encode()
        ends.append(len(data))
    return binary_array(data, ends, [v is None for v in values])


def distinct_texts(array: pa.Array, encode) -> pa.Array:
    """:func:`json_texts` of a column of strings, each distinct string encoded once."""
    encoded = array.dictionary_encode()
    return pc.take(json_texts(encoded.dictionary.to_pylist(), encode), encoded.indices)


def iso_times(texts: pa.Array) -> pa.Array:
    """ISO 8601 times in UTC (``isoformat()``'s text) as Parquet holds them: ``timestamp[us, tz=UTC]``."""
    return pc.cast(texts, KINDS["time"])


# -- packed lists ----------------------------------------------------------------------------------
@dataclass
class Packed:
    """A chunk's list column: every row's values end to end."""

    flat: np.ndarray                             # [V] the values (boxes: 4 per box)
    offsets: np.ndarray                          # [R + 1] int64, row r is flat[offsets[r]:offsets[r + 1]]
    missing: np.ndarray                          # [R] bool, the row's value is None (an empty list in Parquet)

    @property
    def sizes(self) -> np.ndarray:               # [R] values per row
        return np.diff(self.offsets)


def pack(kind: str, values: pa.Array, table: str) -> Packed:
    """A ``int32s``, ``float32s``, ``boxes`` (binary, packed little-endian) or ``ids`` (lists of ids)
    column as a :class:`Packed`; a packed value whose length does not fit its type is refused as
    ``export_value`` refuses it."""
    missing = values.is_null().to_numpy(zero_copy_only=False)                               # [R]
    if kind == "ids":
        sizes = pc.list_value_length(values).fill_null(0).to_numpy().astype(np.int64)      # [R]
        flat = pc.list_flatten(values).to_numpy(zero_copy_only=False).astype(np.int64)      # [V]
        return Packed(flat=flat, offsets=np.concatenate([[0], np.cumsum(sizes)]), missing=missing)
    if values.null_count:
        values = values.fill_null(b"")
    n = len(values)
    offsets = np.frombuffer(values.buffers()[1], np.int32, n + 1, values.offset * 4).astype(np.int64)   # [R + 1]
    lengths = np.diff(offsets)                                                             # [R] bytes
    unit = 16 if kind == "boxes" else 4
    if (lengths % unit).any():
        export_value(kind, values[int(np.flatnonzero(lengths % unit)[0])].as_py(), None, table)  # raises its error
    data = values.buffers()[2]
    flat = np.frombuffer(data, np.uint8)[offsets[0]:offsets[-1]] if data is not None else np.zeros(0, np.uint8)
    flat = flat.view(PACKED_DTYPES[kind])                                                  # [V]
    return Packed(flat=flat, offsets=np.concatenate([[0], np.cumsum(lengths // 4)]), missing=missing)


def number_texts(values: np.ndarray) -> pa.Array:
    """The JSON text of every element of a 1-D numeric array, as a binary array: orjson writes the
    whole array and its commas part the elements; a float that is not plain is written by
    ``canonical_json``."""
    if values.size == 0:
        return pa.array([], pa.binary())
    body = np.frombuffer(orjson.dumps(np.ascontiguousarray(values), option=NUMPY), np.uint8)[1:-1]
    comma = body == ord(",")                                                               # [B]
    starts = np.concatenate([[0], np.flatnonzero(comma) + 1])                             # [V]
    offsets = np.concatenate([starts - np.arange(values.size), [body.size - values.size + 1]])
    texts = pa.Array.from_buffers(pa.binary(), values.size, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(body[~comma].tobytes())])
    if values.dtype.kind == "f":
        odd = ~floats_are_plain(values)                                                    # [V]
        if odd.any():
            texts = pc.replace_with_mask(texts, pa.array(odd), pa.array(
                [canonical_json(x).encode() for x in values[odd].tolist()], pa.binary()))
    return texts


def bracketed(texts: pa.Array, offsets: np.ndarray, missing: np.ndarray | None = None) -> pa.Array:
    """``[t, t, ...]`` of each run ``texts[offsets[r]:offsets[r + 1]]`` (null where ``missing``)."""
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), texts,
                                     mask=pa.array(missing) if missing is not None and missing.any() else None)
    return pc.binary_join_element_wise(b"[", pc.binary_join(lists, b","), b"]", b"")


def runs(body: np.ndarray, starts: np.ndarray, ends: np.ndarray, offsets: np.ndarray,
         missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Items ``body[starts[i]:ends[i]]`` with one separator byte between each two, grouped into runs
    ``offsets[r]:offsets[r + 1]``: each run becomes ``[`` + its items and their separators + ``]``, the
    runs end to end (missing runs as nothing). Returns (bytes, run offsets [R + 1])."""
    first, stop = offsets[:-1], offsets[1:]                                                 # [R]
    full = stop > first                                                                     # [R]
    last = stop[full] - 1
    keep = np.ones(body.size, bool)
    keep[ends[last[last < starts.size - 1]]] = False                                        # separators between runs
    lengths = np.zeros(first.size, np.int64)                                                # [R]
    lengths[full] = ends[last] - starts[first[full]]
    lengths = np.where(missing, 0, lengths + 2)
    bounds = np.concatenate([[0], np.cumsum(lengths)])                                      # [R + 1]
    shown = ~missing
    out = np.empty(int(bounds[-1]), np.uint8)
    inner = np.ones(out.size, bool)
    inner[bounds[:-1][shown]] = inner[bounds[1:][shown] - 1] = False
    out[inner] = body[keep]
    out[bounds[:-1][shown]], out[bounds[1:][shown] - 1] = ord("["), ord("]")
    return out, bounds


def packed_json(kind: str, packed: Packed) -> pa.Array:
    """The JSON text of each row of a packed column (null where the value is None): orjson writes the
    chunk's values at once (boxes as rows of 4), and each row's run of them is cut out and bracketed."""
    flat = packed.flat.astype(np.float64) if packed.flat.dtype.kind == "f" else packed.flat   # [V] exact
    if flat.dtype.kind == "f" and not floats_are_plain(flat).all():
        texts = number_texts(flat)
        if kind == "boxes":
            texts = bracketed(texts, np.arange(0, flat.size + 1, 4))                       # [V / 4]
            return bracketed(texts, packed.offsets // 4, packed.missing)
        return bracketed(texts, packed.offsets, packed.missing)
    offsets = packed.offsets // 4 if kind == "boxes" else packed.offsets
    if flat.size:
        values = flat.reshape(-1, 4) if kind == "boxes" else flat
        body = np.frombuffer(orjson.dumps(np.ascontiguousarray(values), option=NUMPY), np.uint8)[1:-1]   # [B]
        separator = body == ord(",")                                                       # [B]
        if kind == "boxes":                                                                # "],[" between boxes
            separator[1:] &= body[:-1] == ord("]")
            separator[0] = False
        cuts = np.flatnonzero(separator)                                                   # [I - 1]
        starts, ends = np.concatenate([[0], cuts + 1]), np.append(cuts, body.size)         # [I]
    else:
        body = starts = ends = np.zeros(0, np.int64)
    data, bounds = runs(body.astype(np.uint8, copy=False), starts, ends, offsets, packed.missing)
    missing = packed.missing
    validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None
    return pa.Array.from_buffers(pa.binary(), len(missing), [validity, pa.py_buffer(bounds.astype(np.int32)),
                                                            pa.py_buffer(data.tobytes())],
                                 null_count=int(missing.sum()))


# -- a chunk ---------------------------------------------------------------------------------------
@dataclass
class EncodedChunk:
    """A chunk of rows as the files hold them."""

    rows: int
    jsonl: memoryview                            # the rows' lines, each ending in a newline
    index: bytes                                 # the rows' lines of the record index
    values: list                                 # per column what its Parquet column holds: a list, a
                                                 # pa.Array, or a Packed list column
    sizes: np.ndarray                            # [R] list elements per row (row groups are bounded by them)


class ChunkEncoder:
    """Encodes the chunks of one table."""

    def __init__(self, table: Table):
        self.table = table
        self.kinds = [c.kind for c in table.columns]
        order = sorted(range(len(table.columns)), key=lambda i: table.names[i])
        self.order = order
        self.keys = [pa.scalar((b"{" if n == 0 else b",") + orjson.dumps(table.names[i]) + b":")
                     for n, i in enumerate(order)]
        self.key_at = [table.names.index(k) for k in table.key]
        self.index_prefix = pa.scalar(table.name.encode() + b"\t")
        self.tab, self.newline, self.slash = pa.scalar(b"\t"), pa.scalar(b"\n"), pa.scalar(b"/")
        self.json_text = JsonText()

    def _column(self, column: Column, values: pa.Array) -> tuple[object, pa.Array]:
        """(what Parquet holds, the JSON text of each value with nulls for None) of one column."""
        kind = column.kind
        if kind == "int":
            return values, pc.cast(values, pa.string()).cast(pa.binary())
        if kind == "bool":
            return values, pc.if_else(values, pa.scalar(b"true"), pa.scalar(b"false"))
        if kind == "float":
            texts = number_texts(values.fill_null(0.0).to_numpy())
            return values, pc.if_else(values.is_null(), pa.scalar(None, pa.binary()), texts)
        if kind in ("str", "user"):
            return values, distinct_texts(values, orjson.dumps)
        if kind == "time":
            return iso_times(values), distinct_texts(values, orjson.dumps)
        if kind == "json":
            if column.shape is None:
                texts = distinct_texts(values, self.json_text.canonical)
                return texts.cast(pa.string()), texts
            encoded = values.dictionary_encode()                 # each distinct text parsed once
            parsed, canonical = [], []
            for text in encoded.dictionary.to_pylist():
                parsed.append(self.json_text.parse(text))
                canonical.append(canonical_json_bytes(parsed[-1], plain=self.json_text.plain))
            return (pc.take(shaped(parsed, column.shape), encoded.indices),
                    pc.take(pa.array(canonical, pa.binary()), encoded.indices))
        if kind in PACKED_DTYPES or kind == "ids":
            packed = pack(kind, values, self.table.name)
            return packed, packed_json(kind, packed)
        raise ValueError(f"unknown column kind {kind!r}")

    def encode(self, columns: list[pa.Array]) -> EncodedChunk:
        """The lines, index lines and Parquet values of a chunk (``columns``: one array per column, as
        ``ReleaseScope.chunks`` gives them)."""
        n = len(columns[0])
        values, texts = zip(*(self._column(c, col) for c, col in zip(self.table.columns, columns)))
        parts = []
        for key, i in zip(self.keys, self.order):
            parts += [key, texts[i]]
        lines = pc.binary_join_element_wise(*parts, pa.scalar(b"}\n"), pa.scalar(b""), null_handling="replace",
                                            null_replacement="null")
        offsets = np.frombuffer(lines.buffers()[1], np.int32, n + 1, lines.offset * 4).tolist()
        data = memoryview(lines.buffers()[2])
        sha256 = hashlib.sha256
        digests = b"".join([sha256(data[a:b - 1]).digest() for a, b in itertools.pairwise(offsets)])
        hexes = np.frombuffer(digests, np.uint8).reshape(n, 32)[:, :INDEX_HASH_CHARS // 2].tobytes().hex()
        digests = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(
            np.arange(0, INDEX_HASH_CHARS * n + 1, INDEX_HASH_CHARS, dtype=np.int32)), pa.py_buffer(hexes.encode())])
        keys = [pc.fill_null(texts[i], b"None") if self.kinds[i] == "int" else
                pa.array([str(v).encode() for v in columns[i].to_pylist()], pa.binary()) for i in self.key_at]
        key = keys[0] if len(keys) == 1 else pc.binary_join_element_wise(*keys, self.slash)
        index = pc.binary_join_element_wise(self.index_prefix, key, self.tab, digests, self.newline, pa.scalar(b""))
        index_offsets = np.frombuffer(index.buffers()[1], np.int32, n + 1, index.offset * 4)
        index_bytes = index.buffers()[2].to_pybytes()[index_offsets[0]:index_offsets[-1]]
        sizes = np.zeros(n, np.int64)
        for v in values:
            if isinstance(v, Packed):
                sizes += v.sizes
        return EncodedChunk(rows=n, jsonl=data[offsets[0]:offsets[-1]], index=index_bytes, values=list(values),
                            sizes=sizes)


# -- MOT -------------------------------------------------------------------------------------------
FIXED_MAX = 1e12                                 # |x| * 1000 stays far below 2**53: the product's error is tiny
EPSILON = 2.3e-16                                # > 2**-52: |x| * EPSILON bounds the rounding error of |x| * 1000
THOUSANDTHS = pa.array([f".{i:03d}".encode() for i in range(1000)], pa.binary())


def fixed3(values: np.ndarray, suffix: bytes = b"") -> list[pa.Array]:
    """``f"{x:.3f}"`` of every float64 (then ``suffix``), as arrays whose element-wise join is the text:
    the thousandths are rounded half to even from the double ``|x| * 1000`` where no tie lies within
    its rounding error; ``format`` itself writes the others (ties, NaN, infinities, huge values)."""
    magnitude = np.abs(values)                                                             # [N]
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = magnitude * 1000.0                                                        # [N]
        rounded = np.rint(scaled)                                                          # [N]
        near_tie = np.abs(scaled - np.floor(scaled) - 0.5) <= scaled * EPSILON
    exact = (magnitude < FIXED_MAX) & ~near_tie                                            # [N] (False for NaN)
    thousandths = np.where(exact, rounded, 0).astype(np.int64)                             # [N]
    units = pc.cast(pa.array(thousandths // 1000), pa.string()).cast(pa.binary())
    decimals = pc.take(THOUSANDTHS if not suffix else pc.binary_join_element_wise(THOUSANDTHS, suffix, b""),
                       pa.array(thousandths % 1000))
    negative = np.signbit(values)                                                          # [N]
    if negative.any():
        units = pc.if_else(pa.array(negative), pc.binary_join_element_wise(b"-", units, b""), units)
    if not exact.all():
        odd = np.flatnonzero(~exact)
        units = pc.replace_with_mask(units, pa.array(~exact), pa.array([f"{values[i]:.3f}".encode()
                                                                        for i in odd.tolist()], pa.binary()))
        decimals = pc.replace_with_mask(decimals, pa.array(~exact), pa.array([suffix] * odd.size, pa.binary()))
    return [units, decimals]


def mot_texts(pools: pa.Array, trajectories: pa.Array, frames: pa.Array, boxes: pa.Array) -> list[tuple[int, bytes]]:
    """The MOTChallenge ``gt.txt`` of each pool of a chunk of members (given in pool order, then
    trajectory order; every pool's members all in the chunk): ``frame, id, left, top, width, height,
    1, 1, 1`` per observation, frames and pixels 1-based, sorted by frame then trajectory id. Returns
    (pool id, text) in order."""
    frame_runs, box_runs = pack("int32s", frames, "pool_members"), pack("boxes", boxes, "pool_members")
    counts = frame_runs.sizes                                                              # [M] observations
    if (box_runs.sizes != 4 * counts).any():
        bad = int(np.flatnonzero(box_runs.sizes != 4 * counts)[0])
        raise ValueError(f"pool member of trajectory {trajectories[bad].as_py()} has "
                         f"{counts[bad]} frames and {box_runs.sizes[bad] // 4} boxes")
    pool = pools.to_numpy()                                                                # [M]
    starts = np.flatnonzero(np.concatenate([[True], pool[1:] != pool[:-1]]))              # [P] first member
    rank = np.repeat(np.cumsum(np.concatenate([[True], pool[1:] != pool[:-1]])), counts)  # [N] pool position
    track = np.repeat(trajectories.to_numpy(), counts)                                     # [N]
    frame = frame_runs.flat.astype(np.int64)                                               # [N]
    box = box_runs.flat.reshape(-1, 4).astype(np.float64)                                  # [N, 4]
    order = np.lexsort((track, frame, rank))                                               # [N]
    frame, track, box, rank = frame[order], track[order], box[order], rank[order]
    comma = pa.scalar(b",")
    parts = [pc.cast(pa.array(frame + 1), pa.string()).cast(pa.binary()), comma,
             pc.cast(pa.array(track), pa.string()).cast(pa.binary()), comma,
             *fixed3(box[:, 0] + 1, b","), *fixed3(box[:, 1] + 1, b","), *fixed3(box[:, 2] - box[:, 0], b","),
             *fixed3(box[:, 3] - box[:, 1], b",1,1,1\n")]
    lines = pc.binary_join_element_wise(*parts, pa.scalar(b""))
    offsets = np.frombuffer(lines.buffers()[1], np.int32, len(lines) + 1, lines.offset * 4)   # [N + 1]
    data = lines.buffers()[2].to_pybytes() if len(lines) else b""
    bounds = offsets[np.searchsorted(rank, np.arange(1, len(starts) + 2))].tolist()       # [P + 1]
    return [(int(pool[s]), data[a:b]) for s, a, b in zip(starts, bounds, bounds[1:])]
