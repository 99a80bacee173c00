"""The API's body parsers: every body is checked as text and numbers once it is parsed, whatever
parser a view names, and JSON within a size and nesting limit.

:class:`CheckedContentNegotiation` (the API's content negotiation) hands DRF the parser it chose
with its result checked by ``common.text``: a NUL or lone surrogate in any string or key of a JSON
body, a form or a file name, a form that is not UTF-8, an integer past int64 or a float that is not
finite are a 400 naming the field, before any view reads the body. A view cannot forget it.

DRF's own JSON parser reads the body without a size limit and lets a deeply nested document reach
Python's recursion limit (a 500). :class:`BoundedJSONParser` answers 413 for a body over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` and 400 for one nested deeper than ``MAX_JSON_DEPTH``.
"""
from __future__ import annotations

import io
import re
from itertools import accumulate

from django.conf import settings
from django.http import QueryDict
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import FormParser, JSONParser
from rest_framework.utils import json

from common.errors import RequestTooLarge
from common.text import checked_data, checked_text, checked_urlencoded

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
        if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
            text = checked_text(raw, field="body")
        else:
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


def checked_parsed(parsed):
    """A parser's result (a document, a form's ``QueryDict`` or ``DataAndFiles``), checked."""
    data, files = getattr(parsed, "data", parsed), getattr(parsed, "files", None)
    if isinstance(data, QueryDict):
        for name, values in data.lists():
            checked_text(name, field="a field name")
            for value in values:
                checked_text(value, field=name)
    else:
        checked_data(data)
    for name, uploads in files.lists() if files else ():
        for upload in uploads:
            checked_text(upload.name or "", field=f"{name} (its file name)")
    return parsed


class CheckedContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, whose chosen parser checks what it parsed (:func:`checked_parsed`); a form
    body is also checked as sent (``checked_urlencoded``), since Django decodes it leniently. The
    parser keeps its class (DRF reads JSON and form bodies through ``request.body`` for parsers of
    those classes), only its ``parse`` is wrapped."""

    def select_parser(self, request, parsers):
        parser = super().select_parser(request, parsers)
        if parser is None or getattr(parser, "checked", False):
            return parser
        parse = parser.parse
        form = isinstance(parser, FormParser)

        def checked_parse(stream, media_type=None, parser_context=None):
            if form and stream is not None:
                raw = stream.read()
                checked_urlencoded(raw)
                stream = io.BytesIO(raw)
            return checked_parsed(parse(stream, media_type, parser_context))

        parser.parse, parser.checked = checked_parse, True
        return parser
