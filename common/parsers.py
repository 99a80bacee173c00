"""The API's JSON parser: Django's body size limit and a nesting limit, checked before parsing.

DRF's own parser reads the body without a size limit and lets a deeply nested document reach
Python's recursion limit (a 500). This one answers 413 for a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` and 400 for one nested deeper than ``MAX_JSON_DEPTH``.
"""
from __future__ import annotations

import re
from itertools import accumulate

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from common.errors import RequestTooLarge

MAX_JSON_DEPTH = 64  # arrays and objects inside each other; our deepest documents nest about 8
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """How deep arrays and objects nest in ``text`` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = b"" if stream is None else stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise RequestTooLarge(limit=limit)
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"JSON parse error - the body is not valid {encoding}") from None
        if json_depth(text) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - arrays and objects nest deeper than {MAX_JSON_DEPTH} levels")
        try:
            return json.loads(text, parse_constant=json.strict_constant if self.strict else None)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
