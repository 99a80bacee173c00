"""What text and integers the platform stores: the rule every request and every file is checked by.

A string is refused when it holds a NUL (PostgreSQL's text stores none) or a lone surrogate (it has
no UTF-8 encoding: the JSON escape ``"\\ud800"`` parses to one, and the database driver and the JSON
renderer fail on it later); bytes are refused when they are not valid UTF-8. An integer is refused
outside the column it is bound for: a ``bigint`` (int64) unless the caller names a narrower range.

Each check returns the problem in words, or ``None``; ``common.text`` turns a problem into a 400
naming the field, and a file parser into a problem on its line. Django-free, so both can use it.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1     # a bigint column
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1     # an integer column


def text_problem(value: str | bytes) -> str | None:
    """Why ``value`` cannot be stored as text (bytes must be UTF-8), or ``None``."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"is not valid UTF-8 (byte {exc.start})"
    if "\x00" in value:
        return f"holds a NUL character (position {value.index(chr(0))})"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate {value[exc.start]!r} (position {exc.start}), which no text can store"
    return None


def int_problem(value: int, *, min_value: int = INT64_MIN, max_value: int = INT64_MAX) -> str | None:
    """Why the integer ``value`` does not fit ``[min_value, max_value]`` (a bigint by default), or ``None``."""
    if not min_value <= value <= max_value:
        return f"must be between {min_value} and {max_value}"
    return None


def number_problem(value: float) -> str | None:
    """Why the float ``value`` is no number a column stores (``1e999`` parses as infinity), or ``None``."""
    return None if math.isfinite(value) else "must be a finite number"


class Problem(NamedTuple):
    where: str      # the path from the document's root: ``settings.fuse_runs[0]``
    kind: str       # "text" (a string or bytes) or "range" (a number)
    message: str


def data_problems(data, *, field: str = "") -> Iterator[Problem]:
    """A :class:`Problem` for every string (keys included), integer and float in the parsed document
    ``data`` (dicts, lists and tuples nested to any depth) that breaks the rules above; ``where`` is
    the path from ``field``. Walked with a stack, not recursion."""
    stack = [(field, data)]
    while stack:
        where, value = stack.pop()
        kind, problem = "range", None
        if isinstance(value, str | bytes):
            kind, problem = "text", text_problem(value)
        elif isinstance(value, int) and not isinstance(value, bool):
            problem = int_problem(value)
        elif isinstance(value, float):
            problem = number_problem(value)
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if isinstance(key, str) and (key_problem := text_problem(key)) is not None:
                    yield Problem(f"{where or 'body'} (a key)", "text", key_problem)
                    continue
                stack.append((f"{where}.{key}" if where else str(key), item))
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", item) for i, item in reversed(list(enumerate(value))))
        if problem is not None:
            yield Problem(where or "body", kind, problem)
