"""What the server may read and call on a user's say-so: files under configured roots, model
endpoints on an allow-list, and paths shown relative to the folder they live in.

``TRAJLAB_MODEL_ROOTS`` (checkpoints, model configs, model folders), ``TRAJLAB_IMPORT_ROOTS``
(videos imported through the API) and ``TRAJLAB_ENDPOINT_ALLOWLIST`` (hosts of OpenAI-compatible
endpoints) are settings; a refusal is a 400 that names the value, the reason and what is allowed.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from rest_framework import serializers

from common.errors import ApplicationError


def model_roots() -> list[Path]:
    return [Path(p) for p in settings.TRAJLAB_MODEL_ROOTS]


def import_roots() -> list[Path]:
    """``TRAJLAB_IMPORT_ROOTS`` and ``MEDIA_ROOT`` (where uploads are staged)."""
    return [Path(settings.MEDIA_ROOT), *(Path(p) for p in settings.TRAJLAB_IMPORT_ROOTS)]


def _resolved(path: str | os.PathLike) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def path_within(path: str | os.PathLike, *, roots: Iterable[str | os.PathLike], what: str) -> Path:
    """``path`` resolved (links followed); refused with 400 ``path_outside_roots`` unless it lies
    under one of ``roots``."""
    roots = [_resolved(r) for r in roots]
    resolved = _resolved(path)
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise ApplicationError(
            f"{what} {str(path)!r} is outside the folders this server may read ({', '.join(map(str, roots))}); "
            "put the file there or ask the operator to add its folder", code="path_outside_roots",
            extra={"path": str(path), "roots": [str(r) for r in roots]})
    return resolved


def model_file_within(path: str, *, what: str) -> None:
    """A model file or folder setting: an absolute path, or a relative one naming an existing file,
    must lie under ``TRAJLAB_MODEL_ROOTS`` (a relative name that is no file, such as a packaged SAM 2
    config, is left to the backend)."""
    if not path:
        return
    expanded = Path(path).expanduser()
    if expanded.is_absolute() or expanded.exists():
        path_within(path, roots=model_roots(), what=what)


def endpoint_allowed(url: str, *, what: str) -> None:
    """Refuse (400 ``endpoint_not_allowed``) a model endpoint whose host (or ``host:port``) is not
    in ``TRAJLAB_ENDPOINT_ALLOWLIST``, or whose scheme is not http(s)."""
    allowed = [h.strip().lower() for h in settings.TRAJLAB_ENDPOINT_ALLOWLIST if h.strip()]
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:
        host, port, parts = "", None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        reason = "is not an http(s) URL with a host"
    elif host in allowed or (port is not None and f"{host}:{port}" in allowed) \
            or (port is not None and f"[{host}]:{port}" in allowed):
        return
    else:
        reason = f"has a host ({host}) outside the allowed endpoints ({', '.join(allowed) or 'none'})"
    raise ApplicationError(f"{what} {url!r} {reason}; ask the operator to add it to TRAJLAB_ENDPOINT_ALLOWLIST",
                           code="endpoint_not_allowed", extra={"url": url, "allowed": allowed})


def relative_path(path: str | os.PathLike) -> str:
    """A stored server path as shown to people: relative to ``MEDIA_ROOT``, ``VAR_DIR`` or a model
    root when under one of them, else its last two parts (never the server's absolute layout)."""
    if not path:
        return ""
    given = Path(path)
    for root in (Path(settings.MEDIA_ROOT), Path(settings.VAR_DIR), *model_roots()):
        for candidate, base in ((given, root), (_resolved(given), _resolved(root))):
            if candidate.is_relative_to(base):
                return candidate.relative_to(base).as_posix()
    return Path(*given.parts[-2:]).as_posix() if given.is_absolute() else given.as_posix()


class RelativePathField(serializers.CharField):
    """A stored server path in API output, as :func:`relative_path` shows it."""

    def __init__(self, **kwargs):
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("help_text", "relative to the server's data folder (VAR_DIR or MEDIA_ROOT)")
        super().__init__(**kwargs)

    def to_representation(self, value) -> str:
        return relative_path(value)
