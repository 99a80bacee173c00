"""Text and integers checked where they enter, as 400s naming the field.

One rule (``models.text``) for every request and every file: the request bodies' parsers
(``common.parsers``), the query string, path, headers and path ids (``common.middleware``) and the
file parsers call these. Refused: a string with a NUL or a lone surrogate, bytes that are not UTF-8
(``invalid_text``); an integer outside its column's range, a bigint unless named, or a float that
is not finite (``out_of_range``). The message names the field and never holds the refused character
(a lone surrogate cannot be written into a JSON answer).
"""
from __future__ import annotations

from urllib.parse import unquote_to_bytes

from common.errors import ApplicationError
from models.text import INT64_MAX, INT64_MIN, data_problems, int_problem, text_problem


class InvalidText(ApplicationError):
    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}.", code="invalid_text", extra=_extra(field, problem))


class OutOfRange(ApplicationError):
    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}.", code="out_of_range", extra=_extra(field, problem))


def _extra(field: str, problem: str) -> dict:
    return {"field": field, "fields": {field: [problem]}}


def checked_text(value: str | bytes, *, field: str) -> str:
    """``value`` as text (bytes decoded as UTF-8), or :class:`InvalidText` naming ``field``."""
    problem = text_problem(value)
    if problem is not None:
        raise InvalidText(field, problem)
    return value.decode("utf-8") if isinstance(value, bytes | bytearray) else value


def checked_int(value: int, *, field: str, min_value: int = INT64_MIN, max_value: int = INT64_MAX) -> int:
    """``value`` if it fits ``[min_value, max_value]`` (a bigint by default), else :class:`OutOfRange`."""
    problem = int_problem(value, min_value=min_value, max_value=max_value)
    if problem is not None:
        raise OutOfRange(field, problem)
    return value


def checked_data(data, *, field: str = ""):
    """``data``, a parsed document (a JSON body, a form, a file's records), if every string, key,
    integer and float in it passes the checks above; else the first problem, as a 400 naming its
    path (``config.fuse_runs[0]``)."""
    for where, kind, problem in data_problems(data, field=field):
        raise (InvalidText if kind == "text" else OutOfRange)(where, problem)
    return data


def checked_urlencoded(raw: bytes) -> None:
    """Refuse a query string or form body (``a=1&b=x%00``, as sent: percent-escapes and ``+``) whose
    names or values, unescaped, are not storable text (:func:`checked_text`), naming the parameter.

    Django decodes these leniently (a bad byte becomes U+FFFD, a body that is not UTF-8 is read as
    Latin-1), so the check reads the bytes as sent."""
    for pair in raw.split(b"&"):
        if not pair:
            continue
        name, _, value = (unquote_to_bytes(part.replace(b"+", b" ")) for part in pair.partition(b"="))
        if (problem := text_problem(name)) is not None:
            raise InvalidText(f"a parameter name ({name.decode('utf-8', 'replace')!r})", problem)
        if (problem := text_problem(value)) is not None:
            raise InvalidText(name.decode("utf-8"), problem)
