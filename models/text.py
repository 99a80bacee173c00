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
import re
from collections.abc import Iterator
from typing import NamedTuple

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1     # a bigint column
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1     # an integer column
# A NUL, or a code point of the surrogate block: a str holds one only unpaired (a pair is one character)
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def text_problem(value: str | bytes) -> str | None:
    """Why ``value`` cannot be stored as text (bytes must be UTF-8), or ``None``."""
    if isinstance(value, bytes | bytearray):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"is not valid UTF-8 (byte {exc.start})"
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return f"holds a NUL character (position {found.start()})"
    return f"holds a lone surrogate {found.group()!r} (position {found.start()}), which no text can store"


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
    the path from ``field``. Walked with a stack, not recursion; a path is spelled only for a problem."""
    stack: list = [(data, None)]          # (value, its place: None at the root, else (parent's place, key))
    while stack:
        value, place = stack.pop()
        kind = type(value)
        if kind is str or kind is bytes:
            if (problem := text_problem(value)) is not None:
                yield Problem(_where(field, place), "text", problem)
        elif kind is dict:
            for key, item in reversed(value.items()):               # popped in the document's order
                if type(key) is str and (problem := text_problem(key)) is not None:
                    yield Problem(f"{_where(field, place)} (a key)", "text", problem)
                    continue
                stack.append((item, (place, key)))
        elif kind is list or kind is tuple:
            stack.extend([(value[i], (place, i)) for i in range(len(value) - 1, -1, -1)])
        elif kind is int:
            if (problem := int_problem(value)) is not None:
                yield Problem(_where(field, place), "range", problem)
        elif kind is float:
            if (problem := number_problem(value)) is not None:
                yield Problem(_where(field, place), "range", problem)
        elif isinstance(value, str | bytes | dict | list | tuple | int | float) and not isinstance(value, bool):
            stack.append((_plain(value), place))     # a subclass (an OrderedDict, an IntEnum): as its base


def _plain(value):
    for base in (str, bytes, dict, list, tuple, int, float):
        if isinstance(value, base):
            return base(value)
    raise TypeError(value)


def _where(field: str, place) -> str:
    """``settings.fuse_runs[0]``: the path of ``place`` (see :func:`data_problems`) below ``field``."""
    keys = []
    while place is not None:
        place, key = place
        keys.append(key)
    out = field
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out or "body"
