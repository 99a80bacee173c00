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

    def resolved(self, settings: dict | None) -> dict:
        """The backend's complete settings with every default filled in (unknown keys and bad
        values raise ``ValueError``), so two spellings of one configuration resolve to one dict."""
        return self.config_class().from_dict(settings).as_dict()

    def built(self, settings: dict | None):
        """The backend built from plain settings (checked as :meth:`resolved` checks them)."""
        return self.builder()(self.config_class().from_dict(settings))


def entry_of(registry: dict[str, BackendEntry], backend: str, what: str,
             error: type[ValueError] = ValueError) -> BackendEntry:
    """``registry[backend]``, or ``error`` naming the known ones ("unknown <what> 'x'; known: ...")."""
    if backend not in registry:
        raise error(f"unknown {what} {backend!r}; known: {', '.join(registry)}")
    return registry[backend]


def _load(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)
