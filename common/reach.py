"""What the server may read on a user's say-so: files under configured roots, and paths shown
relative to the folder they live in. (Model endpoints and model files that requests use come from
the operator's registry, ``common.registry``; these roots bound what the command line names.)

``TRAJLAB_MODEL_ROOTS`` (checkpoints, model configs, model folders named on the command line) and
``TRAJLAB_IMPORT_ROOTS`` (videos imported through the API) are settings; a refusal is a 400 that
names the value, the reason and what is allowed.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

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
