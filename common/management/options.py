"""Command-line option values shared by the management commands."""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError


def json_object_option(raw: str | None, option: str) -> dict:
    """An option's JSON object: inline JSON, or the path of a JSON file holding one; ``{}`` when the
    option is empty. Anything else is a ``CommandError`` that names the option."""
    if not raw:
        return {}
    text = raw
    if not raw.lstrip().startswith("{"):
        path = Path(raw)
        if not path.is_file():
            raise CommandError(f"{option} is neither a JSON object nor a readable file: {raw}")
        text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CommandError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError(f"{option} must be a JSON object")
    return data
