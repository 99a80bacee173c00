"""Variant settings relative to the grid's base config, resolved when the cells are built.

A variant of an experiment grid may give a number as a fraction of what the base config runs
instead of an absolute value: ``{OF_BASE: 0.5}`` in place of the value. The base value is the one
the grid's ``base`` sets at that place, else the default of the config that place belongs to (the
training config, or under ``"model"`` the model kind's config and the nested configs its fields
declare). The resolved value is ``⌊fraction · base⌋``, at least 1 and never above the base, an
integer where the base is one. So the paper's "Fast observations 32 → 16" is half of whatever the
base configures: 16 of the paper's 32, 4 of a quick run's 8, never more than the base.

The stored grid keeps the relative form; only the cells' training configs hold numbers.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

OF_BASE = "$of_base"                             # {OF_BASE: fraction} stands for fraction × the base value


def is_relative(value) -> bool:
    """Whether ``value`` is the relative form ``{OF_BASE: fraction}``."""
    return isinstance(value, Mapping) and set(value) == {OF_BASE}


def resolve_relative(config: Mapping, base: Mapping, model_kind: str, path: tuple[str, ...] = ()) -> dict:
    """``config`` (a cell's merged training config) with every relative value replaced by its number
    against ``base`` (module docstring). A bad fraction or a place with no numeric base is a
    ``ValueError`` that names the place."""
    out = {}
    for key, value in config.items():
        where = (*path, key)
        if is_relative(value):
            out[key] = _of_base(value[OF_BASE], _base_value(base, model_kind, where), where)
        elif isinstance(value, Mapping):
            out[key] = resolve_relative(value, base, model_kind, where)
        else:
            out[key] = value
    return out


def _of_base(fraction, base_value, where: tuple[str, ...]):
    name = ".".join(where)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not 0 < fraction <= 1:
        raise ValueError(f"{name}: {{{OF_BASE!r}: fraction}} needs a fraction in (0, 1], got {fraction!r}")
    if isinstance(base_value, bool) or not isinstance(base_value, int | float) or base_value <= 0:
        raise ValueError(f"{name}: a relative value needs a positive number as its base, got {base_value!r}")
    if isinstance(base_value, int):
        return min(base_value, max(1, math.floor(fraction * base_value)))
    return float(fraction * base_value)


def _base_value(base: Mapping, model_kind: str, where: tuple[str, ...]):
    """The value the base config sets at ``where``, else the default there."""
    node = base
    for key in where:
        if not isinstance(node, Mapping) or key not in node:
            return _default_at(model_kind, where)
        node = node[key]
    if is_relative(node):
        raise ValueError(f"{'.'.join(where)}: the base itself is relative")
    return node


def _default_at(model_kind: str, where: tuple[str, ...]):
    """The default of the setting at ``where`` of a training config of ``model_kind``."""
    from models.retrievers.registry import RETRIEVERS
    from models.training.trainer import TrainConfig

    cls, keys = TrainConfig, list(where)
    if keys[0] == "model":
        kind = RETRIEVERS.get(model_kind)
        if kind is None:
            raise ValueError(f"unknown model kind {model_kind!r}: no defaults to be relative to")
        cls, keys = kind.config, keys[1:]
    for i, key in enumerate(keys):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if key not in fields:
            raise ValueError(f"{'.'.join(where)}: {cls.__name__} has no setting {key!r}")
        f = fields[key]
        if i == len(keys) - 1:
            return f.default_factory() if f.default is dataclasses.MISSING else f.default
        cls = f.metadata.get("config")
        if cls is None:
            raise ValueError(f"{'.'.join(where)}: {key!r} holds no nested config with defaults")
    raise ValueError(f"{'.'.join(where)}: a relative value must name a setting")
