"""Reading a model's JSON answer: the one object it was asked for, out of whatever it wrote.

Models asked for "JSON only" still wrap it in a Markdown fence or add a sentence before or after.
:func:`extract_json_object` keeps the text from the first ``{`` to its matching ``}`` (string
literals and escapes respected) when the whole text is not already one object; it never repairs
JSON. The result is then validated by the record's own parser (``models.facts``).
"""
from __future__ import annotations

import json

from models.facts import InvalidOutput


def extract_json_object(text: str) -> str:
    """The first balanced ``{...}`` span of ``text`` (or ``text`` itself when none is found)."""
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        return stripped
    start = stripped.find("{")
    if start < 0:
        return text
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(stripped)):
        ch = stripped[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return stripped[start:i + 1]
    return text


def load_json_object(text: str) -> dict:
    """Parse the answer's JSON object; :class:`InvalidOutput` (with the raw text) when there is none."""
    candidate = extract_json_object(text)
    try:
        data = json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise InvalidOutput(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", text) from None
    if not isinstance(data, dict):
        raise InvalidOutput("expected a JSON object", text)
    return data
