"""The shape of one backend in a family's registry (tracking, vlm, llm).

Each family keeps one literal mapping, name -> :class:`BackendEntry`, next to its builder. An entry
names the config class of the backend's settings and the class that takes that config, as
``"module:Name"``; they are imported on first use, so a family's package imports without torch,
transformers or sam2.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from models.config import PlainConfig


@dataclass(frozen=True)
class BackendEntry:
    """One backend: its settings' config class and its implementation (built from that config)."""

    config: str                                  # "module:Name" of its PlainConfig class
    build: str                                   # "module:Name" of the class (or function) config -> backend

    def config_class(self) -> type[PlainConfig]:
        return _load(self.config)

    def builder(self):
        return _load(self.build)


def _load(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)
