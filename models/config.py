"""One small base for plain configs: ``@dataclass`` settings that travel as JSON.

``PlainConfig.from_dict(data)`` is strict: an unknown key is a ``ValueError`` that names it and the
known ones (a typo must not pass silently). Values are built from the field types: a dict becomes the
nested config a field is typed with, a list becomes a tuple where the field is a tuple. The config's
own ``__post_init__`` then checks the values. A dict field declared with
``field(metadata={"config": C})`` holds partial settings of the config class ``C`` (its defaults fill
in the rest where it is used); ``from_dict`` keeps the dict as given and checks it with
``C.from_dict``. ``as_dict()`` is the inverse and JSON-ready: nested
configs as dicts, tuples as lists. ``to_dict()`` is the same dict under its older name.
"""
from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

C = TypeVar("C", bound="PlainConfig")
# Wordings of the unknown-key error besides the default: backends speak of their "settings", and
# the SCOUT and ActPair configs name themselves first. Fields: {name} (the class), {keys} and {known}
# (comma-separated), {key_list} and {known_list} (Python lists).
UNKNOWN_SETTINGS = "{name}: unknown settings {keys}; known: {known}"
UNKNOWN_NAMED_KEYS = "unknown {name} keys: {key_list} (known: {known_list})"


class PlainConfig:
    """Mixin for a ``@dataclass`` of plain settings: strict ``from_dict`` and JSON-ready ``as_dict``."""

    # the wording of the unknown-key error (fields: see UNKNOWN_SETTINGS above)
    unknown_keys_message: ClassVar[str] = "{name}: unknown key(s) {keys}; known: {known}"

    @classmethod
    def from_dict(cls: type[C], data: Mapping | None) -> C:
        """A config from plain data (``None``: the defaults); unknown keys are a ``ValueError``."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{cls.__name__} needs a dict, got {type(data).__name__}")
        known = sorted(f.name for f in dataclasses.fields(cls) if f.init)
        unknown = sorted(set(data) - set(known), key=str)
        if unknown:
            raise ValueError(cls.unknown_keys_message.format(
                name=cls.__name__, keys=", ".join(map(str, unknown)), known=", ".join(known),
                key_list=unknown, known_list=known))
        hints = _field_types(cls)
        for f in dataclasses.fields(cls):
            nested = f.metadata.get("config")
            if nested is not None and isinstance(data.get(f.name), Mapping):
                nested.from_dict(data[f.name])
        return cls(**{key: _build(hints.get(key, Any), value) for key, value in data.items()})

    def as_dict(self) -> dict:
        """Every field as JSON-ready data: nested configs as dicts, tuples as lists."""
        return {f.name: plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_dict(self) -> dict:
        """The same as :meth:`as_dict` (the name some callers use)."""
        return self.as_dict()


def plain(value):
    """``value`` as JSON-ready data: configs and dataclasses as dicts, tuples as lists, paths as strings."""
    if isinstance(value, PlainConfig):
        return value.as_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {key: plain(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return value


@functools.cache
def _field_types(cls: type) -> dict[str, Any]:
    """The resolved type of each field (string annotations evaluated in the class's module)."""
    return get_type_hints(cls)


def _build(tp, value):
    """``value`` shaped by the type ``tp``: nested configs from dicts, tuples from lists; else unchanged."""
    if value is None or tp is Any:
        return value
    origin, args = get_origin(tp), get_args(tp)
    if origin is Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        if isinstance(value, Mapping):
            configs = [a for a in options if isinstance(a, type) and issubclass(a, PlainConfig)]
            if configs:
                return configs[0].from_dict(value)
        return _build(options[0], value) if len(options) == 1 else value
    if isinstance(tp, type) and issubclass(tp, PlainConfig):
        return tp.from_dict(value) if isinstance(value, Mapping) else value
    if (origin or tp) is tuple and isinstance(value, list | tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_build(args[0], v) for v in value)
        if args and len(args) == len(value):
            return tuple(_build(a, v) for a, v in zip(args, value))
        return tuple(value)
    if origin is list and args and isinstance(value, list | tuple):
        return [_build(args[0], v) for v in value]
    if origin in (dict, Mapping) and len(args) == 2 and isinstance(value, Mapping):
        return {key: _build(args[1], v) for key, v in value.items()}
    return value

